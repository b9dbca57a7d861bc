// The Runtime controller against the API double: a Runtime becomes a StatefulSet with a claim per pod,
// a headless and a client Service, a Secret with the API token and admin password, and a
// PodDisruptionBudget, all owned by it; its status reports each pod's capacity from the pod's own
// /v1/status (a real runtime started with the token from that Secret).

import { AppsV1Api, PolicyV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { parseStartArgs } from '../../src/cli/start.js';
import { MERGE_PATCH } from '../../src/operator/kube.js';
import type { Operator } from '../../src/operator/operator.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { apply, condition, makePod, NS, read, remove, startCluster, stopCluster, startOperator, statusOf, waitFor, waitForCondition, type Cluster } from './harness.js';

describe('operator: Runtime controller', function () {
  this.timeout(120_000);
  let c: Cluster;
  let op: Operator;
  let rt: TestRuntime | null = null;

  before(async () => {
    c = await startCluster();
    op = await startOperator(c);
  });
  after(async () => {
    await op.stop();
    await rt?.stop();
    await stopCluster(c);
  });

  it('creates the StatefulSet, Services, Secret and PodDisruptionBudget, owned by the Runtime', async () => {
    const created = await apply(c, 'runtimes', {
      apiVersion: 'pgx.dev/v1alpha1',
      kind: 'Runtime',
      metadata: { name: 'db' },
      spec: { replicas: 2, image: 'ghcr.io/pgx/runtime:1', storage: { storageClassName: 'zfs-localpv', size: '5Gi' }, resources: { limits: { memory: '1Gi' } }, engine: { grace: '1m', poolSize: 1 } },
    });
    const apps = c.kc.makeApiClient(AppsV1Api);
    const set = await waitFor('the StatefulSet', () => apps.readNamespacedStatefulSet({ name: 'db', namespace: NS }).catch(() => null));
    expect(set.metadata?.ownerReferences?.[0]).to.include({ kind: 'Runtime', name: 'db', uid: created.metadata!.uid, controller: true });
    expect(set.spec?.serviceName).to.equal('db-pods');
    expect(set.spec?.replicas).to.equal(2);
    expect(set.spec?.volumeClaimTemplates?.[0]?.spec?.storageClassName).to.equal('zfs-localpv');
    expect(set.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests?.storage).to.equal('5Gi');
    const container = set.spec!.template.spec!.containers[0]!;
    expect(container.args).to.include.members(['--api-token-file', '--auth', 'scram', '--grace', '60', '--pool-size', '1']);
    // The pool's growth bounds at pgx start's defaults are not passed: an operator upgrade that added
    // them would otherwise change every StatefulSet and restart every runtime pod.
    expect(container.args).to.not.include.members(['--pool-max']).and.not.include.members(['--pool-idle']);
    expect(container.readinessProbe?.httpGet?.path).to.equal('/readyz');
    expect(container.livenessProbe?.httpGet?.path).to.equal('/healthz');
    expect(container.resources?.limits?.memory).to.equal('1Gi');

    const headless = await c.core.readNamespacedService({ name: 'db-pods', namespace: NS });
    expect(headless.spec?.clusterIP).to.equal('None');
    const client = await c.core.readNamespacedService({ name: 'db', namespace: NS });
    expect(client.spec?.ports?.[0]).to.include({ port: 5432, targetPort: 6432 });
    const pdb = await c.kc.makeApiClient(PolicyV1Api).readNamespacedPodDisruptionBudget({ name: 'db', namespace: NS });
    expect(pdb.spec?.maxUnavailable).to.equal(1);
    const secret = await c.core.readNamespacedSecret({ name: 'db-pgx', namespace: NS });
    expect(Object.keys(secret.data ?? {}).sort()).to.deep.equal(['admin-password', 'api-token', 'config.json']);

    const starting = await waitForCondition(c, 'runtimes', 'db', 'Ready', 'PodsStarting');
    expect(condition(starting, 'Ready')?.message).to.contain('0 of 2');
  });

  it("reports each pod's capacity from its runtime, and replaces the StatefulSet when the spec changes", async () => {
    const secret = await c.core.readNamespacedSecret({ name: 'db-pgx', namespace: NS });
    const token = Buffer.from(secret.data!['api-token']!, 'base64').toString('utf8');
    rt = await startTestRuntime({ apiPort: 0, apiToken: token, poolSize: 0 });
    await makePod(c, 'db', 'db-0', rt);
    const seen = await waitFor('db-0 ready in the Runtime status', async () => {
      const o = await read(c, 'runtimes', 'db');
      const s = statusOf<{ readyReplicas?: number; pods?: { pod: string; ready: boolean; databases?: number }[] }>(o);
      return s.readyReplicas === 1 ? s : null;
    });
    expect(seen.pods?.[0]).to.include({ pod: 'db-0', ready: true, databases: 0 });

    const apps = c.kc.makeApiClient(AppsV1Api);
    const before = await apps.readNamespacedStatefulSet({ name: 'db', namespace: NS });
    await c.custom.patchNamespacedCustomObject({ group: 'pgx.dev', version: 'v1alpha1', namespace: NS, plural: 'runtimes', name: 'db', body: { spec: { replicas: 3 } } }, MERGE_PATCH);
    const after = await waitFor('3 replicas', async () => {
      const s = await apps.readNamespacedStatefulSet({ name: 'db', namespace: NS });
      return s.spec?.replicas === 3 ? s : null;
    });
    expect(after.metadata?.uid).to.equal(before.metadata?.uid);
    expect(after.spec?.volumeClaimTemplates).to.deep.equal(before.spec?.volumeClaimTemplates);
    const o = await waitFor('Ready to count 3 replicas', async () => {
      const r = await read(c, 'runtimes', 'db');
      return condition(r, 'Ready')?.message.startsWith('1 of 3') ? r : null;
    });
    expect(condition(o, 'Ready')).to.include({ status: 'False', reason: 'PodsStarting', observedGeneration: 2 });
  });

  it('passes engine.databaseDefaults to pgx start as it reads them, and refuses a memory default under 1Mi', async () => {
    await apply(c, 'runtimes', {
      apiVersion: 'pgx.dev/v1alpha1',
      kind: 'Runtime',
      metadata: { name: 'limits' },
      spec: { image: 'ghcr.io/pgx/runtime:1', engine: { databaseDefaults: { memory: '100M', connections: 5 } } },
    });
    const apps = c.kc.makeApiClient(AppsV1Api);
    const set = await waitFor('the StatefulSet', () => apps.readNamespacedStatefulSet({ name: 'limits', namespace: NS }).catch(() => null));
    const args = set.spec!.template.spec!.containers[0]!.args!;
    // 100M is 95.4 MiB, rounded up to whole MB (the runtime's MB are MiB).
    expect(args[args.indexOf('--database-memory-limit') + 1]).to.equal('96');
    // The real `pgx start` parser takes them (--config names a file only the pod has).
    const i = args.indexOf('--config');
    const config = parseStartArgs([...args.slice(1, i), ...args.slice(i + 2)]);
    expect(config).to.include({ databaseMemoryLimit: 96, maxSessionsPerDb: 5 });

    await apply(c, 'runtimes', {
      apiVersion: 'pgx.dev/v1alpha1',
      kind: 'Runtime',
      metadata: { name: 'tiny' },
      spec: { image: 'ghcr.io/pgx/runtime:1', engine: { databaseDefaults: { memory: '512Ki' } } },
    });
    const tiny = await waitForCondition(c, 'runtimes', 'tiny', 'Ready', 'InvalidSpec');
    expect(condition(tiny, 'Ready')?.message).to.contain('engine.databaseDefaults.memory "512Ki" is under 1Mi');
    expect(await apps.readNamespacedStatefulSet({ name: 'tiny', namespace: NS }).then(() => 'exists', () => 'absent')).to.equal('absent');
    await remove(c, 'runtimes', 'limits');
    await remove(c, 'runtimes', 'tiny');
  });

  it('passes engine.poolMax and poolIdle to pgx start, and takes a poolMax under poolSize as pgx start does (no growth)', async () => {
    await apply(c, 'runtimes', {
      apiVersion: 'pgx.dev/v1alpha1',
      kind: 'Runtime',
      metadata: { name: 'bursty' },
      spec: { image: 'ghcr.io/pgx/runtime:1', engine: { poolSize: 4, poolMax: 64, poolIdle: '1h30m' } },
    });
    const apps = c.kc.makeApiClient(AppsV1Api);
    const set = await waitFor('the StatefulSet', () => apps.readNamespacedStatefulSet({ name: 'bursty', namespace: NS }).catch(() => null));
    const args = set.spec!.template.spec!.containers[0]!.args!;
    // The real `pgx start` parser takes them (--config names a file only the pod has): seconds for the duration.
    const i = args.indexOf('--config');
    expect(parseStartArgs([...args.slice(1, i), ...args.slice(i + 2)])).to.include({ poolSize: 4, poolMax: 64, poolIdle: 5400 });

    await apply(c, 'runtimes', {
      apiVersion: 'pgx.dev/v1alpha1',
      kind: 'Runtime',
      metadata: { name: 'capped' },
      spec: { image: 'ghcr.io/pgx/runtime:1', engine: { poolSize: 600 } },
    });
    const capped = await waitFor('the StatefulSet of a poolSize over the default poolMax', () => apps.readNamespacedStatefulSet({ name: 'capped', namespace: NS }).catch(() => null));
    const cappedArgs = capped.spec!.template.spec!.containers[0]!.args!;
    const j = cappedArgs.indexOf('--config');
    expect(parseStartArgs([...cappedArgs.slice(1, j), ...cappedArgs.slice(j + 2)])).to.include({ poolSize: 600, poolMax: 500 });
    await remove(c, 'runtimes', 'bursty');
    await remove(c, 'runtimes', 'capped');
  });

  it('leaves its objects to the garbage collector when the Runtime is deleted', async () => {
    await remove(c, 'runtimes', 'db');
    const apps = c.kc.makeApiClient(AppsV1Api);
    await waitFor('the StatefulSet to go', async () => ((await apps.listNamespacedStatefulSet({ namespace: NS })).items.length === 0 ? true : null));
    await waitFor('the Secret to go', async () => ((await c.core.listNamespacedSecret({ namespace: NS })).items.some((s) => s.metadata?.name === 'db-pgx') ? null : true));
  });
});
