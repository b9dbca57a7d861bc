// The operator's test harness: the Kubernetes API double, real PGX runtimes standing in for runtime pods
// (the double runs no Pods, so the test creates the Pod objects, marks them Ready and points the operator
// at each runtime with annotations, which the operator honours only with --pod-address-overrides: the
// harness's operator turns it on), and helpers to apply objects as kubectl would and wait for them.
//
// The operator runs as the chart's ServiceAccount, with the Role and RoleBinding the real `helm template`
// renders from charts/pgx, and the double enforces them (RBAC, 403 Forbidden as a real API server): a
// request the chart grants no rule for fails here as it would in a cluster. stopCluster() fails the
// test run if the operator was refused anything (some refusals, e.g. of Events, are only logged).

import { ApiException, CoreV1Api, CustomObjectsApi, KubernetesObjectApi, type KubeConfig, type KubernetesObject } from '@kubernetes/client-node';
import crypto from 'node:crypto';
import { ApiClient } from '../../src/api/client.js';
import { MERGE_PATCH, type CustomObject } from '../../src/operator/kube.js';
import { Operator, type OperatorOptions } from '../../src/operator/operator.js';
import { API_URL_ANNOTATION, API_TOKEN_KEY, ENGINE_HOST_ANNOTATION, ENGINE_PORT_ANNOTATION, RUNTIME_LABEL, runtimeSecretName } from '../../src/operator/pods.js';
import { startKubeApi, type KubeApi, type RequestRecord } from '../helpers/kube-api/index.js';
import type { JsonObject } from '../helpers/kube-api/patch.js';
import { helm, yamlObjects } from './kube-tools.js';
import { startTestRuntime, testLogger, type TestRuntime } from '../helpers/runtime.js';

export const NS = 'default';
export const PGX = { group: 'pgx.dev', version: 'v1alpha1' } as const;
export const TOKEN = crypto.randomBytes(18).toString('hex');

export interface Cluster {
  api: KubeApi;
  /** The cluster admin (system:masters): what the tests use to play kubectl and the kubelet. */
  kc: KubeConfig;
  /** The operator's: the chart's ServiceAccount, with only what the chart's Role grants. */
  operatorKc: KubeConfig;
  /** The user name the operator's requests carry (system:serviceaccount:NS:NAME). */
  operatorUser: string;
  core: CoreV1Api;
  custom: CustomObjectsApi;
}

let renderedChart: JsonObject[] | undefined;

/** `helm template` of charts/pgx into namespace NS, defaults (a Role in NS), rendered once per process. */
export function chartObjects(): JsonObject[] {
  return (renderedChart ??= yamlObjects(helm('template', 'pgx', 'charts/pgx', '--namespace', NS)));
}

export async function startCluster(): Promise<Cluster> {
  const api = await startKubeApi();
  const kc = api.kubeConfig();
  const core = kc.makeApiClient(CoreV1Api);
  // The chart's ServiceAccount, Role and RoleBinding, as `helm install` creates them.
  const rbac = chartObjects().filter((o) => ['ServiceAccount', 'Role', 'RoleBinding'].includes(String(o.kind)));
  const objects = KubernetesObjectApi.makeApiClient(kc);
  for (const o of rbac) await objects.create(o as unknown as KubernetesObject);
  const sa = rbac.find((o) => o.kind === 'ServiceAccount');
  if (!sa) throw new Error('helm template charts/pgx rendered no ServiceAccount');
  const saName = String((sa.metadata as JsonObject).name);
  return { api, kc, operatorKc: api.serviceAccountKubeConfig(NS, saName), operatorUser: `system:serviceaccount:${NS}:${saName}`, core, custom: kc.makeApiClient(CustomObjectsApi) };
}

/** The operator's requests the API server refused for want of a rule (403). */
export function forbidden(c: Cluster): RequestRecord[] {
  return c.api.requests.filter((r) => r.user === c.operatorUser && r.code === 403);
}

/** Closes the double; fails if the operator was refused any request on the way. */
export async function stopCluster(c: Cluster | undefined): Promise<void> {
  if (!c) return;
  await c.api.close();
  const refused = forbidden(c);
  if (refused.length > 0) {
    const what = [...new Set(refused.map((r) => `${r.verb} ${r.apiGroup === '' ? 'core' : r.apiGroup}/${r.resource}${r.namespace === null ? ' (all namespaces)' : ''}`))];
    throw new Error(`the chart's RBAC refused the operator ${refused.length} request(s): ${what.join('; ')}`);
  }
}

/** kubectl apply of one of our objects: a create with fieldValidation Strict. */
export async function apply(c: Cluster, plural: string, body: CustomObject): Promise<CustomObject> {
  return (await c.custom.createNamespacedCustomObject({ ...PGX, namespace: NS, plural, body, fieldValidation: 'Strict' })) as CustomObject;
}

export async function read(c: Cluster, plural: string, name: string): Promise<CustomObject | null> {
  try {
    return (await c.custom.getNamespacedCustomObject({ ...PGX, namespace: NS, plural, name })) as CustomObject;
  } catch (err) {
    if (err instanceof ApiException && err.code === 404) return null;
    throw err;
  }
}

export async function remove(c: Cluster, plural: string, name: string): Promise<void> {
  await c.custom.deleteNamespacedCustomObject({ ...PGX, namespace: NS, plural, name });
}

/** Polls until fn returns non-null; fails with `what` after timeoutMs (no timing is asserted). */
export async function waitFor<T>(what: string, fn: () => Promise<T | null | undefined>, timeoutMs = 60_000): Promise<T> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v !== null && v !== undefined) return v;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/**
 * Waits until the operator has settled as `count` sees it (its reconciles, or its writes): nothing
 * queued or running, and `count` unchanged for `quietMs`. op.idle() alone does not see what is still
 * on its way: the watch echo of the last write of a pass, a requeue timer, the Template's delayed
 * Branch count. A count taken right after idle() can then grow by the work of an earlier step.
 */
