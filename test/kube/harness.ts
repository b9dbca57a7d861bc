// The operator's end-to-end harness on the real control plane (test/helpers/control-plane): one etcd,
// kube-apiserver and kube-controller-manager for the whole run (hooks.ts starts them), the test node
// (kubelet.ts) running the runtime Pods the StatefulSet controller makes, and per test file a namespace
// of its own with the chart's ServiceAccount, Role and RoleBinding (the real `helm template` of
// charts/pgx into that namespace). The operator runs with a token of that ServiceAccount from the
// TokenRequest API, so the API server's RBAC authorizer decides each of its requests; the audit log
// shows every refusal, and stopCluster() fails the run if there was any (some, e.g. of Events, the
// operator only logs). Pods are reached as in a cluster: the operator at <podIP>:7432, clients at the
// pod DNS name a Branch's Secret holds, which resolve() maps to the Pod IP as cluster DNS would.

import { ApiException, CoreV1Api, CustomObjectsApi, KubeConfig, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { ApiClient } from '../../src/api/client.js';
import type { CustomObject } from '../../src/operator/kube.js';
import { Operator, type OperatorOptions } from '../../src/operator/operator.js';
import { API_TOKEN_KEY, runtimeSecretName } from '../../src/operator/pods.js';
import type { AuditRecord, ControlPlane } from '../helpers/control-plane/index.js';
import { tokenKubeconfig } from '../helpers/control-plane/pki.js';
import type { JsonObject } from '../helpers/kube-api/patch.js';
import { testLogger } from '../helpers/runtime.js';
import { condition, waitFor } from '../operator/harness.js';
import { helm, yamlObjects } from '../operator/kube-tools.js';
import { plane } from './hooks.js';

export const PGX = { group: 'pgx.dev', version: 'v1alpha1' } as const;

export interface Cluster {
  ns: string;
  /** The cluster admin (system:masters): what the tests use to play kubectl. */
  kc: KubeConfig;
  /** The operator's: the chart's ServiceAccount, with only what the chart's Role grants. */
  operatorKc: KubeConfig;
  operatorUser: string;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  /** The audit log's records of requests in this namespace (and cluster-scoped ones by the operator). */
  requests(): AuditRecord[];
  /** Writes (create, update, patch, delete) in this namespace, optionally of one resource (its status included). */
  writes(resource?: string): AuditRecord[];
}

const WRITE_VERBS = new Set(['create', 'update', 'patch', 'delete', 'deletecollection']);

/** A namespace with the chart's RBAC in it, and the operator's credentials (on the suite's control plane, or `cp`). */
export async function startCluster(ns: string, cp: ControlPlane = plane().cp, labels: Record<string, string> = {}): Promise<Cluster> {
  const kc = cp.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  await core.createNamespace({ body: { metadata: { name: ns, labels } } });
  const rendered = yamlObjects(helm('template', 'pgx', 'charts/pgx', '--namespace', ns));
  const rbac = rendered.filter((o) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(String(o.kind)));
  const objects = KubernetesObjectApi.makeApiClient(kc);
  for (const o of rbac) await objects.create({ ...o, metadata: { ...(o.metadata as JsonObject), namespace: ns } } as unknown as KubernetesObject);
  const sa = rbac.find((o) => o.kind === 'ServiceAccount');
  if (!sa) throw new Error('helm template charts/pgx rendered no ServiceAccount');
  const saName = String((sa.metadata as JsonObject).name);
  // As a pod's projected token: from the TokenRequest API, signed by the API server's service-account key.
  const tr = await core.createNamespacedServiceAccountToken({ name: saName, namespace: ns, body: { spec: { audiences: [], expirationSeconds: 6 * 3600 } } });
  const operatorKc = new KubeConfig();
  operatorKc.loadFromString(tokenKubeconfig(cp.url, cp.pki, tr.status!.token!, ns));
  const operatorUser = `system:serviceaccount:${ns}:${saName}`;
  const requests = () => cp.requests().filter((r) => r.namespace === ns || (r.namespace === null && r.user === operatorUser));
  return {
    ns,
    kc,
    operatorKc,
    operatorUser,
    core,
    custom: kc.makeApiClient(CustomObjectsApi),
    requests,
    writes: (resource?: string) => requests().filter((r) => WRITE_VERBS.has(r.verb) && (resource === undefined || r.resource === resource)),
  };
}

export function forbidden(c: Cluster): AuditRecord[] {
  return c.requests().filter((r) => r.user === c.operatorUser && r.code === 403);
}

/** Deletes the namespace (the garbage collector and the namespace controller take the rest); fails if the operator was refused anything. */
export async function stopCluster(c: Cluster | undefined): Promise<void> {
  if (!c) return;
  const refused = forbidden(c);
  await c.core.deleteNamespace({ name: c.ns }).catch(() => undefined);
  if (refused.length > 0) {
    const what = [...new Set(refused.map((r) => `${r.verb} ${r.apiGroup === '' ? 'core' : r.apiGroup}/${r.resource}${r.subresource ? '/' + r.subresource : ''}${r.namespace === null ? ' (all namespaces)' : ''}`))];
    throw new Error(`the chart's RBAC refused the operator ${refused.length} request(s): ${what.join('; ')}`);
  }
}

/** kubectl apply of one of our objects: a create with fieldValidation Strict. */
export async function apply(c: Cluster, plural: string, body: CustomObject): Promise<CustomObject> {
  return (await c.custom.createNamespacedCustomObject({ ...PGX, namespace: c.ns, plural, body, fieldValidation: 'Strict' })) as CustomObject;
}

export async function read(c: Cluster, plural: string, name: string): Promise<CustomObject | null> {
  try {
    return (await c.custom.getNamespacedCustomObject({ ...PGX, namespace: c.ns, plural, name })) as CustomObject;
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return null;
    throw err;
  }
}

export async function remove(c: Cluster, plural: string, name: string): Promise<void> {
  await c.custom.deleteNamespacedCustomObject({ ...PGX, namespace: c.ns, plural, name });
}

export { waitFor, settle, condition, statusOf, type Cond } from '../operator/harness.js';

export function waitForEvents(c: Cluster, name: string, reasons: string[], timeoutMs?: number): Promise<string[]> {
  return waitFor(`Events ${reasons.join(', ')} of ${name}`, async () => {
    const events = await c.core.listNamespacedEvent({ namespace: c.ns, fieldSelector: `involvedObject.name=${name}` });
    const seen = events.items.map((e) => e.reason ?? '');
    return reasons.every((r) => seen.includes(r)) ? seen : null;
  }, timeoutMs);
}

export function waitForCondition(c: Cluster, plural: string, name: string, type: string, reason: string, timeoutMs?: number): Promise<CustomObject> {
  return waitFor(`${plural}/${name} ${type} reason ${reason}`, async () => {
    const o = await read(c, plural, name);
    return condition(o, type)?.reason === reason ? o : null;
  }, timeoutMs);
}

export function waitForGone(c: Cluster, plural: string, name: string, timeoutMs?: number): Promise<true> {
  return waitFor(`${plural}/${name} to be gone`, async () => ((await read(c, plural, name)) === null ? true : null), timeoutMs);
}

export interface RuntimeSpec {
  replicas: number;
  poolSize?: number;
}

/** The label that makes the API server's PodSecurity admission enforce the restricted profile in a namespace. */
export const RESTRICTED_NAMESPACE = { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' };

/** Applies a Runtime and waits for the operator's StatefulSet's Pods to be Ready on the test node (and the Runtime to say so). */
export async function makeRuntime(c: Cluster, name: string, spec: RuntimeSpec, timeoutMs = 180_000): Promise<void> {
  await apply(c, 'runtimes', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name }, spec: { replicas: spec.replicas, image: 'ghcr.io/pgx/pgx:0.1.0', storage: { size: '1Gi' }, engine: { poolSize: spec.poolSize ?? 0, grace: '2s' } } });
  await waitForCondition(c, 'runtimes', name, 'Ready', 'AllPodsReady', timeoutMs);
}

