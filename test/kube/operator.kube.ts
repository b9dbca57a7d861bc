// The operator end to end on a real control plane (kube-apiserver, etcd, kube-controller-manager: see
// hooks.ts), with the chart's RBAC in force. The operator makes the Runtime's StatefulSet, the
// StatefulSet controller its Pods, and the test node runs each as a real `pgx start` on real PostgreSQL
// 18 at its own Pod IP. Objects are applied as kubectl would; what is checked is what a user sees:
// conditions, Secrets that connect, Events, and databases appearing and disappearing on the pods.

import { expect } from 'chai';
import { AppsV1Api } from '@kubernetes/client-node';
import pg from 'pg';
import { ApiClient, ApiClientError } from '../../src/api/client.js';
import type { Operator } from '../../src/operator/operator.js';
import { MERGE_PATCH } from '../../src/operator/kube.js';
import { plane } from './hooks.js';
import {
  apply,
  condition,
  makeRuntime,
  podApi,
  read,
  remove,
  resolvedUrl,
  runtimeApiToken,
  startCluster,
  stopCluster,
  startOperator,
  settle,
  statusOf,
  waitFor,
  waitForCondition,
  waitForEvents,
  waitForGone,
  type Cluster,
} from './harness.js';

const NS = 'operator-e2e';

interface BranchStatus {
  phase?: string;
  pod?: string;
  database?: string;
  secretName?: string;
  createdAt?: string;
  expiresAt?: string;
}

const SCHEMA = "CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'one'), (2, 'two'), (3, 'three');";

function templateBody(name: string, source: Record<string, unknown>, runtime = 'main') {
  return { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name }, spec: { runtimeRef: { name: runtime }, source } };
}

function branchBody(name: string, template: string, spec: Record<string, unknown> = {}) {
  return { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: template }, ...spec } };
}

