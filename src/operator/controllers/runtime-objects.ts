// The Kubernetes objects a Runtime is made of, as pure functions of its spec: a StatefulSet with one
// PersistentVolumeClaim per pod, a headless Service (stable pod DNS names, what Branch Secrets name), a
// client Service, a Secret with the API token and admin password, and a PodDisruptionBudget. Every
// object is owned by the Runtime, so Kubernetes deletes them with it.

import crypto from 'node:crypto';
import type { V1Affinity, V1TopologySpreadConstraint, V1OwnerReference, V1PodDisruptionBudget, V1Secret, V1SecurityContext, V1Service, V1StatefulSet } from '@kubernetes/client-node';
import type { Runtime } from '../crds/index.js';
import { memoryLimitMb, parseDuration, POOL_DEFAULTS } from '../crds/index.js';
import { API_TOKEN_KEY, headlessServiceName, RUNTIME_LABEL, runtimeSecretName, type PodNetwork } from '../pods.js';

const ADMIN_PASSWORD_KEY = 'admin-password';
const CONFIG_KEY = 'config.json';
/** Hash of the StatefulSet's desired spec: a change of it is what makes the controller update it (a rolling update). */
export const SPEC_HASH_ANNOTATION = 'pgx.dev/spec-hash';
/** Where each pod's PersistentVolumeClaim is mounted; PostgreSQL's data is the data/ directory in it. */
export const DATA_DIR = '/var/lib/pgx';
/** PostgreSQL 18 of the PGX image (the Dockerfile's base, postgres:18), used instead of the embedded one. */
export const IMAGE_PG_BIN = '/usr/lib/postgresql/18/bin';
/** Where the Runtime's TLS Secret (spec.tls) is mounted: its tls.crt and tls.key only. */
export const TLS_DIR = '/etc/pgx-tls';
/** The image's unprivileged user and group (postgres in the postgres:18 base image). */
const RUNTIME_UID = 999;

export function ownerRef(rt: Runtime): V1OwnerReference {
  return { apiVersion: rt.apiVersion, kind: rt.kind, name: rt.metadata.name, uid: rt.metadata.uid!, controller: true, blockOwnerDeletion: true };
}

function labels(rt: Runtime): Record<string, string> {
  return { [RUNTIME_LABEL]: rt.metadata.name, 'app.kubernetes.io/name': 'pgx', 'app.kubernetes.io/instance': rt.metadata.name, 'app.kubernetes.io/component': 'runtime', 'app.kubernetes.io/managed-by': 'pgx-operator' };
}

/** Made once: its token and password are never rotated by a reconcile (clients hold them). */
export function runtimeSecret(rt: Runtime): V1Secret {
  const password = crypto.randomBytes(24).toString('base64url');
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name: runtimeSecretName(rt.metadata.name), namespace: rt.metadata.namespace, labels: labels(rt), ownerReferences: [ownerRef(rt)] },
    type: 'Opaque',
    stringData: {
      [API_TOKEN_KEY]: crypto.randomBytes(24).toString('base64url'),
      [ADMIN_PASSWORD_KEY]: password,
      // pgx start --config: the superuser's password, checked with SCRAM (--auth scram).
      [CONFIG_KEY]: JSON.stringify({ users: [{ name: 'postgres', password, superuser: true }] }),
    },
  };
}

export function headlessService(rt: Runtime, net: PodNetwork): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: headlessServiceName(rt.metadata.name), namespace: rt.metadata.namespace, labels: labels(rt), ownerReferences: [ownerRef(rt)] },
    spec: {
      clusterIP: 'None',
      // Pod DNS names exist before readiness: the operator reaches a starting pod's API through them.
      publishNotReadyAddresses: true,
      selector: { [RUNTIME_LABEL]: rt.metadata.name },
      ports: [
        { name: 'postgres', port: net.enginePort, targetPort: net.enginePort },
        { name: 'api', port: net.apiPort, targetPort: net.apiPort },
        { name: 'metrics', port: net.metricsPort, targetPort: net.metricsPort },
      ],
    },
  };
}

