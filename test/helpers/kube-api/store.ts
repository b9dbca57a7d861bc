// The API server's storage semantics, without HTTP: what etcd plus the generic registry do for every
// resource. Objects live in memory; one counter is the resourceVersion of every write (etcd's revision);
// a bounded history of changes serves watches that resume from a resourceVersion, and a watch from one
// older than the history gets 410 Gone, as from the real watch cache. Each method names the real
// behaviour it mirrors. Errors are StatusErrors: the http layer sends them as `kind: Status` bodies.

import crypto from 'node:crypto';
import type { Clock } from '../../../src/clock.js';
import { clone, deepEqual, isObject, jsonPatch, mergePatch, PatchError, type Json, type JsonObject } from './patch.js';
import { apiVersionOf, BUILTIN_TYPES, qualifiedName, typeKey, typesFromCrd, type ResourceType } from './resources.js';
import { applyDefaults, prune, validate, type FieldCause } from './schema.js';
import { fieldMatcher, labelMatcher, SelectorError, type Matcher } from './selectors.js';

export type StatusReason = 'InternalError' | 'BadRequest' | 'Unauthorized' | 'NotFound' | 'AlreadyExists' | 'Conflict' | 'Invalid' | 'Gone' | 'MethodNotAllowed' | 'UnsupportedMediaType' | 'Forbidden';

/** A failed request, as the API server's metav1.Status. */
export class StatusError extends Error {
  constructor(
    readonly code: number,
    readonly reason: StatusReason,
    message: string,
    readonly details: JsonObject = {},
  ) {
    super(message);
  }

  toStatus(): JsonObject {
    return { kind: 'Status', apiVersion: 'v1', metadata: {}, status: 'Failure', message: this.message, reason: this.reason, details: this.details, code: this.code };
  }
}

export type EventType = 'ADDED' | 'MODIFIED' | 'DELETED';
export interface WatchEvent {
  type: EventType;
  object: JsonObject;
}

interface Change {
  rv: number;
  type: EventType;
  key: string;
  object: JsonObject;
  /** The object before a MODIFIED change, so a selector watch can turn it into ADDED or DELETED. */
  previous: JsonObject | null;
}

interface Watcher {
  key: string;
  namespace: string | null;
  matches: Matcher;
  send: (e: WatchEvent) => void;
}

export interface Selection {
  /** null: every namespace (and cluster-scoped types). */
  namespace: string | null;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
}

export interface WriteOptions {
  subresource?: 'status' | null;
  /** Strict refuses unknown fields of custom objects (kubectl's default); Warn and Ignore prune them. */
  fieldValidation?: string | null;
}

export interface WriteResult {
  object: JsonObject;
  warnings: string[];
}

export type PatchType = 'merge' | 'json' | 'strategic';

export type WatchStart = { gone: StatusError } | { stop: () => void };

/** The API server's name checks (apimachinery validation), with its words. */
const NAME_RULES: Record<ResourceType['nameRule'], { pattern: RegExp; max: number; words: string }> = {
  subdomain: {
    pattern: /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/,
    max: 253,
    words: "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
  },
  label: { pattern: /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/, max: 63, words: "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character" },
  dns1035: { pattern: /^[a-z]([-a-z0-9]*[a-z0-9])?$/, max: 63, words: "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character" },
  // RBAC objects: ValidatePathSegmentName (system:controller:... is a valid ClusterRole name).
  path: { pattern: /^(?!\.{1,2}$)[^/%]+$/, max: 253, words: "may not be '.' or '..' and may not contain '/' or '%'" },
};

const LABEL_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const LABEL_NAME_WORDS = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character";

