// Template: a database built from a source (inline SQL, a ConfigMap of SQL, or a copy of another
// database with a masking script) on every pod of a Runtime, then sealed so Branches can be minted from
// it. Schema only.

import { z } from 'zod';
import { API_VERSION, conditions, DNS_LABEL, DNS_LABEL_WORDS, dnsLabel, keyRef, localRef, objectMeta, observedGeneration } from './common.js';
import type { CustomResourceKind } from './kind.js';

/** Template names are short enough that <prefix><template>__<token> fits in 63 bytes. */
const MAX_TEMPLATE_NAME = 40;

/** The PGX template (a PostgreSQL database name) a Template object builds: its name with '-' as '_'. */
export function templateDatabaseName(templateName: string): string {
  return templateName.replace(/-/g, '_');
}

const templateSource = z
  .object({
    sql: z.string().min(1).optional().describe('SQL run in the new database (schema and seed rows).'),
    configMapRef: keyRef('ConfigMap', 'schema.sql').optional().describe('A ConfigMap key holding the SQL to run.'),
    database: z
      .object({
        urlSecretRef: keyRef('Secret', 'url').describe('A Secret key holding a postgresql:// URL of the database to copy (pg_dump reads it; it is never logged).'),
        mask: z.string().min(1).optional().describe("SQL run on the copy before it is sealed to overwrite personal data, with `-- pgx:forbid table.column ~ 'regex'` rules checked after it."),
        maskConfigMapRef: keyRef('ConfigMap', 'mask.sql').optional().describe('The masking script from a ConfigMap key instead of inline.'),
      })
      .strict()
      .superRefine((d, ctx) => {
        if (d.mask !== undefined && d.maskConfigMapRef !== undefined) ctx.addIssue({ code: 'custom', message: 'set mask or maskConfigMapRef, not both' });
      })
      .meta({ 'x-kubernetes-validations': [{ rule: '!(has(self.mask) && has(self.maskConfigMapRef))', message: 'set mask or maskConfigMapRef, not both' }] })
      .optional()
      .describe('Copy an existing database (dump and restore), then run a masking script on the copy.'),
  })
  .strict()
  .superRefine((s, ctx) => {
    const given = [s.sql, s.configMapRef, s.database].filter((v) => v !== undefined).length;
    if (given !== 1) ctx.addIssue({ code: 'custom', message: `source must set exactly one of sql, configMapRef or database (${given} set)` });
  })
  .meta({ oneOf: [{ required: ['sql'] }, { required: ['configMapRef'] }, { required: ['database'] }] })
  .describe('Where the template comes from: exactly one of sql, configMapRef or database.');

const templateSpec = z
  .object({
    runtimeRef: localRef('Runtime')
      .meta({ 'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'runtimeRef is immutable: create a new Template for another Runtime' }] })
      .describe('The Runtime whose pods build and hold this template.'),
    source: templateSource,
    owner: z
      .string()
      .max(63, 'owner must be at most 63 characters')
      .regex(/^[a-z_][a-z0-9_]*$/, 'owner must be a PostgreSQL role name: lower-case letters, digits and underscores')
      .optional()
      .describe(
        "The role that owns the template and runs its script or import; it must exist on every pod and, unless the Runtime sets privilegedTemplates, have no privileges (no superuser). When absent, a role of the Template's own, named like its database, made by the runtime: it has no password and logs in only while the template is built.",
      ),
    seal: z.boolean().default(true).describe('Seal the template once built, so Branches can be minted from it.'),
  })
  .strict();
export type TemplateSpec = z.infer<typeof templateSpec>;

const templatePodStatus = z
  .object({
    pod: z.string().describe('Runtime pod name.'),
    phase: z.enum(['Pending', 'Building', 'Sealed', 'Built', 'Failed']).describe('Built: present but not sealed (seal: false).'),
    templateGeneration: z.number().int().min(0).optional().describe("The runtime's generation of the template, from its /v1/templates."),
    sealedAt: z.iso.datetime().optional(),
    observedGeneration: z.number().int().min(0).optional().describe('The Template .metadata.generation this pod last built (or failed to build); a newer one is rebuilt.'),
    message: z.string().optional().describe('Why the build failed, when it did.'),
  })
  .strict();

const templateStatus = z
  .object({
    observedGeneration,
    database: z.string().optional().describe('The PGX template name on each pod.'),
    pods: z.array(templatePodStatus).meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['pod'] }).optional(),
    branches: z.number().int().min(0).optional().describe('Branches made from this template; while there are any, deleting it waits.'),
    conditions: conditions.optional(),
  })
  .strict();
export type TemplateStatus = z.infer<typeof templateStatus>;

export const template = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('Template'),
  metadata: objectMeta(dnsLabel('Template name', MAX_TEMPLATE_NAME)),
  spec: templateSpec,
  status: templateStatus.optional(),
});
export type Template = z.infer<typeof template>;

export const TEMPLATE: CustomResourceKind = {
  kind: 'Template',
  plural: 'templates',
  singular: 'template',
  description:
    'A database built from SQL, a ConfigMap or a copy of another database, sealed on every pod of a Runtime so that Branches can be minted from it.',
  shortNames: ['pgxtpl'],
  maxNameLength: MAX_TEMPLATE_NAME,
  nameLimitReason: 'it becomes the template part of <prefix><template>__<token>, a database name of at most 63 bytes',
  namePattern: DNS_LABEL,
  namePatternWords: DNS_LABEL_WORDS,
  spec: templateSpec,
  status: templateStatus,
  printerColumns: [
    { name: 'Runtime', type: 'string', jsonPath: '.spec.runtimeRef.name' },
    { name: 'Ready', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].status' },
    { name: 'Reason', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason' },
    { name: 'Branches', type: 'integer', jsonPath: '.status.branches', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
