// Building blocks shared by the Runtime, Template and Branch schemas: the API group, Kubernetes name
// rules, durations, quantities and conditions. Each is a zod schema (what the operator parses with) that
// also carries what the CRD's OpenAPI schema needs (pattern, enum, Kubernetes list semantics), so the
// cluster and the operator refuse the same things. Messages say what a valid value looks like.

import { z } from 'zod';
import { DURATION, parseDuration } from '../../durations.js';

export const GROUP = 'pgx.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;

/** RFC 1123 label, as Kubernetes checks namespace and label-like names: what most of our names must be. */
export const DNS_LABEL = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;
/** RFC 1035 label (starts with a letter), as Kubernetes checks Service names. */
export const DNS_1035_LABEL = /^[a-z]([-a-z0-9]*[a-z0-9])?$/;
/** RFC 1123 subdomain, as Kubernetes checks most object names (Secrets, ConfigMaps, StorageClasses). */
const DNS_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

export const DNS_LABEL_WORDS = "lower-case letters, digits and '-', starting and ending with a letter or digit (a DNS-1123 label)";
export const DNS_1035_LABEL_WORDS = "lower-case letters, digits and '-', starting with a letter and ending with a letter or digit (a DNS-1035 label)";

export function dnsLabel(what: string, max = 63, opts: { startsWithLetter?: boolean } = {}): z.ZodString {
  const [pattern, words] = opts.startsWithLetter ? [DNS_1035_LABEL, DNS_1035_LABEL_WORDS] : [DNS_LABEL, DNS_LABEL_WORDS];
  return z
    .string()
    .min(1, `${what} must not be empty`)
    .max(max, `${what} must be at most ${max} characters`)
    .regex(pattern, `${what} must be ${words}`);
}

export function dnsSubdomain(what: string): z.ZodString {
  return z
    .string()
    .min(1, `${what} must not be empty`)
    .max(253, `${what} must be at most 253 characters`)
    .regex(DNS_SUBDOMAIN, `${what} must be lower-case letters, digits, '-' and '.' (a DNS-1123 subdomain)`);
}

/** A reference to an object of another kind in the same namespace. */
export function localRef(what: string): z.ZodObject<{ name: z.ZodString }> {
  return z.object({ name: dnsLabel(`${what} name`).describe(`Name of the ${what} in the same namespace.`) }).strict();
}

/** A key of a Secret or ConfigMap in the same namespace. */
export function keyRef(what: string, defaultKey: string) {
  return z
    .object({
      name: dnsSubdomain(`${what} name`).describe(`Name of the ${what} in the same namespace.`),
      key: z
        .string()
        .min(1)
        .max(253)
        .regex(/^[-._a-zA-Z0-9]+$/, `a ${what} key is letters, digits, '-', '_' and '.'`)
        .default(defaultKey)
        .describe(`Key within the ${what}; default ${defaultKey}.`),
    })
    .strict();
}

// --- durations: 30s, 15m, 2h, 7d, or a sum such as 1h30m ---

// The grammar and its parser are PGX's one (src/durations.ts: the CLI and MCP read the same); here
// are the CRD patterns built on it.
export { DURATION, parseDuration };

/** A duration with at least one non-zero part. RE2-compatible (no lookahead), as a CRD pattern must be. */
const POSITIVE_DURATION = /^([0-9]+[smhd])*0*[1-9][0-9]*[smhd]([0-9]+[smhd])*$/;

/**
 * A positive duration of at most five digits per part and 24 characters in all: at most a few hundred
 * years, so a time computed from it is always a valid date (300000000d made "Invalid time value"
 * and a Branch stuck in Creating). The same pattern and length are in the CRD.
 */
const BOUNDED_DURATION = /^([0-9]{1,5}[smhd])*0{0,4}[1-9][0-9]{0,4}[smhd]([0-9]{1,5}[smhd])*$/;
const BOUNDED_DURATION_LENGTH = 24;

export function boundedDuration(what: string): z.ZodString {
  const message = `${what} must be a positive duration such as 30s, 15m, 2h, 7d or 1h30m, each number at most 5 digits`;
  return z.string().max(BOUNDED_DURATION_LENGTH, `${what} must be at most ${BOUNDED_DURATION_LENGTH} characters`).regex(BOUNDED_DURATION, message);
}

/** A duration string; the same pattern is in the CRD, so the cluster and the operator agree. */
export function duration(what: string, opts: { allowZero?: boolean } = {}): z.ZodString {
  return opts.allowZero
    ? z.string().regex(DURATION, `${what} must be a duration such as 0s, 30s, 15m, 2h or 1h30m`)
    : z.string().regex(POSITIVE_DURATION, `${what} must be a positive duration such as 30s, 15m, 2h, 7d or 1h30m`);
}

// --- quantities, as Kubernetes writes memory and CPU: 512Mi, 1Gi, 1.5G, 500m, 2 ---

