// Runtime: a set of PGX runtime pods (a StatefulSet with a volume each) that Templates are built on and
// Branches are placed on. Schema only; the controller reads it, never extends it.

import { z } from 'zod';
import { API_VERSION, conditions, DNS_1035_LABEL, DNS_1035_LABEL_WORDS, dnsLabel, dnsSubdomain, duration, objectMeta, observedGeneration, quantity, spareCount } from './common.js';
import type { CustomResourceKind } from './kind.js';

const resourceList = z.record(z.string().min(1), quantity('a resource quantity')).describe('Quantities by resource name (cpu, memory, ...), as in a Pod.');

/** A Kubernetes type the Runtime hands to its pods as written (affinity, a topology spread constraint): the API server checks it in the StatefulSet. */
function podField(what: string) {
  return z.looseObject({}).meta({ 'x-kubernetes-preserve-unknown-fields': true }).describe(`${what}, as in a Pod spec; given to the runtime pods as written.`);
}

const toleration = z
  .object({
    key: z.string().max(316).optional(),
    operator: z.enum(['Exists', 'Equal']).optional(),
    value: z.string().max(63).optional(),
    effect: z.enum(['NoSchedule', 'PreferNoSchedule', 'NoExecute']).optional(),
    tolerationSeconds: z.number().int().optional(),
  })
  .strict()
  .describe('A toleration, as in a Pod spec.');

/**
 * The warm pool's growth bounds when a Runtime sets none: pgx start's own defaults (crds.test checks
 * they stay equal). The operator passes the flags only when a spec sets other values.
 */
export const POOL_DEFAULTS = { poolMax: 500, poolIdle: '10m' } as const;

export const labelSelector = z
  .object({
    matchLabels: z.record(z.string().min(1).max(316), z.string().max(63)).optional(),
    matchExpressions: z
      .array(z.object({ key: z.string().min(1).max(316), operator: z.enum(['In', 'NotIn', 'Exists', 'DoesNotExist']), values: z.array(z.string().max(63)).optional() }).strict())
      .optional(),
  })
  .strict()
  .describe('A label selector, as in a Deployment: matchLabels and matchExpressions, ANDed.');
export type LabelSelector = z.infer<typeof labelSelector>;

const runtimeSpec = z
  .object({
    replicas: z.number().int().min(1, 'replicas must be at least 1').max(100, 'replicas must be at most 100').default(1).describe('Runtime pods. Each holds its own copy of every Template and its own Branches.'),
    image: z.string().min(1, 'image must name a container image').max(512).describe('The PGX runtime image (PostgreSQL 18 plus `pgx start`).'),
    imagePullPolicy: z.enum(['Always', 'IfNotPresent', 'Never']).optional().describe('As for a container; Kubernetes decides when absent.'),
    storage: z
      .object({
        storageClassName: dnsSubdomain('storage.storageClassName').optional().describe('StorageClass of each pod volume; a copy-on-write filesystem (e.g. an OpenEBS ZFS LocalPV class) makes Branches cheap. The cluster default when absent.'),
        size: quantity('storage.size').default('10Gi').describe('Size of each pod volume.'),
      })
      .strict()
      .prefault({})
      .describe('One PersistentVolumeClaim per pod holds PostgreSQL data.'),
    allowedNamespaces: z
      .object({
        from: z
          .enum(['Same', 'All', 'Selector'])
          .default('Same')
          .describe('Whose Branches this Runtime takes (through its Templates): Same, only its own namespace (the default); All; Selector, namespaces whose labels match selector (as Gateway API allowedRoutes).'),
        selector: labelSelector.optional().describe('With from: Selector, the namespaces whose Branches it takes.'),
      })
      .strict()
      .prefault({})
      .describe("Which namespaces may have Branches on this Runtime's pods (their templateRef.namespace names this namespace). The Secret is always in the Branch's namespace."),
    privilegedTemplates: z
      .boolean()
      .default(false)
      .describe(
        "Let a Template of this Runtime name a privileged owner (a superuser such as postgres, or a role with CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS or a predefined role): its script or import then runs with the runtime's own rights, which read every database of the runtime (other namespaces' Branches included) and run programs in the pod. Off (the default), such a Template fails to build; a Template without an owner is built as a role of its own either way.",
      ),
    imagePullSecrets: z
      .array(z.object({ name: dnsSubdomain('imagePullSecrets[].name') }).strict())
      .optional()
      .describe('Secrets (in this namespace) to pull the image with, as in a Pod spec.'),
    nodeSelector: z.record(z.string().min(1).max(316), z.string().max(63)).optional().describe('Nodes the runtime pods may run on, by label, as in a Pod spec.'),
    tolerations: z.array(toleration).optional().describe('Taints the runtime pods tolerate, as in a Pod spec.'),
    affinity: podField('Node and pod affinity').optional(),
    topologySpreadConstraints: z.array(podField('A topology spread constraint')).optional().describe('How runtime pods spread over zones or nodes, as in a Pod spec.'),
    tls: z
      .object({
        secretName: dnsSubdomain('tls.secretName').describe(
          'A kubernetes.io/tls Secret in this namespace: tls.crt and tls.key (mounted read-only into every pod and given to pgx start --tls-cert/--tls-key), and optionally ca.crt, copied into each Branch Secret so clients verify the pod (sslmode verify-full; require without it). Its certificate must name the pod hosts Branch Secrets name: *.<runtime>-pods.<namespace>.svc.cluster.local.',
        ),
      })
      .strict()
      .optional()
      .describe('TLS for clients of the runtime pods; absent: no TLS (Branch Secrets say sslmode disable).'),
    sharedMemory: quantity('sharedMemory')
      .default('256Mi')
      .describe("Size of the memory-backed /dev/shm of each pod (PostgreSQL's shared memory for parallel queries); counted against the pod's memory limit."),
    startupTimeout: duration('startupTimeout')
      .default('10m')
      .describe("How long a pod may take to start (PostgreSQL's crash recovery included) before the kubelet restarts it: the startupProbe's budget. Liveness is checked only after that."),
    resources: z
      .object({ requests: resourceList.optional(), limits: resourceList.optional() })
      .strict()
      .optional()
      .describe("The runtime container's requests and limits: its cgroup, from which the runtime derives its own memory limits."),
    engine: z
      .object({
        prefix: z
          .string()
          .max(12, 'engine.prefix must be at most 12 characters, to leave room in the 63-byte database name')
          .regex(/^[a-z][a-z0-9_]*$/, 'engine.prefix must be lower-case letters, digits and underscores, starting with a letter')
          .default('tdb_')
          .describe('Connecting to <prefix><template>__<token> mints a database (pgx start --prefix).'),
        grace: duration('engine.grace', { allowZero: true })
          .default('15s')
          .describe('A minted database is dropped this long after its last session ends (pgx start --grace); Branches are exempt unless they set pinned: false.'),
        poolSize: spareCount('engine.poolSize')
          .default('auto')
          .describe('Warm spare databases kept per sealed template (pgx start --pool-size): 0 to 1000, or auto (8 where the volume clones files, as on ZFS, 2 where files are copied).'),
        poolMax: z
          .number()
          .int()
          .min(0)
          .max(1_000_000)
          .default(POOL_DEFAULTS.poolMax)
          .describe(
            "Warm spares per sealed template at most after bursts (pgx start --pool-max): a mint that finds no spare ready raises the template's pool to poolSize plus the mints of it under way at once, so the next burst of that size is served from spares. At or under poolSize the pool never grows.",
          ),
        poolIdle: duration('engine.poolIdle')
          .default(POOL_DEFAULTS.poolIdle)
          .describe('A pool grown by a burst shrinks back to poolSize after this long without a mint of its template; the extra spares are dropped (pgx start --pool-idle). At most 24d.'),
        databaseDefaults: z
          .object({
            memory: quantity('engine.databaseDefaults.memory').optional().describe('Memory limit of a database unless its Branch sets one (pgx start --database-memory-limit). Rounded up to whole Mi; at least 1Mi.'),
            connections: z.number().int().min(1).max(10000).optional().describe('Connection limit of a database unless its Branch sets one.'),
          })
          .strict()
          .optional()
          .describe('Per-database limits applied where a Branch sets none.'),
      })
      .strict()
      .prefault({})
      .describe('Settings of the PGX engine in each pod.'),
  })
  .strict();