export async function settle(op: Operator, count: () => Promise<number> | number, quietMs = 500): Promise<void> {
  await waitFor('the operator to settle', async () => {
    await op.idle();
    const before = await count();
    await new Promise((r) => setTimeout(r, quietMs));
    await op.idle();
    return (await count()) === before ? true : null;
  });
}

/** Waits until Events of `name` carry every one of `reasons` (an Event is recorded after the write it reports). */
export function waitForEvents(c: Cluster, name: string, reasons: string[]): Promise<string[]> {
  return waitFor(`Events ${reasons.join(', ')} of ${name}`, async () => {
    const events = await c.core.listNamespacedEvent({ namespace: NS, fieldSelector: `involvedObject.name=${name}` });
    const seen = events.items.map((e) => e.reason ?? '');
    return reasons.every((r) => seen.includes(r)) ? seen : null;
  });
}

export interface Cond {
  type: string;
  status: string;
  reason: string;
  message: string;
  observedGeneration?: number;
}

export function condition(obj: CustomObject | null, type: string): Cond | undefined {
  return ((obj?.status as { conditions?: Cond[] } | undefined)?.conditions ?? []).find((c) => c.type === type);
}

export function statusOf<T = Record<string, unknown>>(obj: CustomObject | null): T {
  return (obj?.status ?? {}) as T;
}

/** Waits until the object's condition `type` has `reason` (and returns the object). */
export function waitForCondition(c: Cluster, plural: string, name: string, type: string, reason: string, timeoutMs?: number): Promise<CustomObject> {
  return waitFor(`${plural}/${name} ${type} reason ${reason}`, async () => {
    const o = await read(c, plural, name);
    return condition(o, type)?.reason === reason ? o : null;
  }, timeoutMs);
}

export function waitForGone(c: Cluster, plural: string, name: string, timeoutMs?: number): Promise<true> {
  return waitFor(`${plural}/${name} to be gone`, async () => ((await read(c, plural, name)) === null ? true : null), timeoutMs);
}

/** A Runtime object, its token Secret, and one ready Pod per real runtime, annotated with its ports. */
export async function makeRuntime(c: Cluster, name: string, runtimes: TestRuntime[]): Promise<void> {
  await apply(c, 'runtimes', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name }, spec: { replicas: runtimes.length, image: 'ghcr.io/pgx/runtime:test' } });
  await c.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: runtimeSecretName(name) }, stringData: { [API_TOKEN_KEY]: TOKEN } } });
  for (const [i, rt] of runtimes.entries()) await makePod(c, name, `${name}-${i}`, rt);
}

export async function makePod(c: Cluster, runtime: string, pod: string, rt: TestRuntime): Promise<void> {
  await c.core.createNamespacedPod({
    namespace: NS,
    body: {
      metadata: {
        name: pod,
        labels: { [RUNTIME_LABEL]: runtime },
        annotations: { [API_URL_ANNOTATION]: `http://127.0.0.1:${rt.runtime.api!.port}`, [ENGINE_HOST_ANNOTATION]: '127.0.0.1', [ENGINE_PORT_ANNOTATION]: String(rt.port) },
      },
      spec: { containers: [{ name: 'runtime', image: 'ghcr.io/pgx/runtime:test' }] },
    },
  });
  await c.core.patchNamespacedPodStatus(
    { name: pod, namespace: NS, body: { status: { phase: 'Running', podIP: '127.0.0.1', conditions: [{ type: 'Ready', status: 'True' }] } } },
    MERGE_PATCH,
  );
}

export function startRuntimes(n: number): Promise<TestRuntime[]> {
  return Promise.all(Array.from({ length: n }, () => startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0 })));
}

export function apiOf(rt: TestRuntime): ApiClient {
  return new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
}

/** An operator with short timings, so tests do not wait out production defaults. */
export async function startOperator(c: Cluster, overrides: Partial<OperatorOptions> = {}): Promise<Operator> {
  const op = new Operator({
    kc: c.operatorKc,
    namespace: NS,
    leaseNamespace: NS,
    leaseName: 'pgx-operator',
    logger: testLogger(),
    resyncMs: 1_000,
    lease: { durationMs: 2_000, renewDeadlineMs: 1_500, retryPeriodMs: 250 },
    queue: { baseDelayMs: 100, maxDelayMs: 2_000 },
    ...overrides,
    // Every test runtime is on 127.0.0.1 on its own ports, which only the pods' annotations say.
    network: { addressOverrides: true, ...overrides.network },
  });
  await op.start();
  return op;
}

/** What useOperator gives a describe block: filled in by its before hook. */
export interface OperatorSetup {
  c: Cluster;
  runtimes: TestRuntime[];
  op: Operator;
}

/**
 * The usual setting of a describe block: the API double, `pods` real runtimes as the pods of Runtime
 * `main`, and a leading operator; its hooks start them before the tests and stop them after.
 */
export function useOperator(pods = 1): OperatorSetup {
  const setup = { runtimes: [] } as unknown as OperatorSetup;
  before(async function () {
    setup.c = await startCluster();
    setup.runtimes = await startRuntimes(pods);
    await makeRuntime(setup.c, 'main', setup.runtimes);
    setup.op = await startOperator(setup.c);
    await waitFor('leadership', async () => (setup.op.isLeader ? true : null));
  });
  after(async function () {
    await setup.op?.stop();
    await Promise.all(setup.runtimes.map((r) => r.stop()));
    await stopCluster(setup.c);
  });
  return setup;
}