export function clientService(rt: Runtime, net: PodNetwork): V1Service {
  return {
    apiVersion: 'v1',
    kind: 'Service',
    metadata: { name: rt.metadata.name, namespace: rt.metadata.namespace, labels: labels(rt), ownerReferences: [ownerRef(rt)] },
    spec: { type: 'ClusterIP', selector: { [RUNTIME_LABEL]: rt.metadata.name }, ports: [{ name: 'postgres', port: 5432, targetPort: net.enginePort }] },
  };
}

export function disruptionBudget(rt: Runtime): V1PodDisruptionBudget {
  return {
    apiVersion: 'policy/v1',
    kind: 'PodDisruptionBudget',
    metadata: { name: rt.metadata.name, namespace: rt.metadata.namespace, labels: labels(rt), ownerReferences: [ownerRef(rt)] },
    // One pod at a time: each holds its own Branches, so a drain should not take two down together.
    spec: { maxUnavailable: 1, selector: { matchLabels: { [RUNTIME_LABEL]: rt.metadata.name } } },
  };
}

/**
 * engine.databaseDefaults.memory in the whole MB `pgx start --database-memory-limit` takes; null when
 * absent. Throws on a quantity under 1Mi: the controller reports that (runtimeSpecProblem) and makes
 * no StatefulSet from it.
 */
function databaseMemoryDefaultMb(rt: Runtime): number | null {
  const q = rt.spec.engine.databaseDefaults?.memory;
  if (q === undefined) return null;
  const r = memoryLimitMb('engine.databaseDefaults.memory', q);
  if (!r.ok) throw new Error(r.message);
  return r.mb;
}

/** The longest --pool-idle pgx start takes (a timer's limit: 2^31 - 1 ms, whole seconds), a little over 24 days. */
const MAX_POOL_IDLE_SECONDS = 2_147_483;

/** engine.poolIdle in the whole seconds `pgx start --pool-idle` takes. */
function poolIdleSeconds(rt: Runtime): number {
  return durationSeconds(rt.spec.engine.poolIdle);
}

function durationSeconds(text: string): number {
  return Math.round((parseDuration(text) ?? parseDuration(POOL_DEFAULTS.poolIdle)!) / 1000);
}

/** What in a Runtime's spec the schema lets through but no pod could run with; null when none. */
export function runtimeSpecProblem(rt: Runtime): string | null {
  const e = rt.spec.engine;
  if (poolIdleSeconds(rt) > MAX_POOL_IDLE_SECONDS) return `engine.poolIdle "${e.poolIdle}" is over 24d, the longest pgx start --pool-idle takes`;
  const q = e.databaseDefaults?.memory;
  if (q === undefined) return null;
  const r = memoryLimitMb('engine.databaseDefaults.memory', q);
  return r.ok ? null : r.message;
}

/**
 * The container's security context: what the "restricted" Pod Security Standard requires of every
 * container (no privilege escalation, every capability dropped, a non-root user, the runtime's default
 * seccomp profile), so runtime pods run in a namespace labelled
 * pod-security.kubernetes.io/enforce=restricted. PostgreSQL needs none of what is taken away.
 */
function restrictedContainer(): V1SecurityContext {
  return { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] }, runAsNonRoot: true, seccompProfile: { type: 'RuntimeDefault' } };
}

/** How often the startupProbe asks /healthz while a pod starts; startupTimeout / this is its failureThreshold. */
const STARTUP_PERIOD_S = 5;

/**
 * The StatefulSet, with `replicas` pods (the spec's, or more while a pod past it holds Branches: see
 * runtime.ts). Pods are independent (each its own data): started and stopped together (Parallel), and
 * a spec change rolls them one at a time (RollingUpdate), each coming back with the same name and volume.
 */