export type RuntimeSpec = z.infer<typeof runtimeSpec>;

const runtimePodStatus = z
  .object({
    pod: z.string().describe('Pod name.'),
    ready: z.boolean().describe("The pod's /readyz answered ready."),
    databases: z.number().int().min(0).optional().describe('Databases the runtime holds, from its /v1/status.'),
    memoryBytes: z.number().int().min(0).optional().describe('Memory (PSS) of the runtime, from its /v1/status.'),
    memoryLimitBytes: z.number().int().min(0).optional().describe("The runtime's memory limit, from its /v1/status."),
    message: z.string().optional().describe('Why the pod is not ready, when it is not.'),
  })
  .strict();

export const runtimeStatus = z
  .object({
    observedGeneration,
    replicas: z.number().int().min(0).optional().describe('Pods the StatefulSet has.'),
    readyReplicas: z.number().int().min(0).optional().describe('Pods whose runtime answers ready.'),
    pods: z.array(runtimePodStatus).meta({ 'x-kubernetes-list-type': 'map', 'x-kubernetes-list-map-keys': ['pod'] }).optional().describe('Capacity of each pod, as the placement of Branches sees it.'),
    conditions: conditions.optional(),
  })
  .strict();
export type RuntimeStatus = z.infer<typeof runtimeStatus>;

export const runtime = z.object({
  apiVersion: z.literal(API_VERSION),
  kind: z.literal('Runtime'),
  metadata: objectMeta(dnsLabel('Runtime name', 52, { startsWithLetter: true })),
  spec: runtimeSpec,
  status: runtimeStatus.optional(),
});
export type Runtime = z.infer<typeof runtime>;

export const RUNTIME: CustomResourceKind = {
  kind: 'Runtime',
  plural: 'runtimes',
  singular: 'runtime',
  description:
    'A set of PGX runtime pods: a StatefulSet with a volume per pod, on which Templates are built and Branches placed.',
  shortNames: ['pgxrt'],
  maxNameLength: 52,
  nameLimitReason: 'it names a StatefulSet, whose pods add a suffix and a controller-revision label to it',
  namePattern: DNS_1035_LABEL,
  namePatternWords: `${DNS_1035_LABEL_WORDS}, as it names Services`,
  spec: runtimeSpec,
  status: runtimeStatus,
  printerColumns: [
    { name: 'Replicas', type: 'integer', jsonPath: '.spec.replicas', description: 'Desired runtime pods.' },
    { name: 'Ready', type: 'integer', jsonPath: '.status.readyReplicas', description: 'Runtime pods answering ready.' },
    { name: 'Status', type: 'string', jsonPath: '.status.conditions[?(@.type=="Ready")].reason', description: 'Why the Runtime is or is not Ready.' },
    { name: 'Image', type: 'string', jsonPath: '.spec.image', priority: 1 },
    { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' },
  ],
};