/** apimachinery's IsQualifiedName: [prefix/]name, the prefix a DNS subdomain. */
function qualifiedNameProblem(key: string): string | null {
  const parts = key.split('/');
  if (parts.length > 2) return `a qualified name must consist of alphanumeric characters, '-', '_' or '.', with an optional DNS subdomain prefix and '/'`;
  const name = parts[parts.length - 1]!;
  if (parts.length === 2 && nameProblem('subdomain', parts[0]!) !== null) return `prefix part ${NAME_RULES.subdomain.words}`;
  if (name.length > 63) return 'name part must be no more than 63 characters';
  return LABEL_NAME.test(name) ? null : LABEL_NAME_WORDS;
}

/** What the API server checks of any object's metadata: label keys and values, annotation keys, owner references. */
function metadataProblems(m: JsonObject): FieldCause[] {
  const causes: FieldCause[] = [];
  const bad = (field: string, value: string, why: string): void => {
    causes.push({ reason: 'FieldValueInvalid', field, message: `${field}: Invalid value: ${JSON.stringify(value)}: ${why}` });
  };
  for (const [k, v] of Object.entries(isObject(m.labels) ? m.labels : {})) {
    const keyProblem = qualifiedNameProblem(k);
    if (keyProblem) bad('metadata.labels', k, keyProblem);
    const value = String(v);
    if (value.length > 63) bad('metadata.labels', value, 'must be no more than 63 characters');
    else if (value !== '' && !LABEL_NAME.test(value)) bad('metadata.labels', value, "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character");
  }
  for (const k of Object.keys(isObject(m.annotations) ? m.annotations : {})) {
    const keyProblem = qualifiedNameProblem(k.toLowerCase());
    if (keyProblem) bad('metadata.annotations', k, keyProblem);
  }
  const refs = Array.isArray(m.ownerReferences) ? m.ownerReferences : [];
  refs.forEach((r, i) => {
    for (const f of ['apiVersion', 'kind', 'name', 'uid']) {
      if (!isObject(r) || typeof r[f] !== 'string' || r[f] === '') causes.push({ reason: 'FieldValueRequired', field: `metadata.ownerReferences[${i}].${f}`, message: `metadata.ownerReferences[${i}].${f}: Required value` });
    }
  });
  const controllers = refs.filter((r) => isObject(r) && r.controller === true);
  if (controllers.length > 1) {
    causes.push({ reason: 'FieldValueInvalid', field: 'metadata.ownerReferences', message: `metadata.ownerReferences: Invalid value: []v1.OwnerReference: Only one reference can have Controller set to true` });
  }
  return causes;
}

function nameProblem(rule: ResourceType['nameRule'], name: string): string | null {
  const r = NAME_RULES[rule];
  if (name.length > r.max) return `must be no more than ${r.max} characters`;
  return r.pattern.test(name) ? null : r.words;
}

function meta(o: JsonObject): JsonObject {
  if (!isObject(o.metadata)) o.metadata = {};
  return o.metadata as JsonObject;
}

function nameKey(namespace: string, name: string): string {
  return `${namespace}/${name}`;
}

/** Everything but metadata and status: a change here bumps metadata.generation. */
function specPart(o: JsonObject): JsonObject {
  const { metadata: _m, status: _s, ...rest } = o;
  return rest;
}

export class ObjectStore {
  private readonly types = new Map<string, ResourceType>();
  private readonly objects = new Map<string, Map<string, JsonObject>>();
  /** uid -> where the object is, for owner lookups by the garbage collector. */
  private readonly byUid = new Map<string, { key: string; namespace: string }>();
  /** Propagation policy of a deletion waiting on finalizers, applied when the object finally goes. */
  private readonly pendingPolicy = new Map<string, string>();
  private readonly history: Change[] = [];
  private readonly watchers = new Set<Watcher>();
  private revision = 0;
  /** Watches may resume from this resourceVersion or later; older ones get 410 Gone. */
  private oldestResumable = 0;
  private serviceIps = 0;

  constructor(
    private readonly clock: Clock,
    private readonly historyLimit = 10_000,
  ) {
    for (const t of BUILTIN_TYPES) this.register(t);
  }

  // --- types ---