/** resource.Quantity's syntax, exactly as Kubernetes' own CRDs give it (controller-gen). */
const QUANTITY = /^(\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/;
/** The same without a leading minus: what our fields take, in the CRD pattern and here alike. */
const NON_NEGATIVE_QUANTITY = /^\+?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))(([KMGTPE]i)|[numkMGTPE]|([eE](\+|-)?(([0-9]+(\.[0-9]*)?)|(\.[0-9]+))))?$/;
const SUFFIX: Record<string, number> = {
  '': 1, n: 1e-9, u: 1e-6, m: 1e-3, k: 1e3, M: 1e6, G: 1e9, T: 1e12, P: 1e15, E: 1e18,
  Ki: 2 ** 10, Mi: 2 ** 20, Gi: 2 ** 30, Ti: 2 ** 40, Pi: 2 ** 50, Ei: 2 ** 60,
};

/** The value of a quantity (bytes for memory, cores for CPU); null if it is not a quantity. */
export function parseQuantity(q: string | number): number | null {
  if (typeof q === 'number') return Number.isFinite(q) ? q : null;
  if (!QUANTITY.test(q)) return null;
  const m = /^([+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+))(.*)$/.exec(q)!;
  const suffix = m[2]!;
  if (suffix in SUFFIX) return Number(m[1]) * SUFFIX[suffix]!;
  return Number(q); // decimal exponent: 1e9
}

/** The runtime's memory unit: its MB are MiB (it reads /proc in kB and divides by 1024). */
const MIB = 2 ** 20;

/**
 * A memory quantity as the whole MB (MiB) the runtime's memory limits take, rounded up (100M is 95.4 MiB:
 * 96), so a limit is never tighter than what was written. A quantity under 1 MiB (0, 512Ki, 500m) or too
 * large to count is an error a person can act on, not a limit.
 */
export function memoryLimitMb(what: string, q: string | number): { ok: true; mb: number } | { ok: false; message: string } {
  const bytes = parseQuantity(q);
  if (bytes === null) return { ok: false, message: `${what} "${q}" is not a Kubernetes quantity: write it as 64Mi, 512Mi or 2Gi` };
  const mb = Math.ceil(bytes / MIB);
  if (bytes < MIB) {
    return { ok: false, message: `${what} "${q}" is under 1Mi, the smallest memory limit a database can have (the runtime counts whole MiB): write it as 64Mi, 512Mi or 2Gi, or leave it out for no limit` };
  }
  if (!Number.isSafeInteger(mb)) return { ok: false, message: `${what} "${q}" is too large to be a memory limit: write it as 64Mi, 512Mi or 2Gi, or leave it out for no limit` };
  return { ok: true, mb };
}

/**
 * A non-negative Kubernetes quantity, written as a string (`512Mi`) or a bare integer (`2`), like the
 * `resources` of a Pod. In the CRD it is x-kubernetes-int-or-string with the same pattern and minimum.
 */
export function quantity(what: string) {
  const message = `${what} must be a Kubernetes quantity such as 512Mi, 2Gi or 1.5G`;
  return z.union([z.number().int().min(0, `${what} must not be negative`), z.string().regex(NON_NEGATIVE_QUANTITY, message)], { error: message }).meta({ 'x-kubernetes-int-or-string': true });
}

/** A warm pool's size: 0 to 1000 spares, or auto (pgx start --pool-size). In the CRD it is x-kubernetes-int-or-string. */
export function spareCount(what: string) {
  const message = `${what} must be a whole number of spares from 0 to 1000, or auto`;
  return z.union([z.number().int().min(0, message).max(1000, message), z.string().regex(/^auto$/, message)], { error: message }).meta({ 'x-kubernetes-int-or-string': true });
}

// --- conditions: metav1.Condition, field for field ---

const conditionStatus = z.enum(['True', 'False', 'Unknown']);

export const condition = z
  .object({
    type: z.string().min(1).max(316).describe('Type of condition in CamelCase, e.g. Ready.'),
    status: conditionStatus.describe('True, False or Unknown.'),
    observedGeneration: z.number().int().min(0).optional().describe('The .metadata.generation this condition was set from.'),
    lastTransitionTime: z.iso.datetime().describe('When the status last changed (not when it was last checked).'),
    reason: z
      .string()
      .min(1)
      .max(1024)
      .regex(/^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$/)
      .describe('A CamelCase word a program can switch on, e.g. TemplateNotFound.'),
    message: z.string().max(32768).describe('What happened and, where it applies, what to do, for a person.'),
  })
  .strict();
export type Condition = z.infer<typeof condition>;

/** A list of conditions keyed by type, as Kubernetes' own status types declare it (merge by type). */
export const conditions = z
  .array(condition)
  .meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['type'] })
  .describe('Observed conditions, one per type.');

/** Status fields every kind has. */
export const observedGeneration = z.number().int().min(0).optional().describe('The .metadata.generation the status was last computed from.');

/** ObjectMeta as far as the operator reads it; the API server owns the rest (kept, never checked here). */
export function objectMeta(nameRule: z.ZodString) {
  return z.looseObject({
    name: nameRule,
    namespace: z.string().optional(),
    uid: z.string().optional(),
    resourceVersion: z.string().optional(),
    generation: z.number().int().optional(),
    creationTimestamp: z.string().optional(),
    deletionTimestamp: z.string().optional(),
    labels: z.record(z.string(), z.string()).optional(),
    annotations: z.record(z.string(), z.string()).optional(),
    finalizers: z.array(z.string()).optional(),
  });
}
