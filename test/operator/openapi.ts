// Validates Kubernetes objects as an API server of a current release would take them, offline:
//
// - Built-in kinds against the upstream OpenAPI definitions of Kubernetes v1.36, twice over:
//   kubernetes-models 5.1.0 (its validate() is the upstream schema compiled to a validator: types,
//   required fields, enums, int-or-string) and @kubernetes/client-node 2.0.1's models (generated from
//   the release-1.36 spec; their attribute maps list every field a kind has), which gives the
//   unknown-field check that `kubectl apply --validate=strict` makes and the OpenAPI schemas alone do
//   not (they allow additional properties).
// - Our kinds (pgx.dev/v1alpha1) against the openAPIV3Schema of our generated CRDs in crds/, the way
//   the API server does it with fieldValidation=Strict: unknown fields refused, defaults applied, then
//   validated, CEL rules included (the API double's schema.ts).
// - Any other apiVersion/kind is a problem, never a silent pass.

import * as k8s from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { isObject, type Json, type JsonObject } from '../helpers/kube-api/patch.js';
import { applyDefaults, prune, validate } from '../helpers/kube-api/schema.js';
import { root } from './kube-tools.js';

/** The Kubernetes release whose OpenAPI definitions both libraries were generated from. */
export const KUBERNETES_RELEASE = '1.36';

interface ModelClass {
  apiVersion: string;
  kind: string;
  new (data: unknown): { validate(): void };
}

interface Attribute {
  baseName: string;
  type: string;
}

type AttributeModel = { getAttributeTypeMap(): Attribute[] };

const clientModels = k8s as unknown as Record<string, AttributeModel | undefined>;

function splitApiVersion(apiVersion: string): { group: string; version: string } {
  const i = apiVersion.indexOf('/');
  return i < 0 ? { group: '', version: apiVersion } : { group: apiVersion.slice(0, i), version: apiVersion.slice(i + 1) };
}

/** kubernetes-models' class for a kind: `kubernetes-models/<group>/<version>/<Kind>` (core: `v1/<Kind>`). */
async function modelClass(apiVersion: string, kind: string): Promise<ModelClass | null> {
  const { group, version } = splitApiVersion(apiVersion);
  if (!/^[a-z0-9.-]*$/.test(group) || !/^v[0-9a-z]+$/.test(version) || !/^[A-Z][A-Za-z0-9]*$/.test(kind)) return null;
  const specifier = `kubernetes-models/${group ? `${group}/` : ''}${version}/${kind}`;
  let mod: Record<string, unknown>;
  try {
    mod = (await import(specifier)) as Record<string, unknown>;
  } catch {
    return null;
  }
  const cls = mod[kind] as ModelClass | undefined;
  return cls && cls.apiVersion === apiVersion && cls.kind === kind ? cls : null;
}

/** client-node's model name for a kind: V1StatefulSet, V1beta1..., or group-qualified on a clash (CoreV1Event). */
function clientModelName(apiVersion: string, kind: string): string | null {
  const { group, version } = splitApiVersion(apiVersion);
  const v = version[0]!.toUpperCase() + version.slice(1);
  const groupWord = (group.split('.')[0] || 'core').replace(/^./, (c) => c.toUpperCase());
  for (const name of [`${v}${kind}`, `${groupWord}${v}${kind}`]) if (clientModels[name]?.getAttributeTypeMap) return name;
  return null;
}

const SCALARS = new Set(['string', 'number', 'boolean', 'Date', 'any', 'object', 'IntOrString']);