  register(t: ResourceType): void {
    const key = typeKey(t.group, t.version, t.plural);
    this.types.set(key, t);
    if (!this.objects.has(key)) this.objects.set(key, new Map());
  }

  typeFor(group: string, version: string, plural: string): ResourceType | undefined {
    return this.types.get(typeKey(group, version, plural));
  }

  allTypes(): ResourceType[] {
    return [...this.types.values()];
  }

  resourceVersion(): string {
    return String(this.revision);
  }

  /**
   * Expires every resourceVersion issued so far, as an API server restart (a fresh watch cache) or an
   * etcd compaction does: a watch resuming from any of them gets 410 Gone; a new list works as before.
   */
  compact(): void {
    this.history.length = 0;
    this.oldestResumable = ++this.revision;
  }

  // --- reads ---

  get(t: ResourceType, namespace: string, name: string): JsonObject {
    const o = this.bucket(t).get(nameKey(this.ns(t, namespace), name));
    if (!o) throw this.notFound(t, name);
    return clone(o);
  }

  list(t: ResourceType, sel: Selection): { items: JsonObject[]; resourceVersion: string } {
    const match = this.matcher(sel, t);
    const items = [...this.bucket(t).values()].filter((o) => this.inNamespace(o, sel.namespace) && match(o)).map((o) => clone(o));
    // etcd returns keys in byte order: namespace, then name.
    const key = (o: JsonObject): string => `${String(meta(o).namespace ?? '')}/${String(meta(o).name)}`;
    items.sort((a, b) => (key(a) < key(b) ? -1 : key(a) > key(b) ? 1 : 0));
    return { items, resourceVersion: this.resourceVersion() };
  }

  // --- writes ---

