// Label and field selectors as the API server parses them (?labelSelector=, ?fieldSelector=).
// Labels: `a=b`, `a==b`, `a!=b`, `a`, `!a`, `a in (x,y)`, `a notin (x,y)`, joined by commas (AND).
// Fields: `path=value`, `path==value`, `path!=value` on the paths the resource supports: metadata.name
// and metadata.namespace everywhere, and a few more per built-in type (resources.ts), as on a real server.

import { isObject, type Json, type JsonObject } from './patch.js';

export type Matcher = (object: JsonObject) => boolean;

export class SelectorError extends Error {}

/** Splits on commas outside parentheses. */
function terms(selector: string): string[] {
  const out: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < selector.length; i++) {
    const c = selector[i];
    if (c === '(') depth++;
    else if (c === ')') depth--;
    else if (c === ',' && depth === 0) {
      out.push(selector.slice(start, i));
      start = i + 1;
    }
  }
  out.push(selector.slice(start));
  return out.map((t) => t.trim()).filter((t) => t !== '');
}

function labelsOf(o: JsonObject): Record<string, string> {
  const labels = isObject(o.metadata) && isObject(o.metadata.labels) ? o.metadata.labels : {};
  return Object.fromEntries(Object.entries(labels).filter((e): e is [string, string] => typeof e[1] === 'string'));
}

export function labelMatcher(selector: string | undefined): Matcher {
  if (!selector) return () => true;
  const checks = terms(selector).map((t): ((l: Record<string, string>) => boolean) => {
    let m: RegExpExecArray | null;
    if ((m = /^([^\s!=]+)\s+(in|notin)\s+\(([^)]*)\)$/.exec(t))) {
      const [, key, op, list] = m;
      const values = list!.split(',').map((v) => v.trim());
      return op === 'in' ? (l) => key! in l && values.includes(l[key!]!) : (l) => !(key! in l) || !values.includes(l[key!]!);
    }
    if ((m = /^([^\s!=]+)\s*(==|=|!=)\s*([^\s]*)$/.exec(t))) {
      const [, key, op, value] = m;
      return op === '!=' ? (l) => l[key!] !== value : (l) => l[key!] === value;
    }
    if ((m = /^!([^\s!=]+)$/.exec(t))) return (l) => !(m![1]! in l);
    if ((m = /^([^\s!=()]+)$/.exec(t))) return (l) => m![1]! in l;
    throw new SelectorError(`unable to parse requirement: ${JSON.stringify(t)}`);
  });
  return (o) => {
    const l = labelsOf(o);
    return checks.every((c) => c(l));
  };
}

function fieldValue(o: JsonObject, path: string): string {
  let node: Json | undefined = o;
  for (const p of path.split('.')) node = isObject(node) ? node[p] : undefined;
  return node === undefined || node === null ? '' : typeof node === 'object' ? JSON.stringify(node) : String(node);
}

/** `allowed`: the field labels the resource supports; a real API server refuses any other with 400. */
export function fieldMatcher(selector: string | undefined, allowed: readonly string[]): Matcher {
  if (!selector) return () => true;
  const checks = terms(selector).map((t): Matcher => {
    const m = /^([A-Za-z0-9_.]+)\s*(==|=|!=)\s*(.*)$/.exec(t);
    if (!m) throw new SelectorError(`invalid field selector: ${JSON.stringify(t)}`);
    const [, path, op, value] = m;
    if (!allowed.includes(path!)) throw new SelectorError(`field label not supported: ${path}`);
    return op === '!=' ? (o) => fieldValue(o, path!) !== value : (o) => fieldValue(o, path!) === value;
  });
  return (o) => checks.every((c) => c(o));
}