/** Fields the kind does not have, by client-node's attribute maps (its types are checked elsewhere). */
function unknownFields(value: Json, type: string, at: string, out: string[]): void {
  const list = /^Array<(.+)>$/.exec(type);
  if (list) {
    if (Array.isArray(value)) value.forEach((v, i) => unknownFields(v, list[1]!, `${at}[${i}]`, out));
    return;
  }
  const map = /^\{ \[key: string\]: (.+); \}$/.exec(type);
  if (map) {
    if (isObject(value)) for (const [k, v] of Object.entries(value)) unknownFields(v, map[1]!, `${at}.${k}`, out);
    return;
  }
  if (SCALARS.has(type)) return;
  const model = clientModels[type];
  if (!model?.getAttributeTypeMap) {
    out.push(`${at || '<root>'}: no client-node model ${type} to check fields against`);
    return;
  }
  if (!isObject(value)) return; // a type mismatch: kubernetes-models reports it
  const attrs = model.getAttributeTypeMap();
  for (const [k, v] of Object.entries(value)) {
    const a = attrs.find((x) => x.baseName === k);
    const where = at ? `${at}.${k}` : k;
    if (!a) out.push(`${where}: unknown field`);
    else if (v !== null) unknownFields(v, a.type, where, out);
  }
}

interface CrdKind {
  group: string;
  version: string;
  kind: string;
  schema: JsonObject;
}

let crdKinds: CrdKind[] | undefined;

/** Our kinds as the CRDs in crds/ define them (the files `npm run crds` writes and the chart ships). */
export function ourKinds(): CrdKind[] {
  if (crdKinds) return crdKinds;
  const dir = path.join(root, 'crds');
  crdKinds = [];
  for (const file of fs.readdirSync(dir).filter((f) => f.endsWith('.yaml')).sort()) {
    const crd = parseYaml(fs.readFileSync(path.join(dir, file), 'utf8')) as JsonObject;
    const spec = crd.spec as JsonObject;
    const names = spec.names as JsonObject;
    for (const v of spec.versions as JsonObject[]) {
      const schema = (v.schema as JsonObject).openAPIV3Schema as JsonObject;
      crdKinds.push({ group: spec.group as string, version: v.name as string, kind: names.kind as string, schema });
    }
  }
  return crdKinds;
}

/** What is wrong with one object; empty when an API server of that release would take it. */
export async function objectProblems(obj: JsonObject): Promise<string[]> {
  const apiVersion = obj.apiVersion;
  const kind = obj.kind;
  if (typeof apiVersion !== 'string' || typeof kind !== 'string') return ['apiVersion and kind are required'];
  const problems: string[] = [];
  const meta = obj.metadata;
  if (!isObject(meta) || (typeof meta.name !== 'string' && typeof meta.generateName !== 'string') || meta.name === '') problems.push('metadata.name: Required value');
  if (isObject(meta)) unknownFields(meta, 'V1ObjectMeta', 'metadata', problems);

  const { group, version } = splitApiVersion(apiVersion);
  const ours = ourKinds().find((k) => k.group === group && k.version === version && k.kind === kind);
  if (ours) {
    const body = structuredClone(obj);
    for (const f of prune(body, ours.schema)) problems.push(`${f}: unknown field (fieldValidation=Strict)`);
    applyDefaults(body, ours.schema);
    for (const c of validate(body, ours.schema, '', undefined)) problems.push(c.message);
    return problems;
  }

  const cls = await modelClass(apiVersion, kind);
  const clientName = clientModelName(apiVersion, kind);
  if (!cls || !clientName) return [`unknown kind ${kind} in ${apiVersion}: neither a Kubernetes ${KUBERNETES_RELEASE} kind nor one of our CRDs`];
  try {
    new cls(obj).validate();
  } catch (err) {
    problems.push(`OpenAPI: ${(err as Error).message}`);
  }
  const { metadata: _metadata, ...rest } = obj;
  unknownFields(rest, clientName, '', problems);
  return problems;
}

/** Problems of every object, as "Kind/name: problem" lines. */
export async function allProblems(objects: readonly JsonObject[]): Promise<string[]> {
  const out: string[] = [];
  for (const o of objects) {
    const name = isObject(o.metadata) ? String(o.metadata.name) : '?';
    for (const p of await objectProblems(o)) out.push(`${String(o.kind)}/${name}: ${p}`);
  }
  return out;
}
