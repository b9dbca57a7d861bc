// The two patch formats the API server takes for every resource: JSON merge patch (RFC 7386,
// application/merge-patch+json) and JSON patch (RFC 6902, application/json-patch+json). Strategic merge
// patch, which only built-in types accept, is served as a merge patch: lists are replaced whole rather
// than merged by key (a simplification, noted in the README of this folder).

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

export function isObject(v: unknown): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

export function clone<T extends Json>(v: T): T {
  return structuredClone(v);
}

/** Equal as JSON values: key order does not matter, list order does. */
export function deepEqual(a: Json | undefined, b: Json | undefined): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((v, i) => deepEqual(v, b[i]));
  if (isObject(a)) {
    if (!isObject(b)) return false;
    const ka = Object.keys(a);
    return ka.length === Object.keys(b).length && ka.every((k) => k in b && deepEqual(a[k], b[k]));
  }
  return false;
}

/** RFC 7386: objects merge key by key, null deletes a key, anything else replaces. */
export function mergePatch(target: Json, patch: Json): Json {
  if (!isObject(patch)) return clone(patch);
  const out: JsonObject = isObject(target) ? { ...target } : {};
  for (const [k, v] of Object.entries(patch)) {
    if (v === null) delete out[k];
    else out[k] = mergePatch(out[k] ?? null, v);
  }
  return out;
}

export class PatchError extends Error {}

function unescape(token: string): string {
  return token.replace(/~1/g, '/').replace(/~0/g, '~');
}

function pointer(path: string): string[] {
  if (path === '') return [];
  if (!path.startsWith('/')) throw new PatchError(`invalid JSON pointer ${JSON.stringify(path)}`);
  return path.slice(1).split('/').map(unescape);
}

function parentOf(doc: Json, tokens: string[], path: string): { parent: JsonObject | Json[]; key: string } {
  let node: Json = doc;
  for (const t of tokens.slice(0, -1)) {
    if (Array.isArray(node)) node = node[Number(t)] ?? null;
    else if (isObject(node)) node = node[t] ?? null;
    else node = null;
    if (node === null) throw new PatchError(`path ${path}: a parent does not exist`);
  }
  if (!Array.isArray(node) && !isObject(node)) throw new PatchError(`path ${path}: the parent is not an object or array`);
  return { parent: node, key: tokens[tokens.length - 1]! };
}

function getAt(doc: Json, path: string): Json {
  let node: Json = doc;
  for (const t of pointer(path)) {
    const next: Json | undefined = Array.isArray(node) ? node[Number(t)] : isObject(node) ? node[t] : undefined;
    if (next === undefined) throw new PatchError(`path ${path} does not exist`);
    node = next;
  }
  return node;
}

function index(arr: Json[], key: string, path: string, forAdd: boolean): number {
  if (forAdd && key === '-') return arr.length;
  if (!/^(0|[1-9][0-9]*)$/.test(key)) throw new PatchError(`path ${path}: ${key} is not an array index`);
  const i = Number(key);
  if (i > arr.length || (!forAdd && i === arr.length)) throw new PatchError(`path ${path}: index ${i} out of range`);
  return i;
}

function add(doc: Json, path: string, value: Json): Json {
  const tokens = pointer(path);
  if (tokens.length === 0) return clone(value);
  const { parent, key } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) parent.splice(index(parent, key, path, true), 0, clone(value));
  else parent[key] = clone(value);
  return doc;
}

function remove(doc: Json, path: string): Json {
  const tokens = pointer(path);
  if (tokens.length === 0) throw new PatchError('cannot remove the whole document');
  const { parent, key } = parentOf(doc, tokens, path);
  if (Array.isArray(parent)) parent.splice(index(parent, key, path, false), 1);
  else if (key in parent) delete parent[key];
  else throw new PatchError(`path ${path} does not exist`);
  return doc;
}

/** RFC 6902: add, remove, replace, move, copy and test, applied in order to a copy of the document. */
export function jsonPatch(target: Json, ops: Json): Json {
  if (!Array.isArray(ops)) throw new PatchError('a JSON patch must be a list of operations');
  let doc = clone(target);
  for (const op of ops) {
    if (!isObject(op) || typeof op.op !== 'string' || typeof op.path !== 'string') throw new PatchError('each operation needs "op" and "path"');
    const { path } = op;
    switch (op.op) {
      case 'add':
        doc = add(doc, path, op.value ?? null);
        break;
      case 'remove':
        doc = remove(doc, path);
        break;
      case 'replace':
        getAt(doc, path);
        doc = add(remove(doc, path), path, op.value ?? null);
        break;
      case 'move': {
        const value = getAt(doc, String(op.from));
        doc = add(remove(doc, String(op.from)), path, value);
        break;
      }
      case 'copy':
        doc = add(doc, path, getAt(doc, String(op.from)));
        break;
      case 'test':
        if (!deepEqual(getAt(doc, path), op.value ?? null)) throw new PatchError(`test operation failed at ${path}`);
        break;
      default:
        throw new PatchError(`unknown JSON patch operation ${JSON.stringify(op.op)}`);
    }
  }
  return doc;
}