export function statefulSet(rt: Runtime, net: PodNetwork, replicas = rt.spec.replicas): V1StatefulSet {
  const s = rt.spec;
  const secret = runtimeSecretName(rt.metadata.name);
  const graceSeconds = Math.round((parseDuration(s.engine.grace) ?? 15_000) / 1000);
  const poolIdle = poolIdleSeconds(rt);
  const args = [
    'start',
    '--data-dir', `${DATA_DIR}/data`,
    '--pg-bin', IMAGE_PG_BIN,
    '--host', '0.0.0.0',
    '--port', String(net.enginePort),
    '--socket-dir', '',
    '--auth', 'scram',
    '--config', `/etc/pgx/${CONFIG_KEY}`,
    '--api-port', String(net.apiPort),
    '--api-host', '0.0.0.0',
    '--api-token-file', `/etc/pgx/${API_TOKEN_KEY}`,
    // Prometheus scrapes this port without the API token (a PodMonitor on the port named metrics).
    '--metrics-port', String(net.metricsPort),
    '--metrics-host', '0.0.0.0',
    '--prefix', s.engine.prefix,
    '--grace', String(graceSeconds),
    '--pool-size', String(s.engine.poolSize),
    // Passed only when set away from pgx start's defaults: an operator upgrade that adds flags with
    // their default values would change every StatefulSet and restart every runtime pod for nothing.
    ...(s.engine.poolMax !== POOL_DEFAULTS.poolMax ? ['--pool-max', String(s.engine.poolMax)] : []),
    ...(poolIdle !== durationSeconds(POOL_DEFAULTS.poolIdle) ? ['--pool-idle', String(poolIdle)] : []),
    '--log-format', 'json',
    ...(s.tls ? ['--tls-cert', `${TLS_DIR}/tls.crt`, '--tls-key', `${TLS_DIR}/tls.key`] : []),
    ...(s.engine.databaseDefaults?.connections !== undefined ? ['--max-sessions-per-db', String(s.engine.databaseDefaults.connections)] : []),
    ...(s.engine.databaseDefaults?.memory !== undefined ? ['--database-memory-limit', String(databaseMemoryDefaultMb(rt)!)] : []),
  ];
  const startupFailures = Math.max(1, Math.ceil((parseDuration(s.startupTimeout) ?? 600_000) / 1000 / STARTUP_PERIOD_S));
  const resources = s.resources ? { ...(s.resources.requests ? { requests: stringify(s.resources.requests) } : {}), ...(s.resources.limits ? { limits: stringify(s.resources.limits) } : {}) } : undefined;
  const set: V1StatefulSet = {
    apiVersion: 'apps/v1',
    kind: 'StatefulSet',
    metadata: { name: rt.metadata.name, namespace: rt.metadata.namespace, labels: labels(rt), ownerReferences: [ownerRef(rt)], annotations: {} },
    spec: {
      serviceName: headlessServiceName(rt.metadata.name),
      replicas,
      // Pods are independent (each its own data): start and stop them together, not one by one.
      podManagementPolicy: 'Parallel',
      updateStrategy: { type: 'RollingUpdate', rollingUpdate: { maxUnavailable: 1 } },
      // A pod's volume holds its Branches' databases: kept when the pod goes, and when the Runtime does.
      persistentVolumeClaimRetentionPolicy: { whenDeleted: 'Retain', whenScaled: 'Retain' },
      selector: { matchLabels: { [RUNTIME_LABEL]: rt.metadata.name } },
      template: {
        metadata: { labels: labels(rt) },
        spec: {
          securityContext: { runAsNonRoot: true, runAsUser: RUNTIME_UID, runAsGroup: RUNTIME_UID, fsGroup: RUNTIME_UID, seccompProfile: { type: 'RuntimeDefault' } },
          // The runtime never calls the Kubernetes API (the operator calls it): a ServiceAccount token
          // in the pod would only be something for a compromised runtime or tenant to read and use.
          automountServiceAccountToken: false,
          terminationGracePeriodSeconds: 60,
          ...(s.imagePullSecrets ? { imagePullSecrets: s.imagePullSecrets } : {}),
          ...(s.nodeSelector ? { nodeSelector: s.nodeSelector } : {}),
          ...(s.tolerations ? { tolerations: s.tolerations } : {}),
          // As written: the API server checks them when it stores the StatefulSet (runtime.ts reports a refusal).
          ...(s.affinity ? { affinity: s.affinity as V1Affinity } : {}),
          ...(s.topologySpreadConstraints ? { topologySpreadConstraints: s.topologySpreadConstraints as unknown as V1TopologySpreadConstraint[] } : {}),
          containers: [
            {
              name: 'runtime',
              image: s.image,
              ...(s.imagePullPolicy ? { imagePullPolicy: s.imagePullPolicy } : {}),
              args,
              env: [{ name: 'POD_NAME', valueFrom: { fieldRef: { fieldPath: 'metadata.name' } } }],
              ports: [
                { name: 'postgres', containerPort: net.enginePort },
                { name: 'api', containerPort: net.apiPort },
                { name: 'metrics', containerPort: net.metricsPort },
              ],
              securityContext: restrictedContainer(),
              // /healthz answers only after PostgreSQL's recovery: the startupProbe gives a start
              // startupTimeout, and liveness (60 s of silence) applies only once it has answered.
              startupProbe: { httpGet: { path: '/healthz', port: net.apiPort }, periodSeconds: STARTUP_PERIOD_S, failureThreshold: startupFailures },
              readinessProbe: { httpGet: { path: '/readyz', port: net.apiPort }, periodSeconds: 5, failureThreshold: 3 },
              livenessProbe: { httpGet: { path: '/healthz', port: net.apiPort }, periodSeconds: 10, failureThreshold: 6 },
              ...(resources ? { resources } : {}),
              volumeMounts: [
                { name: 'data', mountPath: DATA_DIR },
                { name: 'secret', mountPath: '/etc/pgx', readOnly: true },
                { name: 'shm', mountPath: '/dev/shm' },
                ...(s.tls ? [{ name: 'tls', mountPath: TLS_DIR, readOnly: true }] : []),
              ],
            },
          ],
          volumes: [
            { name: 'secret', secret: { secretName: secret, defaultMode: 0o400 } },
            // The container runtime's /dev/shm is 64 MB: PostgreSQL's parallel queries need more.
            { name: 'shm', emptyDir: { medium: 'Memory', sizeLimit: String(s.sharedMemory) } },
            // The key readable by the runtime's group alone (fsGroup), as PostgreSQL wants of a key file;
            // a Secret without tls.crt or tls.key keeps the pod from starting, and the kubelet says why.
            ...(s.tls
              ? [{ name: 'tls', secret: { secretName: s.tls.secretName, defaultMode: 0o440, items: [{ key: 'tls.crt', path: 'tls.crt' }, { key: 'tls.key', path: 'tls.key' }] } }]
              : []),
          ],
        },
      },
      volumeClaimTemplates: [
        {
          metadata: { name: 'data', labels: labels(rt) },
          spec: {
            accessModes: ['ReadWriteOnce'],
            ...(s.storage.storageClassName ? { storageClassName: s.storage.storageClassName } : {}),
            resources: { requests: { storage: String(s.storage.size) } },
          },
        },
      ],
    },
  };
  set.metadata!.annotations![SPEC_HASH_ANNOTATION] = crypto.createHash('sha256').update(JSON.stringify(set.spec)).digest('hex').slice(0, 16);
  return set;
}

function stringify(list: Record<string, string | number>): Record<string, string> {
  return Object.fromEntries(Object.entries(list).map(([k, v]) => [k, String(v)]));
}
