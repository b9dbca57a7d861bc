// zod -> the structural OpenAPI v3 schema a CustomResourceDefinition needs. z.toJSONSchema does the
// translation; this file reshapes its output into what Kubernetes accepts as *structural*
// (https://kubernetes.io/docs/tasks/extend-kubernetes/custom-resources/custom-resource-definitions/#specifying-a-structural-schema):
// a `type` on every node, no $ref, no `additionalProperties: false` (unknown fields are pruned, or
// refused under kubectl's strict field validation), and anyOf/oneOf only as value checks without types,
// except the int-or-string shape of quantities and pool sizes. Anything else throws, so a schema change that Kubernetes
// would refuse fails the generator and its test instead of `kubectl apply`.

import { z } from 'zod';

export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
export type JsonObject = { [key: string]: Json };

/** Keys copied as they are: value validations and documentation OpenAPI v3 and Kubernetes both know. */
const PLAIN_KEYS = new Set(['type', 'description', 'enum', 'pattern', 'minLength', 'maxLength', 'minimum', 'maximum', 'exclusiveMinimum', 'exclusiveMaximum', 'minItems', 'maxItems', 'format', 'default', 'required']);
const SAFE_INTEGER = 9007199254740991;

function isObject(v: Json | undefined): v is JsonObject {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function fail(path: string, why: string): never {
  throw new Error(`CRD schema at ${path || '<root>'} is not structural: ${why}`);
}

/** Keys sorted, as controller-gen writes them, so the YAML is stable and diffs stay small. */
function sorted(o: JsonObject): JsonObject {
  return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]!]));
}

function intOrString(node: JsonObject, path: string): JsonObject {
  const branches = node.anyOf;
  if (!Array.isArray(branches)) fail(path, 'x-kubernetes-int-or-string without anyOf');
  const text = branches.find((b) => isObject(b) && b.type === 'string');
  const int = branches.find((b) => isObject(b) && b.type === 'integer');
  const out: JsonObject = { 'x-kubernetes-int-or-string': true, anyOf: [{ type: 'integer' }, { type: 'string' }] };
  // pattern checks only strings and minimum only numbers, so both sit on the node itself.
  if (isObject(text) && typeof text.pattern === 'string') out.pattern = text.pattern;
  if (isObject(int) && typeof int.minimum === 'number') out.minimum = int.minimum;
  if (isObject(int) && typeof int.maximum === 'number' && int.maximum !== SAFE_INTEGER) out.maximum = int.maximum;
  if (typeof node.description === 'string') out.description = node.description;
  if (node.default !== undefined) out.default = node.default;
  return sorted(out);
}

function convert(node: Json, path: string): JsonObject {
  if (!isObject(node)) fail(path, 'expected a schema object');
  if (node['x-kubernetes-int-or-string'] === true) return intOrString(node, path);
  if ('$ref' in node) fail(path, '$ref (use reused: inline)');
  if (typeof node.type !== 'string') fail(path, `no type (keys: ${Object.keys(node).join(', ')})`);
  const out: JsonObject = {};
  for (const [key, value] of Object.entries(node)) {
    if (key === '$schema') continue;
    if (PLAIN_KEYS.has(key) || key.startsWith('x-kubernetes-')) {
      out[key] = value;
    } else if (key === 'properties') {
      if (!isObject(value)) fail(path, 'properties is not an object');
      out.properties = Object.fromEntries(Object.entries(value).map(([k, v]) => [k, convert(v, `${path}.${k}`)]));
    } else if (key === 'items') {
      out.items = convert(value, `${path}[]`);
    } else if (key === 'additionalProperties') {
      if (value === false) continue; // closed objects: Kubernetes prunes (or strictly refuses) unknown fields instead
      if (node['x-kubernetes-preserve-unknown-fields'] === true) continue; // a Kubernetes type kept whole (affinity): the API server checks it in the Pod
      out.additionalProperties = convert(value, `${path}.*`);
    } else if (key === 'oneOf' || key === 'anyOf') {
      // Allowed only as value validation: no type, default, description or nested schema shape.
      if (!Array.isArray(value)) fail(path, `${key} is not a list`);
      for (const b of value) {
        if (!isObject(b) || Object.keys(b).some((k) => k !== 'required')) fail(path, `${key} may only list "required" alternatives`);
      }
      out[key] = value;
    } else {
      fail(path, `unsupported keyword ${key}`);
    }
  }
  if (out.type === 'integer') {
    if (out.maximum === SAFE_INTEGER) delete out.maximum;
    if (out.minimum === -SAFE_INTEGER) delete out.minimum;
  }
  // zod spells date-time as a long regex as well; the API server checks the format itself.
  if (out.format === 'date-time') delete out.pattern;
  if (out.type === 'object' && out.properties !== undefined && out.additionalProperties !== undefined) fail(path, 'both properties and additionalProperties');
  return sorted(out);
}

/** The structural OpenAPI v3 schema of a zod schema, as a CRD's openAPIV3Schema wants its parts. */
export function structuralSchema(schema: z.ZodType): JsonObject {
  const json = z.toJSONSchema(schema, { io: 'input', target: 'openapi-3.0', unrepresentable: 'throw', reused: 'inline', cycles: 'throw' });
  return convert(json as Json, '');
}
