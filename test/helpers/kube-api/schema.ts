// What a real API server does with a custom object against its CRD's structural schema, in the order
// it does it: prune unknown fields (reporting them, so fieldValidation=Strict can refuse and Warn can
// warn), apply `default`s, then validate (types, enum, pattern, lengths, bounds, required, oneOf, and
// the x-kubernetes-validations CEL rules our CRDs use). Messages follow kube-openapi's wording, e.g.
// `spec.ttl: Invalid value: "-1h": spec.ttl in body should match '^([0-9]+(s|m|h|d))+$'`.
//
// CEL is not evaluated in general: only the rule shapes listed in KNOWN_RULES are understood, and a CRD
// with any other rule is refused when it is installed, so a rule can never be silently skipped.

import { clone, deepEqual, isObject, type Json, type JsonObject } from './patch.js';

export interface FieldCause {
  reason: 'FieldValueRequired' | 'FieldValueInvalid' | 'FieldValueNotSupported' | 'FieldValueTooLong' | 'FieldValueTypeInvalid';
  message: string;
  field: string;
}

type RuleCheck = (self: Json, old: Json | undefined) => boolean | 'skip';

const KNOWN_RULES: { pattern: RegExp; make: (m: RegExpExecArray) => RuleCheck }[] = [
  // A transition rule: checked on update only, when the field existed before.
  { pattern: /^self == oldSelf$/, make: () => (self, old) => (old === undefined ? 'skip' : deepEqual(self, old)) },
  { pattern: /^self\.metadata\.name\.size\(\) <= ([0-9]+)$/, make: (m) => (self) => nameOf(self).length <= Number(m[1]) },
  { pattern: /^self\.metadata\.name\.matches\('([^']*)'\)$/, make: (m) => (self) => new RegExp(m[1]!).test(nameOf(self)) },
  // Two optional fields that exclude each other.
  { pattern: /^!\(has\(self\.(\w+)\) && has\(self\.(\w+)\)\)$/, make: (m) => (self) => !(isObject(self) && self[m[1]!] !== undefined && self[m[2]!] !== undefined) },
];

function nameOf(self: Json): string {
  return isObject(self) && isObject(self.metadata) && typeof self.metadata.name === 'string' ? self.metadata.name : '';
}

function compileRule(rule: string): RuleCheck {
  for (const k of KNOWN_RULES) {
    const m = k.pattern.exec(rule);
    if (m) return k.make(m);
  }
  throw new Error(`the Kubernetes API test double cannot evaluate the CEL rule ${JSON.stringify(rule)}; teach it in test/helpers/kube-api/schema.ts`);
}

/** Throws if the schema has a CEL rule the double does not understand (called when a CRD is installed). */
export function checkRules(schema: JsonObject): void {
  walk(schema, (node) => {
    const rules = node['x-kubernetes-validations'];
    if (Array.isArray(rules)) for (const r of rules) if (isObject(r) && typeof r.rule === 'string') compileRule(r.rule);
  });
}

function walk(node: Json, visit: (n: JsonObject) => void): void {
  if (!isObject(node)) return;
  visit(node);
  if (isObject(node.properties)) for (const child of Object.values(node.properties)) walk(child, visit);
  if (node.items !== undefined) walk(node.items, visit);
  if (isObject(node.additionalProperties)) walk(node.additionalProperties, visit);
}

function keepsUnknown(schema: JsonObject): boolean {
  return schema['x-kubernetes-preserve-unknown-fields'] === true;
}

/** Removes fields the schema does not declare; returns their paths. The root's metadata is left alone. */
export function prune(value: Json, schema: JsonObject, path = '', pruned: string[] = [], root = true): string[] {
  if (keepsUnknown(schema)) return pruned;
  if (Array.isArray(value) && isObject(schema.items)) {
    value.forEach((v, i) => prune(v, schema.items as JsonObject, `${path}[${i}]`, pruned, false));
  } else if (isObject(value)) {
    const props = isObject(schema.properties) ? schema.properties : null;
    const extra = isObject(schema.additionalProperties) ? schema.additionalProperties : null;
    for (const key of Object.keys(value)) {
      const at = path ? `${path}.${key}` : key;
      if (root && key === 'metadata') continue;
      const sub = props?.[key];
      if (isObject(sub)) prune(value[key]!, sub, at, pruned, false);
      else if (extra) prune(value[key]!, extra, at, pruned, false);
      else if (schema.additionalProperties !== true) {
        delete value[key];
        pruned.push(at);
      }
    }
  }
  return pruned;
}

/** Fills in `default`s of absent fields, top down, as the API server does on write and on read. */
export function applyDefaults(value: Json, schema: JsonObject): void {
  if (Array.isArray(value) && isObject(schema.items)) {
    for (const v of value) applyDefaults(v, schema.items);
  } else if (isObject(value)) {
    if (isObject(schema.properties)) {
      for (const [key, sub] of Object.entries(schema.properties)) {
        if (!isObject(sub)) continue;
        if (value[key] === undefined && sub.default !== undefined) value[key] = clone(sub.default);
        if (value[key] !== undefined) applyDefaults(value[key]!, sub);
      }
    }
    if (isObject(schema.additionalProperties)) for (const v of Object.values(value)) applyDefaults(v, schema.additionalProperties);
  }
}