describe('operator end to end (real control plane, chart RBAC, runtime pods on the test node)', function () {
  this.timeout(240_000);
  let c: Cluster;
  let op: Operator;
  const pods = ['main-0', 'main-1'];

  /** The control API of a runtime pod, at its current Pod IP. */
  const apiOf = (pod: string): Promise<ApiClient> => podApi(c, 'main', pod);

  async function databaseExists(pod: string, database: string): Promise<boolean> {
    try {
      await (await apiOf(pod)).getDatabase(database);
      return true;
    } catch (err) {
      if (err instanceof ApiClientError && err.status === 404) return false;
      throw err;
    }
  }

  /** POSTs to the runtimes' credentials route so far (the operator makes a Branch's credential with its database). */
  async function credentialCalls(): Promise<number> {
    let n = 0;
    const token = await runtimeApiToken(c, 'main');
    for (const pod of pods) {
      const p = await c.core.readNamespacedPod({ name: pod, namespace: NS });
      const res = await fetch(`http://${p.status!.podIP}:7432/metrics`, { headers: { authorization: `Bearer ${token}` } });
      for (const line of (await res.text()).split('\n')) {
        if (line.startsWith('pgx_api_requests_total{') && line.includes('method="POST"') && line.includes('route="/v1/databases/{name}/credentials"')) n += Number(line.split(' ').pop());
      }
    }
    return n;
  }

  before(async function () {
    c = await startCluster(NS);
    op = await startOperator(c);
    await waitFor('leadership', async () => (op.isLeader ? true : null));
    await makeRuntime(c, 'main', { replicas: 2 });
    await apply(c, 'templates', templateBody('app', { sql: SCHEMA }));
    await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');
  });

  after(async function () {
    await op?.stop();
    await stopCluster(c);
  });

  it('builds and seals a Template on every runtime pod, with status per pod', async function () {
    const tpl = await read(c, 'templates', 'app');
    const s = statusOf<{ database: string; pods: { pod: string; phase: string; observedGeneration: number }[] }>(tpl);
    expect(s.database).to.equal('app');
    expect(s.pods.map((p) => [p.pod, p.phase, p.observedGeneration])).to.deep.equal([
      ['main-0', 'Sealed', 1],
      ['main-1', 'Sealed', 1],
    ]);
    expect(condition(tpl, 'Ready')).to.include({ status: 'True', observedGeneration: tpl!.metadata!.generation });
    for (const pod of pods) expect((await (await apiOf(pod)).listTemplates()).find((t) => t.name === 'app')?.sealed).to.equal(true);
    expect(tpl!.metadata!.finalizers).to.include('pgx.dev/template-in-use');
  });

  it('makes a Branch Ready with a Secret whose DATABASE_URL connects and sees the template rows', async function () {
    const created = await apply(c, 'branches', branchBody('pr-1', 'app'));
    const ready = await waitForCondition(c, 'branches', 'pr-1', 'Ready', 'DatabaseReady');
    const s = statusOf<BranchStatus>(ready);
    expect(s.phase).to.equal('Ready');
    expect(s.pod).to.be.oneOf(['main-0', 'main-1']);
    expect(s.database).to.equal(`tdb_app__${created.metadata!.uid!.replace(/-/g, '').slice(0, 12)}`);
    expect(s.secretName).to.equal('pr-1-db');
    expect(s.createdAt).to.match(/Z$/);
    expect(s.expiresAt).to.equal(undefined);
    expect(condition(ready, 'Ready')?.observedGeneration).to.equal(ready.metadata!.generation);
    expect(condition(ready, 'Expired')).to.include({ status: 'False', reason: 'NoTTL' });

    const secret = await c.core.readNamespacedSecret({ name: 'pr-1-db', namespace: NS });
    const data = Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    expect(Object.keys(data).sort()).to.deep.equal(['DATABASE_URL', 'database', 'dbname', 'host', 'jdbc-uri', 'password', 'pgpass', 'port', 'provider', 'sslmode', 'type', 'uri', 'user', 'username']);
    expect(secret.type).to.equal('servicebinding.io/postgresql');
    expect(data.dbname).to.equal(s.database);
    expect(secret.metadata?.ownerReferences?.[0]).to.include({ kind: 'Branch', name: 'pr-1', uid: created.metadata!.uid, controller: true });
    // The Secret names the pod's DNS name under the headless Service, as a client in the cluster uses it.
    expect(data.host).to.equal(`${s.pod}.main-pods.${NS}.svc.cluster.local`);
    const client = new pg.Client({ connectionString: await resolvedUrl(data.DATABASE_URL!) });
    await client.connect();
    try {
      const rows = await client.query<{ label: string }>('SELECT label FROM items ORDER BY id');
      expect(rows.rows.map((r) => r.label)).to.deep.equal(['one', 'two', 'three']);
      expect((await client.query<{ u: string }>('SELECT current_user AS u')).rows[0]!.u).to.equal(data.user);
    } finally {
      await client.end();
    }
    // Pinned by default: the runtime keeps it however long it sits idle.
    expect((await (await apiOf(s.pod!)).getDatabase(s.database!)).pinned).to.equal(true);
    // The credential came with the database, in the create call.
    expect(await credentialCalls()).to.equal(0);
    // Recorded after the Ready write, so it may come a moment after the condition is seen.
    await waitForEvents(c, 'pr-1', ['Ready']);
  });

  it('makes no write on a pass over unchanged state (resync every second)', async function () {
    await waitForCondition(c, 'branches', 'pr-1', 'Ready', 'DatabaseReady');
    // The Template counts its Branches a second after one is added (operator.ts): settled state includes that count.
    await waitFor('the Template to count pr-1', async () => ((statusOf<{ branches?: number }>(await read(c, 'templates', 'app')).branches ?? 0) >= 1 ? true : null));
    const writes = () => c.writes('branches').length + c.writes('templates').length + c.writes('secrets').length;
    await settle(op, writes);
    const before = writes();
    const reconciles = await op.metrics.reconcileCount('branch');
    await waitFor('three more reconciles of pr-1', async () => ((await op.metrics.reconcileCount('branch')) >= reconciles + 3 ? true : null));
    expect(writes()).to.equal(before);
  });

  it('drops the database when a Branch is deleted by hand', async function () {
    const s = statusOf<BranchStatus>(await read(c, 'branches', 'pr-1'));
    expect(await databaseExists(s.pod!, s.database!)).to.equal(true);
    await remove(c, 'branches', 'pr-1');
    await waitForGone(c, 'branches', 'pr-1');
    expect(await databaseExists(s.pod!, s.database!)).to.equal(false);
    await waitFor('the Secret to be garbage-collected', async () => ((await c.core.listNamespacedSecret({ namespace: NS, labelSelector: 'pgx.dev/branch=pr-1' })).items.length === 0 ? true : null));
    await waitForEvents(c, 'pr-1', ['DatabaseDropped']);
  });

  it('deletes a Branch whose ttl ran out, and drops its database on its pod', async function () {
    // Long enough to see it Ready first on a loaded machine: the ttl runs from creation, not from Ready.
    const created = await apply(c, 'branches', branchBody('short', 'app', { ttl: '10s' }));
    const ready = await waitForCondition(c, 'branches', 'short', 'Ready', 'DatabaseReady');
    const s = statusOf<BranchStatus>(ready);
    // From the Branch's creation, not its database's: a Branch that never becomes Ready expires too.
    expect(Date.parse(s.expiresAt!) - Date.parse(String(created.metadata!.creationTimestamp))).to.equal(10_000);
    expect(condition(ready, 'Expired')).to.include({ status: 'False', reason: 'NotExpired' });
    expect(await databaseExists(s.pod!, s.database!)).to.equal(true);
    await waitForGone(c, 'branches', 'short', 30_000);
    expect(await databaseExists(s.pod!, s.database!)).to.equal(false);
    await waitForEvents(c, 'short', ['TTLExpired', 'DatabaseDropped']);
  });

  it('spreads Branches over the pods', async function () {
    await apply(c, 'branches', branchBody('spread-a', 'app'));
    await waitForCondition(c, 'branches', 'spread-a', 'Ready', 'DatabaseReady');
    await apply(c, 'branches', branchBody('spread-b', 'app'));
    await waitForCondition(c, 'branches', 'spread-b', 'Ready', 'DatabaseReady');
    const pods = [statusOf<BranchStatus>(await read(c, 'branches', 'spread-a')).pod, statusOf<BranchStatus>(await read(c, 'branches', 'spread-b')).pod];
    expect(pods.sort()).to.deep.equal(['main-0', 'main-1']);
    await remove(c, 'branches', 'spread-a');
    await remove(c, 'branches', 'spread-b');
    await waitForGone(c, 'branches', 'spread-a');
    await waitForGone(c, 'branches', 'spread-b');
  });

  it('spreads a burst of Branches applied at once over the pods', async function () {
    // Placed concurrently, each before the watch brings back the others' placements: the operator must
    // count its own recent choices (placement.ts, PlacementLedger), or they all pick the same pod.
    const names = Array.from({ length: 12 }, (_, i) => `burst-${i}`);
    await Promise.all(names.map((n) => apply(c, 'branches', branchBody(n, 'app'))));
    const pods = await Promise.all(names.map(async (n) => statusOf<BranchStatus>(await waitForCondition(c, 'branches', n, 'Ready', 'DatabaseReady')).pod));
    const on0 = pods.filter((p) => p === 'main-0').length;
    // Evenly, give or take a database the runtimes' status (read at most a second ago) still counts.
    expect(Math.abs(on0 - (12 - on0)), pods.join(', ')).to.be.at.most(2);
    await Promise.all(names.map((n) => remove(c, 'branches', n)));
    await Promise.all(names.map((n) => waitForGone(c, 'branches', n)));
  });

  it('holds the deletion of a Template in use, naming the Branches, and lets it go when they are gone', async function () {
    await apply(c, 'templates', templateBody('held', { sql: 'CREATE TABLE t (x int);' }));
    await waitForCondition(c, 'templates', 'held', 'Ready', 'Sealed');
    await apply(c, 'branches', branchBody('uses-held', 'held'));
    await waitForCondition(c, 'branches', 'uses-held', 'Ready', 'DatabaseReady');
    await remove(c, 'templates', 'held');
    const blocked = await waitForCondition(c, 'templates', 'held', 'Ready', 'DeletionBlocked');
    expect(condition(blocked, 'Ready')?.message).to.contain('uses-held');
    expect(blocked.metadata?.deletionTimestamp).to.be.a('string');
    await waitForEvents(c, 'held', ['DeletionBlocked']);
    // A new Branch from a Template being deleted is not made.
    await apply(c, 'branches', branchBody('too-late', 'held'));
    await waitForCondition(c, 'branches', 'too-late', 'Ready', 'TemplateDeleting');
    await remove(c, 'branches', 'too-late');
    await remove(c, 'branches', 'uses-held');
    await waitForGone(c, 'templates', 'held');
    // Dropped on every pod: nobody mints from a Template that no longer exists, and its disk is free.
    for (const pod of pods) expect((await (await apiOf(pod)).listTemplates()).map((t) => t.name)).to.not.include('held');
  });

  it('applies limits.memory and limits.connections on the runtime, and follows changes to them', async function () {
    await apply(c, 'branches', branchBody('limited', 'app', { limits: { memory: '64Mi', connections: 7 } }));
    const ready = await waitForCondition(c, 'branches', 'limited', 'Ready', 'DatabaseReady');
    const s = statusOf<BranchStatus>(ready);
    const api = await apiOf(s.pod!);
    expect(await api.getDatabase(s.database!)).to.include({ memory_limit_mb: 64, connection_limit: 7 });

    const patch = (limits: Record<string, unknown>) =>
      c.custom.patchNamespacedCustomObject({ group: 'pgx.dev', version: 'v1alpha1', namespace: NS, plural: 'branches', name: 'limited', body: { spec: { limits } } }, MERGE_PATCH);
    // 100M is 95.4 MiB: rounded up, so the limit is never tighter than what was written.
    await patch({ memory: '100M', connections: 9 });
    await waitFor('the new limits on the runtime', async () => {
      const db = await api.getDatabase(s.database!);
      return db.memory_limit_mb === 96 && db.connection_limit === 9 ? db : null;
    });
    // Taken out of the spec: back to the runtime's defaults (none here).
    await patch({ memory: null, connections: null });
    await waitFor('the limits back to the runtime defaults', async () => {
      const db = await api.getDatabase(s.database!);
      return db.memory_limit_mb === null && db.connection_limit === null ? db : null;
    });
    expect(condition(await read(c, 'branches', 'limited'), 'Ready')?.reason).to.equal('DatabaseReady');

    // Under 1Mi is no limit a runtime can hold: Failed, saying why, and no database is made.
    await apply(c, 'branches', branchBody('tiny-memory', 'app', { limits: { memory: '512Ki' } }));
    const tiny = await waitForCondition(c, 'branches', 'tiny-memory', 'Ready', 'InvalidMemoryLimit');
    expect(statusOf<BranchStatus>(tiny).phase).to.equal('Failed');
    expect(statusOf<BranchStatus>(tiny).database).to.equal(undefined);
    expect(condition(tiny, 'Ready')?.message).to.contain('limits.memory "512Ki" is under 1Mi');
    await waitForEvents(c, 'tiny-memory', ['InvalidMemoryLimit']);
    // Fixed, it is made with the limit.
    await c.custom.patchNamespacedCustomObject({ group: 'pgx.dev', version: 'v1alpha1', namespace: NS, plural: 'branches', name: 'tiny-memory', body: { spec: { limits: { memory: '1Mi' } } } }, MERGE_PATCH);
    const fixed = statusOf<BranchStatus>(await waitForCondition(c, 'branches', 'tiny-memory', 'Ready', 'DatabaseReady'));
    expect((await (await apiOf(fixed.pod!)).getDatabase(fixed.database!)).memory_limit_mb).to.equal(1);

    for (const name of ['limited', 'tiny-memory']) await remove(c, 'branches', name);
    for (const name of ['limited', 'tiny-memory']) await waitForGone(c, 'branches', name);
  });

  it('reports bad specs in conditions a person understands, without a crash loop', async function () {
    // Refused by the schema at apply time, as kubectl would show it.
    const refused = await apply(c, 'branches', branchBody('bad-ttl', 'app', { ttl: '-1h' })).then(
      () => null,
      (e: { code?: number; body?: unknown }) => e,
    );
    expect(refused?.code).to.equal(422);
    expect(String(refused?.body)).to.contain('spec.ttl');
    const memory = await apply(c, 'branches', branchBody('bad-memory', 'app', { limits: { memory: 'lots' } })).then(() => null, (e: { code?: number }) => e);
    expect(memory?.code).to.equal(422);

    await apply(c, 'branches', branchBody('orphan', 'no-such-template'));
    const orphan = await waitForCondition(c, 'branches', 'orphan', 'Ready', 'TemplateNotFound');
    expect(statusOf<BranchStatus>(orphan).phase).to.equal('Pending');
    expect(condition(orphan, 'Ready')?.message).to.contain('Template no-such-template does not exist');

    await apply(c, 'templates', templateBody('broken', { sql: 'CREATE TABLE t (x int); SELECT * FROM missing_table;' }));
    const broken = await waitForCondition(c, 'templates', 'broken', 'Ready', 'BuildFailed');
    expect(condition(broken, 'Ready')?.message).to.contain('missing_table');
    await apply(c, 'templates', templateBody('no-configmap', { configMapRef: { name: 'schema' } }));
    const missing = await waitForCondition(c, 'templates', 'no-configmap', 'Ready', 'ConfigMapNotFound');
    expect(condition(missing, 'Ready')?.message).to.contain('ConfigMap schema does not exist');

    // A failed build is not retried until the spec changes: passes over it write nothing. Only writes to
    // the failed Templates count: Template app may still be counting down its Branches from the last test.
    const failedWrites = () => c.writes('templates').filter((w) => w.name === 'broken' || w.name === 'no-configmap').length;
    await settle(op, failedWrites);
    const writes = failedWrites();
    const reconciles = await op.metrics.reconcileCount('template');
    await waitFor('more template reconciles', async () => ((await op.metrics.reconcileCount('template')) >= reconciles + 6 ? true : null));
    expect(failedWrites()).to.equal(writes);

    // Fixing the source rebuilds it.
    await c.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'schema' }, data: { 'schema.sql': SCHEMA } } });
    await waitForCondition(c, 'templates', 'no-configmap', 'Ready', 'Sealed');
    for (const name of ['orphan']) await remove(c, 'branches', name);
    for (const name of ['broken', 'no-configmap']) await remove(c, 'templates', name);
    await waitForGone(c, 'templates', 'broken');
  });

  it('holds a scale-down past a pod with Branches (the pod stays, the Runtime says why), and scales down once they are gone', async function () {
    await apply(c, 'branches', branchBody('held', 'app', { affinity: { pod: 'main-1' } }));
    const ready = await waitForCondition(c, 'branches', 'held', 'Ready', 'DatabaseReady');
    expect(statusOf<BranchStatus>(ready).pod).to.equal('main-1');
    const apps = c.kc.makeApiClient(AppsV1Api);
    const replicas = async () => (await apps.readNamespacedStatefulSet({ name: 'main', namespace: NS })).spec?.replicas;
    const scale = (n: number) => c.custom.patchNamespacedCustomObject({ group: 'pgx.dev', version: 'v1alpha1', namespace: NS, plural: 'runtimes', name: 'main', body: { spec: { replicas: n } } }, MERGE_PATCH);
    await scale(1);
    // Held: a Branch on main-1 would be stranded (its kubectl delete waiting for a pod that never comes back).
    const held = await waitForCondition(c, 'runtimes', 'main', 'ScaleDownHeld', 'BranchesOnPods');
    expect(condition(held, 'ScaleDownHeld')?.message).to.contain('held');
    await op.idle();
    expect(await replicas()).to.equal(2);
    expect(condition(await read(c, 'branches', 'held'), 'Ready')?.reason).to.equal('DatabaseReady');
    await waitForEvents(c, 'main', ['ScaleDownHeld']);
    // Gone, the pod goes (the StatefulSet controller deletes main-1; its claim stays).
    await remove(c, 'branches', 'held');
    await waitForGone(c, 'branches', 'held');
    // Its database is looked for once main-1 is back on its volume, below: from here on the pod may
    // already be going (CI run 29 asked it while it went, and met a refused connection).
    await waitFor('the StatefulSet scaled to 1', async () => ((await replicas()) === 1 ? true : null));
    await waitForCondition(c, 'runtimes', 'main', 'ScaleDownHeld', 'NoBranchesOnRemovedPods');
    await waitFor('main-1 gone', async () => ((await c.core.listNamespacedPod({ namespace: NS, labelSelector: 'pgx.dev/runtime=main' })).items.length === 1 ? true : null), 120_000);
    // Read for the status written after this patch: one written before it can still count main-1 ready
    // from before the scale-down (CI run 46 read readyReplicas 2 there, then found no main-1).
    const generation = ((await scale(2)) as { metadata?: { generation?: number } }).metadata?.generation ?? 0;
    await waitFor('both pods ready again', async () => {
      const s = statusOf<{ readyReplicas?: number; observedGeneration?: number }>(await read(c, 'runtimes', 'main'));
      return s.readyReplicas === 2 && (s.observedGeneration ?? 0) >= generation ? true : null;
    }, 120_000);
    // The drop went before the pod: main-1, back on the same volume, does not have the database.
    expect(await databaseExists('main-1', statusOf<BranchStatus>(ready).database!)).to.equal(false);
    await waitFor('app sealed on both pods', async () => {
      const t = await read(c, 'templates', 'app');
      const entries = statusOf<{ pods?: { phase: string }[] }>(t).pods ?? [];
      return condition(t, 'Ready')?.reason === 'Sealed' && entries.length === 2 ? true : null;
    }, 120_000);
  });

  it('rebuilds the Template on every pod when its spec changes; new Branches see the new rows', async function () {
    await c.custom.patchNamespacedCustomObject(
      { group: 'pgx.dev', version: 'v1alpha1', namespace: NS, plural: 'templates', name: 'app', body: { spec: { source: { sql: SCHEMA + " INSERT INTO items VALUES (4, 'four');" } } } },
      MERGE_PATCH,
    );
    const rebuilt = await waitFor('app rebuilt at generation 2', async () => {
      const t = await read(c, 'templates', 'app');
      const pods = statusOf<{ pods?: { phase: string; observedGeneration?: number }[] }>(t).pods ?? [];
      return t?.metadata?.generation === 2 && condition(t, 'Ready')?.status === 'True' && pods.every((p) => p.observedGeneration === 2) ? t : null;
    });
    expect(condition(rebuilt, 'Ready')?.observedGeneration).to.equal(2);
    await apply(c, 'branches', branchBody('after-change', 'app'));
    const ready = await waitForCondition(c, 'branches', 'after-change', 'Ready', 'DatabaseReady');
    const secret = await c.core.readNamespacedSecret({ name: statusOf<BranchStatus>(ready).secretName!, namespace: NS });
    const client = new pg.Client({ connectionString: await resolvedUrl(Buffer.from(secret.data!.DATABASE_URL!, 'base64').toString('utf8')) });
    await client.connect();
    try {
      expect((await client.query<{ n: string }>('SELECT count(*) AS n FROM items')).rows[0]!.n).to.equal('4');
    } finally {
      await client.end();
    }
    await remove(c, 'branches', 'after-change');
    await waitForGone(c, 'branches', 'after-change');
  });

  it("converges when a pod's runtime crashes mid-reconcile and the kubelet restarts it", async function () {
    // The runtime behind main-1 dies (its whole container); the Pod stays, and turns not Ready.
    const restart = await plane().node.crash(NS, 'main-1');
    await apply(c, 'branches', branchBody('restart', 'app', { affinity: { pod: 'main-1' } }));
    // Pending: either placement found main-1 silent, or the Template controller saw it first and no
    // longer counts main-1 as holding the template. Both say which pod.
    const waiting = await waitFor('restart to wait for main-1', async () => {
      const b = await read(c, 'branches', 'restart');
      return ['PodUnreachable', 'PodNotAvailable'].includes(condition(b, 'Ready')?.reason ?? '') ? b : null;
    });
    expect(condition(waiting, 'Ready')?.message).to.contain('main-1');
    expect(statusOf<BranchStatus>(waiting).phase).to.equal('Pending');
    const before = statusOf<{ pods: { pod: string; templateGeneration?: number }[] }>(await read(c, 'templates', 'app')).pods.find((p) => p.pod === 'main-1');
    // The kubelet restarts the container on the same data directory.
    restart();
    const ready = await waitForCondition(c, 'branches', 'restart', 'Ready', 'DatabaseReady', 120_000);
    // The Template on main-1 was recognised, not rebuilt: still the runtime's first build of generation 2.
    const tpl = await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');
    const entry = statusOf<{ pods: { pod: string; templateGeneration?: number }[] }>(tpl).pods.find((p) => p.pod === 'main-1');
    expect(entry?.templateGeneration).to.equal((await (await apiOf('main-1')).listTemplates()).find((t) => t.name === 'app')?.generation);
    if (before?.templateGeneration !== undefined) expect(entry?.templateGeneration).to.equal(before.templateGeneration);
    expect(statusOf<BranchStatus>(ready).pod).to.equal('main-1');
    expect(await databaseExists('main-1', statusOf<BranchStatus>(ready).database!)).to.equal(true);
    await remove(c, 'branches', 'restart');
    await waitForGone(c, 'branches', 'restart');
    expect(await databaseExists('main-1', statusOf<BranchStatus>(ready).database!)).to.equal(false);
  });
});
