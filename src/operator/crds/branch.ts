// Branch: one disposable database minted from a Template on a runtime pod, with a connection Secret and
// an optional TTL (from the Branch's creation) after which it is deleted or kept as Expired. Schema only.

import { z } from 'zod';
import { API_VERSION, boundedDuration, conditions, DNS_LABEL, DNS_LABEL_WORDS, dnsLabel, objectMeta, observedGeneration, quantity } from './common.js';
import type { CustomResourceKind } from './kind.js';

const branchSpec = z
  .object({
    templateRef: z
      .object({
        name: dnsLabel('Template name').describe('Name of the Template.'),
        namespace: dnsLabel('Template namespace')
          .optional()
          .describe("Namespace of the Template, when not the Branch's: its Runtime must allow this Branch's namespace (spec.allowedNamespaces). The database is on that Runtime's pods; the Secret is in the Branch's namespace."),
      })
      .strict()
      .meta({ 'x-kubernetes-validations': [{ rule: 'self == oldSelf', message: 'templateRef is immutable: create a new Branch from the other Template' }] })
      .describe('The Template the database is minted from.'),
    ttl: boundedDuration('ttl')
      .optional()
      .describe('The Branch expires this long after it was created (its metadata.creationTimestamp, whether or not it ever became Ready), e.g. 2h or 7d; expiryPolicy says what then happens. Never when absent.'),
    expiryPolicy: z
      .enum(['Delete', 'Retain'])
      .default('Delete')
      .describe(
        'What expiry does. Delete (the default): the Branch is deleted and its database dropped. Retain: the database is dropped and its Secret deleted, and the Branch stays with phase Expired and the condition Expired True, so a GitOps tool (Argo CD, Flux) that applied it does not re-create it with an empty database.',
      ),
    pinned: z
      .boolean()
      .default(true)
      .describe(
        'Keep the database however long it sits idle (the default). false lets the runtime drop it a grace period (the Runtime\'s engine.grace) after its last session ends, like a database minted on connect; the Branch then expires as expiryPolicy says.',
      ),
    limits: z
      .object({
        memory: quantity('limits.memory').optional().describe('Memory limit of the database, e.g. 256Mi: what its backends may hold together (past it a statement is canceled with 53200). Rounded up to whole Mi; at least 1Mi.'),
        connections: z.number().int().min(1, 'limits.connections must be at least 1').max(10000).optional().describe('Connection limit of the database.'),
      })
      .strict()
      .optional()
      .describe("Limits of this database; the Runtime's engine.databaseDefaults where absent."),
    affinity: z
      .object({
        pod: dnsLabel('affinity.pod').optional().describe('Place the database on this runtime pod (e.g. main-0); it stays Pending while that pod cannot take it.'),
      })
      .strict()
      .optional()
      .describe('Where to place the database; the pod with the most free capacity when absent.'),
  })
  .strict();
export type BranchSpec = z.infer<typeof branchSpec>;

const branchPhase = z.enum(['Pending', 'Creating', 'Ready', 'Unavailable', 'Failed', 'Lost', 'Expired', 'Deleting']);
export type BranchPhase = z.infer<typeof branchPhase>;

const branchStatus = z
  .object({
    observedGeneration,
    phase: branchPhase.optional().describe('Pending: waiting for its Template or a pod; Unavailable: its pod is away (re-created, rolled, drained) and it is Ready again when the pod is back with the database; Lost: its database or Runtime is gone and no new database was made; Expired: its ttl ran out (kept with expiryPolicy Retain).'),
    pod: z.string().optional().describe('The runtime pod holding the database.'),
    database: z.string().optional().describe('The database name on that pod.'),
    secretName: z.string().optional().describe('Secret with host, port, dbname, user, username, password, DATABASE_URL, uri, jdbc-uri, pgpass and sslmode.'),
    createdAt: z.iso.datetime().optional().describe('When the database was created.'),
    expiresAt: z.iso.datetime().optional().describe('When the Branch expires: its creationTimestamp + ttl.'),
    conditions: conditions.optional(),
  })
  .strict();
export type BranchStatus = z.infer<typeof branchStatus>;

export const branch = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('Branch'),
  metadata: objectMeta(dnsLabel('Branch name')),
  spec: branchSpec,
  status: branchStatus.optional(),
});
export type Branch = z.infer<typeof branch>;

export const BRANCH: CustomResourceKind = {
  kind: 'Branch',
  plural: 'branches',
  singular: 'branch',
  description:
    'A disposable database minted from a Template, with a connection Secret and an optional TTL after which it expires (deleted, or kept as Expired).',
  shortNames: ['pgxbr'],
  maxNameLength: 63,
  nameLimitReason: 'it names the Branch in labels and in its Secret, and Kubernetes label values are at most 63 characters',
  namePattern: DNS_LABEL,
  namePatternWords: DNS_LABEL_WORDS,
  spec: branchSpec,
  status: branchStatus,
  printerColumns: [
    { name: 'Phase', type: 'string', jsonPath: '.status.phase' },
    { name: 'Template', type: 'string', jsonPath: '.spec.templateRef.name' },
    { name: 'Database', type: 'string', jsonPath: '.status.database' },
    { name: 'Expires', type: 'date', jsonPath: '.status.expiresAt' },
    { name: 'Pod', type: 'string', jsonPath: '.status.pod', priority: 1 },
    { name: 'Secret', type: 'string', jsonPath: '.status.secretName', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