  /** POST: 409 AlreadyExists if the name is taken (also while the old object is being deleted). */
  create(t: ResourceType, namespace: string, body: Json, opts: WriteOptions = {}): WriteResult {
    const obj = this.checkBody(t, body);
    const m = meta(obj);
    if (m.resourceVersion !== undefined && m.resourceVersion !== '') throw new StatusError(400, 'BadRequest', 'resourceVersion should not be set on objects to be created');
    this.checkNamespace(t, namespace, m);
    if (typeof m.name !== 'string' || m.name === '') {
      if (typeof m.generateName !== 'string' || m.generateName === '') throw this.invalid(t, '', [{ reason: 'FieldValueRequired', field: 'metadata.name', message: 'metadata.name: Required value: name or generateName is required' }]);
      m.name = m.generateName + crypto.randomBytes(4).toString('hex').slice(0, 5);
    }
    const name = String(m.name);
    const problem = nameProblem(t.nameRule, name);
    if (problem !== null) throw this.invalid(t, name, [{ reason: 'FieldValueInvalid', field: 'metadata.name', message: `metadata.name: Invalid value: "${name}": ${problem}` }]);
    const bucket = this.bucket(t);
    const key = nameKey(this.ns(t, namespace), name);
    if (bucket.has(key)) throw new StatusError(409, 'AlreadyExists', `${qualifiedName(t)} "${name}" already exists`, this.details(t, name));
    // Status is the controllers' to write through /status; a create cannot set it.
    if (t.statusSubresource) delete obj.status;
    for (const f of ['uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'generation', 'managedFields', 'selfLink']) delete m[f];
    if (t.namespaced) m.namespace = namespace;
    else delete m.namespace;
    const warnings = this.admit(t, obj, null, opts);
    m.uid = crypto.randomUUID();
    m.creationTimestamp = this.timestamp();
    m.generation = 1;
    m.resourceVersion = String(++this.revision);
    if (t.kind === 'CustomResourceDefinition') this.installCrd(obj);
    bucket.set(key, obj);
    this.byUid.set(String(m.uid), { key: typeKey(t.group, t.version, t.plural), namespace: this.ns(t, namespace) });
    this.record(t, 'ADDED', obj, null);
    this.checkOwners(t, obj);
    return { object: clone(obj), warnings };
  }

  /** PUT: optimistic concurrency on metadata.resourceVersion (409 Conflict when stale). */
  update(t: ResourceType, namespace: string, name: string, body: Json, opts: WriteOptions = {}): WriteResult {
    const current = this.get(t, namespace, name);
    const obj = this.checkBody(t, body);
    const m = meta(obj);
    if (m.name !== undefined && m.name !== name) throw new StatusError(400, 'BadRequest', `the name of the object (${String(m.name)}) does not match the name on the URL (${name})`);
    this.checkNamespace(t, namespace, m);
    const rv = m.resourceVersion;
    if (rv === undefined || rv === '') {
      // Custom resources never allow an unconditional update; most built-in types do.
      if (t.custom) throw this.invalid(t, name, [{ reason: 'FieldValueInvalid', field: 'metadata.resourceVersion', message: 'metadata.resourceVersion: Invalid value: 0x0: must be specified for an update' }]);
    } else if (rv !== meta(current).resourceVersion) {
      throw this.conflict(t, name);
    }
    return this.commit(t, current, obj, opts);
  }

  /** PATCH: the patch applies to the stored object; a resourceVersion in the patch is a precondition. */
  patch(t: ResourceType, namespace: string, name: string, type: PatchType, patch: Json, opts: WriteOptions = {}): WriteResult {
    if (type === 'strategic' && t.custom) throw new StatusError(415, 'UnsupportedMediaType', `the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml`);
    const current = this.get(t, namespace, name);
    let patched: Json;
    try {
      patched = type === 'json' ? jsonPatch(current, patch) : mergePatch(current, patch);
    } catch (err) {
      if (err instanceof PatchError) throw new StatusError(422, 'Invalid', `the server rejected our request due to an error in our request: ${err.message}`);
      throw err;
    }
    if (!isObject(patched)) throw new StatusError(422, 'Invalid', 'the patch does not produce an object');
    if (meta(patched).resourceVersion !== meta(current).resourceVersion) throw this.conflict(t, name);
    return this.commit(t, current, patched, opts);
  }

  /**
   * DELETE: without finalizers the object goes at once (200); with them it gets a deletionTimestamp and
   * stays until a write removes the last finalizer (202). Then the garbage collector deletes (or, with
   * propagationPolicy Orphan, releases) the objects it owns.
   */
  delete(t: ResourceType, namespace: string, name: string, opts: { propagationPolicy?: string | null; preconditions?: JsonObject | null } = {}): { object: JsonObject; code: 200 | 202 } {
    const current = this.get(t, namespace, name);
    const m = meta(current);
    const pre = opts.preconditions ?? {};
    if (typeof pre.uid === 'string' && pre.uid !== m.uid) {
      throw new StatusError(409, 'Conflict', `Precondition failed: UID in precondition: ${pre.uid}, UID in object meta: ${String(m.uid)}`, this.details(t, name));
    }
    if (typeof pre.resourceVersion === 'string' && pre.resourceVersion !== m.resourceVersion) {
      throw new StatusError(409, 'Conflict', `Precondition failed: ResourceVersion in precondition: ${pre.resourceVersion}, ResourceVersion in object meta: ${String(m.resourceVersion)}`, this.details(t, name));
    }
    if (opts.propagationPolicy) this.pendingPolicy.set(String(m.uid), opts.propagationPolicy);
    const finalizers = Array.isArray(m.finalizers) ? m.finalizers : [];
    if (finalizers.length === 0) return { object: this.remove(t, current), code: 200 };
    if (m.deletionTimestamp !== undefined) return { object: current, code: 202 };
    const next = clone(current);
    const nm = meta(next);
    nm.deletionTimestamp = this.timestamp();
    nm.deletionGracePeriodSeconds = 0;
    nm.generation = Number(nm.generation ?? 0) + 1;
    return { object: this.store(t, current, next), code: 202 };
  }

  // --- watch ---

  /**
   * A watch from resourceVersion: unset, '' or '0' first sends ADDED for every object there is (the
   * "initial events" of a real watch), a number replays the changes after it; a number older than the
   * history is 410 Gone. Changes are filtered by namespace and selectors, and an object moving into or
   * out of a label selector is seen as ADDED or DELETED, as a real watch does.
   */
  watch(t: ResourceType, sel: Selection, resourceVersion: string | undefined, send: (e: WatchEvent) => void): WatchStart {
    const key = typeKey(t.group, t.version, t.plural);
    const matches = this.matcher(sel, t);
    const watcher: Watcher = { key, namespace: sel.namespace, matches, send };
    if (resourceVersion === undefined || resourceVersion === '' || resourceVersion === '0') {
      for (const o of this.list(t, sel).items) send({ type: 'ADDED', object: o });
    } else {
      if (!/^[0-9]+$/.test(resourceVersion)) throw new StatusError(400, 'BadRequest', `invalid resource version "${resourceVersion}"`);
      const from = Number(resourceVersion);
      if (from < this.oldestResumable) {
        return { gone: new StatusError(410, 'Gone', `too old resource version: ${from} (${this.oldestResumable})`) };
      }
      for (const c of this.history) if (c.rv > from && c.key === key) this.deliver(watcher, c);
    }
    this.watchers.add(watcher);
    return { stop: () => this.watchers.delete(watcher) };
  }

  // --- internals ---

  private bucket(t: ResourceType): Map<string, JsonObject> {
    return this.objects.get(typeKey(t.group, t.version, t.plural))!;
  }

  private ns(t: ResourceType, namespace: string): string {
    return t.namespaced ? namespace : '';
  }

  private inNamespace(o: JsonObject, namespace: string | null): boolean {
    return namespace === null || (meta(o).namespace ?? '') === namespace;
  }

  private matcher(sel: Selection, t: ResourceType): Matcher {
    try {
      const labels = labelMatcher(sel.labelSelector);
      const fields = fieldMatcher(sel.fieldSelector, ['metadata.name', 'metadata.namespace', ...t.fieldLabels]);
      return (o) => labels(o) && fields(o);
    } catch (err) {
      if (err instanceof SelectorError) throw new StatusError(400, 'BadRequest', err.message);
      throw err;
    }
  }

  private timestamp(): string {
    return new Date(this.clock.now()).toISOString().replace(/\.[0-9]{3}Z$/, 'Z');
  }

  private details(t: ResourceType, name: string): JsonObject {
    return { name, group: t.group, kind: t.plural };
  }

  private notFound(t: ResourceType, name: string): StatusError {
    return new StatusError(404, 'NotFound', `${qualifiedName(t)} "${name}" not found`, this.details(t, name));
  }

  private conflict(t: ResourceType, name: string): StatusError {
    return new StatusError(409, 'Conflict', `Operation cannot be fulfilled on ${qualifiedName(t)} "${name}": the object has been modified; please apply your changes to the latest version and try again`, this.details(t, name));
  }

  private invalid(t: ResourceType, name: string, causes: FieldCause[]): StatusError {
    const list = causes.map((c) => c.message);
    const text = list.length === 1 ? list[0]! : `[${list.join(', ')}]`;
    return new StatusError(422, 'Invalid', `${t.kind}${t.group ? `.${t.group}` : ''} "${name}" is invalid: ${text}`, { name, group: t.group, kind: t.kind, causes: causes.map((c) => ({ ...c })) });
  }

  private checkBody(t: ResourceType, body: Json): JsonObject {
    if (!isObject(body)) throw new StatusError(400, 'BadRequest', 'the request body must be a JSON object');
    const obj = clone(body);
    if (obj.kind !== undefined && obj.kind !== t.kind) throw new StatusError(400, 'BadRequest', `the kind of the object (${String(obj.kind)}) does not match the resource (${t.kind})`);
    if (obj.apiVersion !== undefined && obj.apiVersion !== apiVersionOf(t)) throw new StatusError(400, 'BadRequest', `the API version of the object (${String(obj.apiVersion)}) does not match the resource (${apiVersionOf(t)})`);
    obj.apiVersion = apiVersionOf(t);
    obj.kind = t.kind;
    return obj;
  }

  private checkNamespace(t: ResourceType, namespace: string, m: JsonObject): void {
    if (t.namespaced && m.namespace !== undefined && m.namespace !== '' && m.namespace !== namespace) {
      throw new StatusError(400, 'BadRequest', 'the namespace of the provided object does not match the namespace sent on the request');
    }
  }

  /** Type-specific admission: a CRD's schema for custom objects, and what the real registries do for a few built-ins. */
  private admit(t: ResourceType, obj: JsonObject, old: JsonObject | null, opts: WriteOptions): string[] {
    const warnings: string[] = [];
    const metaCauses = metadataProblems(meta(obj));
    if (metaCauses.length > 0) throw this.invalid(t, String(meta(obj).name ?? ''), metaCauses);
    if (t.schema) {
      const unknown = prune(obj, t.schema);
      if (unknown.length > 0) {
        const words = unknown.map((p) => `unknown field "${p}"`);
        if (opts.fieldValidation === 'Strict') throw new StatusError(400, 'BadRequest', `${t.kind} in version "${t.version}" cannot be handled as a ${t.kind}: strict decoding error: ${words.join(', ')}`);
        if (opts.fieldValidation !== 'Ignore') warnings.push(...words);
      }
      applyDefaults(obj, t.schema);
      const causes = validate(obj, t.schema, '', old ?? undefined);
      if (causes.length > 0) throw this.invalid(t, String(meta(obj).name ?? ''), causes);
    }
    if (t.kind === 'Secret' && t.group === '') {
      // stringData is write-only: merged into data (base64) on every write.
      if (isObject(obj.stringData)) {
        const data = isObject(obj.data) ? obj.data : {};
        for (const [k, v] of Object.entries(obj.stringData)) data[k] = Buffer.from(String(v)).toString('base64');
        obj.data = data;
      }
      delete obj.stringData;
      if (obj.type === undefined) obj.type = 'Opaque';
    }
    if (t.kind === 'Service' && t.group === '') {
      // The API server allocates a cluster IP (unless headless: None) and keeps it across updates.
      const spec = isObject(obj.spec) ? obj.spec : (obj.spec = {});
      if (spec.type === undefined) spec.type = 'ClusterIP';
      const oldIp = old && isObject(old.spec) ? old.spec.clusterIP : undefined;
      if (spec.clusterIP === undefined || spec.clusterIP === '') spec.clusterIP = oldIp ?? `10.96.${Math.floor(++this.serviceIps / 250)}.${(this.serviceIps % 250) + 1}`;
      else if (oldIp !== undefined && spec.clusterIP !== oldIp) throw this.invalid(t, String(meta(obj).name), [{ reason: 'FieldValueInvalid', field: 'spec.clusterIP', message: 'spec.clusterIP: Invalid value: ' + JSON.stringify(spec.clusterIP) + ': field is immutable' }]);
      spec.clusterIPs = [spec.clusterIP];
    }
    if (t.kind === 'CustomResourceDefinition') {
      try {
        typesFromCrd(obj);
      } catch (err) {
        throw this.invalid(t, String(meta(obj).name ?? ''), [{ reason: 'FieldValueInvalid', field: 'spec', message: `spec: Invalid value: "object": ${(err as Error).message}` }]);
      }
    }
    return warnings;
  }

  /** The common tail of PUT and PATCH: keep what the server owns, admit, bump generation, store. */
  private commit(t: ResourceType, current: JsonObject, next: JsonObject, opts: WriteOptions): WriteResult {
    const cm = meta(current);
    let obj: JsonObject;
    if (opts.subresource === 'status') {
      // /status changes .status and nothing else.
      obj = clone(current);
      if (next.status === undefined) delete obj.status;
      else obj.status = next.status;
    } else {
      obj = next;
      // The main endpoint of a type with a status subresource ignores .status.
      if (t.statusSubresource) {
        if (current.status === undefined) delete obj.status;
        else obj.status = clone(current.status);
      }
    }
    obj.apiVersion = current.apiVersion!;
    obj.kind = current.kind!;
    const m = meta(obj);
    for (const f of ['uid', 'creationTimestamp', 'deletionTimestamp', 'deletionGracePeriodSeconds', 'generation', 'namespace', 'name', 'resourceVersion']) {
      if (cm[f] === undefined) delete m[f];
      else m[f] = cm[f]!;
    }
    if (cm.deletionTimestamp !== undefined) {
      const before = new Set(Array.isArray(cm.finalizers) ? cm.finalizers : []);
      const added = (Array.isArray(m.finalizers) ? m.finalizers : []).filter((f) => !before.has(f));
      if (added.length > 0) throw new StatusError(422, 'Forbidden', `${qualifiedName(t)} "${String(cm.name)}" is forbidden: no new finalizers can be added if the object is being deleted, found new finalizers ${JSON.stringify(added)}`);
    }
    const warnings = this.admit(t, obj, current, opts);
    if (!deepEqual(specPart(obj), specPart(current))) m.generation = Number(cm.generation ?? 0) + 1;
    if (deepEqual(obj, current)) return { object: current, warnings }; // a no-op write changes nothing, not even resourceVersion
    const finalizers = Array.isArray(m.finalizers) ? m.finalizers : [];
    if (m.deletionTimestamp !== undefined && finalizers.length === 0) return { object: this.remove(t, obj), warnings };
    if (t.kind === 'CustomResourceDefinition') this.installCrd(obj);
    const stored = this.store(t, current, obj);
    if (!deepEqual(m.ownerReferences, cm.ownerReferences)) this.checkOwners(t, obj);
    return { object: stored, warnings };
  }

  private store(t: ResourceType, previous: JsonObject, obj: JsonObject): JsonObject {
    const m = meta(obj);
    m.resourceVersion = String(++this.revision);
    this.bucket(t).set(nameKey(String(m.namespace ?? ''), String(m.name)), obj);
    this.record(t, 'MODIFIED', obj, previous);
    return clone(obj);
  }

  private remove(t: ResourceType, obj: JsonObject): JsonObject {
    const m = meta(obj);
    m.resourceVersion = String(++this.revision);
    this.bucket(t).delete(nameKey(String(m.namespace ?? ''), String(m.name)));
    const uid = String(m.uid);
    this.byUid.delete(uid);
    this.record(t, 'DELETED', obj, null);
    if (t.kind === 'CustomResourceDefinition') this.uninstallCrd(obj);
    const policy = this.pendingPolicy.get(uid) ?? 'Background';
    this.pendingPolicy.delete(uid);
    // The garbage collector is a controller in kube-controller-manager: it acts after the fact.
    setImmediate(() => this.collectGarbage(uid, policy));
    return clone(obj);
  }

  private record(t: ResourceType, type: EventType, obj: JsonObject, previous: JsonObject | null): void {
    const change: Change = { rv: this.revision, type, key: typeKey(t.group, t.version, t.plural), object: clone(obj), previous: previous ? clone(previous) : null };
    this.history.push(change);
    while (this.history.length > this.historyLimit) this.oldestResumable = this.history.shift()!.rv;
    for (const w of this.watchers) if (w.key === change.key) this.deliver(w, change);
  }

  private deliver(w: Watcher, c: Change): void {
    const now = this.inNamespace(c.object, w.namespace) && w.matches(c.object);
    const before = c.previous !== null && this.inNamespace(c.previous, w.namespace) && w.matches(c.previous);
    let type: EventType | null = null;
    if (c.type === 'MODIFIED') type = now && before ? 'MODIFIED' : now ? 'ADDED' : before ? 'DELETED' : null;
    else if (now) type = c.type;
    if (type !== null) w.send({ type, object: clone(c.object) });
  }

  /** Whether an owner reference points at an object that exists where the dependent can own-link to it. */
  private ownerAlive(ref: Json, dependentNamespace: string): boolean {
    if (!isObject(ref) || typeof ref.uid !== 'string') return false;
    const owner = this.byUid.get(ref.uid);
    // A namespaced dependent's owner must be in its namespace or cluster-scoped; otherwise it is absent.
    return owner !== undefined && (owner.namespace === '' || owner.namespace === dependentNamespace);
  }

  /**
   * The garbage collector, for one dependent: with no owner left it is deleted (or, after an Orphan
   * deletion of `orphanOf`, released); references to absent owners are dropped while another remains.
   */
  private collect(t: ResourceType, o: JsonObject, orphanOf: string | null): void {
    const refs = Array.isArray(meta(o).ownerReferences) ? (meta(o).ownerReferences as Json[]) : [];
    const namespace = String(meta(o).namespace ?? '');
    const name = String(meta(o).name);
    const alive = refs.filter((r) => this.ownerAlive(r, namespace));
    if (alive.length === refs.length) return;
    try {
      if (alive.length > 0 || orphanOf !== null) {
        const next = clone(o);
        if (alive.length > 0) meta(next).ownerReferences = alive;
        else delete meta(next).ownerReferences;
        this.commit(t, this.get(t, namespace, name), next, {});
      } else {
        this.delete(t, namespace, name, { propagationPolicy: 'Background' });
      }
    } catch {
      // gone meanwhile: nothing left to collect
    }
  }

  /** After an owner is removed: its dependents, by uid, in every type. */
  private collectGarbage(ownerUid: string, policy: string): void {
    for (const t of this.allTypes()) {
      for (const o of [...this.bucket(t).values()]) {
        const refs = Array.isArray(meta(o).ownerReferences) ? (meta(o).ownerReferences as Json[]) : [];
        if (refs.some((r) => isObject(r) && r.uid === ownerUid)) this.collect(t, o, policy === 'Orphan' ? ownerUid : null);
      }
    }
  }

  /** After a write that sets owner references: a dependent of owners that do not exist is collected too. */
  private checkOwners(t: ResourceType, obj: JsonObject): void {
    const m = meta(obj);
    if (!Array.isArray(m.ownerReferences) || m.ownerReferences.length === 0) return;
    const namespace = String(m.namespace ?? '');
    const name = String(m.name);
    setImmediate(() => {
      const current = this.bucket(t).get(nameKey(namespace, name));
      if (current && meta(current).uid === m.uid) this.collect(t, current, null);
    });
  }

  private installCrd(crd: JsonObject): void {
    for (const t of typesFromCrd(crd)) this.register(t);
    // What the apiextensions controller reports once the names are served.
    const spec = crd.spec as JsonObject;
    crd.status = {
      acceptedNames: clone(spec.names ?? {}),
      storedVersions: (Array.isArray(spec.versions) ? spec.versions : []).filter(isObject).filter((v) => v.storage === true).map((v) => String(v.name)),
      conditions: [
        { type: 'NamesAccepted', status: 'True', reason: 'NoConflicts', message: 'no conflicts found', lastTransitionTime: this.timestamp() },
        { type: 'Established', status: 'True', reason: 'InitialNamesAccepted', message: 'the initial names have been accepted', lastTransitionTime: this.timestamp() },
      ],
    };
  }

  private uninstallCrd(crd: JsonObject): void {
    for (const t of typesFromCrd(crd)) {
      const key = typeKey(t.group, t.version, t.plural);
      for (const o of [...(this.objects.get(key)?.values() ?? [])]) this.remove(t, clone(o));
      this.types.delete(key);
      this.objects.delete(key);
    }
  }
}