function show(v: Json): string {
  return typeof v === 'object' && v !== null ? (Array.isArray(v) ? '"array"' : '"object"') : JSON.stringify(v);
}

function typeOf(v: Json): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'array';
  if (typeof v === 'number') return Number.isInteger(v) ? 'integer' : 'number';
  return typeof v;
}

/** Every violation of the schema by value (old: the stored value, for transition rules). */
export function validate(value: Json, schema: JsonObject, path: string, old: Json | undefined, causes: FieldCause[] = []): FieldCause[] {
  const field = path || '<nil>';
  const invalid = (why: string): void => {
    causes.push({ reason: 'FieldValueInvalid', field, message: `${field}: Invalid value: ${show(value)}: ${why}` });
  };
  const where = `${path || 'body'} in body`;
  if (schema['x-kubernetes-int-or-string'] === true) {
    if (typeof value !== 'string' && !(typeof value === 'number' && Number.isInteger(value))) {
      causes.push({ reason: 'FieldValueTypeInvalid', field, message: `${field}: Invalid value: ${show(value)}: ${where} must be of type integer-or-string` });
      return causes;
    }
  } else if (typeof schema.type === 'string' && !keepsUnknown(schema)) {
    const actual = typeOf(value);
    const ok = actual === schema.type || (schema.type === 'number' && actual === 'integer');
    if (!ok) {
      causes.push({ reason: 'FieldValueTypeInvalid', field, message: `${field}: Invalid value: ${show(value)}: ${where} must be of type ${schema.type}: "${actual}"` });
      return causes;
    }
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((e) => deepEqual(e, value))) {
    causes.push({ reason: 'FieldValueNotSupported', field, message: `${field}: Unsupported value: ${show(value)}: supported values: ${schema.enum.map((e) => JSON.stringify(e)).join(', ')}` });
  }
  if (typeof value === 'string') {
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) invalid(`${where} should match '${schema.pattern}'`);
    if (typeof schema.maxLength === 'number' && [...value].length > schema.maxLength) {
      causes.push({ reason: 'FieldValueTooLong', field, message: `${field}: Too long: may not be more than ${schema.maxLength} bytes` });
    }
    if (typeof schema.minLength === 'number' && [...value].length < schema.minLength) invalid(`${where} should be at least ${schema.minLength} chars long`);
    if (schema.format === 'date-time' && Number.isNaN(Date.parse(value))) invalid(`${where} must be of type date-time`);
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && value < schema.minimum) invalid(`${where} should be greater than or equal to ${schema.minimum}`);
    if (typeof schema.maximum === 'number' && value > schema.maximum) invalid(`${where} should be less than or equal to ${schema.maximum}`);
  }
  if (Array.isArray(value)) {
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) invalid(`${where} should have at most ${schema.maxItems} items`);
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) invalid(`${where} should have at least ${schema.minItems} items`);
    if (isObject(schema.items)) {
      const items = schema.items;
      const oldList = Array.isArray(old) ? old : undefined;
      value.forEach((v, i) => validate(v, items, `${path}[${i}]`, oldList?.[i], causes));
    }
  }
  if (isObject(value)) {
    const oldObject = isObject(old) ? old : undefined;
    if (Array.isArray(schema.required)) {
      for (const r of schema.required) {
        if (typeof r === 'string' && value[r] === undefined) causes.push({ reason: 'FieldValueRequired', field: path ? `${path}.${r}` : r, message: `${path ? `${path}.${r}` : r}: Required value` });
      }
    }
    if (isObject(schema.properties)) {
      for (const [key, sub] of Object.entries(schema.properties)) {
        if (isObject(sub) && value[key] !== undefined && !(path === '' && key === 'metadata')) validate(value[key]!, sub, path ? `${path}.${key}` : key, oldObject?.[key], causes);
      }
    }
    if (isObject(schema.additionalProperties)) {
      for (const [key, v] of Object.entries(value)) validate(v, schema.additionalProperties, path ? `${path}.${key}` : key, oldObject?.[key], causes);
    }
    for (const keyword of ['oneOf', 'anyOf'] as const) {
      const alternatives = schema[keyword];
      if (!Array.isArray(alternatives)) continue;
      const matching = alternatives.filter((alt) => isObject(alt) && Array.isArray(alt.required) && alt.required.every((r) => typeof r === 'string' && value[r] !== undefined)).length;
      if (keyword === 'oneOf' ? matching !== 1 : matching === 0) invalid(`${where} must validate ${keyword === 'oneOf' ? 'one and only one' : 'at least one'} schema (${keyword})`);
    }
  }
  const rules = schema['x-kubernetes-validations'];
  if (Array.isArray(rules)) {
    for (const r of rules) {
      if (!isObject(r) || typeof r.rule !== 'string') continue;
      if (compileRule(r.rule)(value, old) === false) invalid(typeof r.message === 'string' ? r.message : `failed rule: ${r.rule}`);
    }
  }
  return causes;
}