/** The Runtime's API token, from the Secret the operator made. */
export async function runtimeApiToken(c: Cluster, runtime: string): Promise<string> {
  const s = await c.core.readNamespacedSecret({ name: runtimeSecretName(runtime), namespace: c.ns });
  return Buffer.from(s.data![API_TOKEN_KEY]!, 'base64').toString('utf8').trim();
}

/** The control API of a runtime pod, at its Pod IP as the operator reaches it. */
export async function podApi(c: Cluster, runtime: string, pod: string): Promise<ApiClient> {
  const p = await c.core.readNamespacedPod({ name: pod, namespace: c.ns });
  if (!p.status?.podIP) throw new Error(`pod ${pod} has no IP`);
  return new ApiClient({ url: `http://${p.status.podIP}:7432`, token: await runtimeApiToken(c, runtime) });
}

/** A Branch Secret's DATABASE_URL with its pod DNS name resolved to the Pod IP, as cluster DNS would. */
export async function resolvedUrl(url: string): Promise<string> {
  const u = new URL(url);
  u.hostname = await plane().node.resolve(u.hostname);
  return u.toString();
}

/** An operator with short timings, so tests do not wait out production defaults. */
export async function startOperator(c: Cluster, overrides: Partial<OperatorOptions> = {}): Promise<Operator> {
  const op = new Operator({
    kc: c.operatorKc,
    namespace: c.ns,
    leaseNamespace: c.ns,
    leaseName: 'pgx-operator',
    logger: testLogger(),
    resyncMs: 1_000,
    lease: { durationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 },
    queue: { baseDelayMs: 100, maxDelayMs: 2_000 },
    ...overrides,
  });
  await op.start();
  return op;
}
