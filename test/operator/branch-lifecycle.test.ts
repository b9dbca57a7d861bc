// The Branch's lifecycle where the API double shows it as well as a cluster would: a Secret name taken
// by something else (never adopted), the Secret's keys and type, the ttl counted from the Branch's
// creation (a Branch that never became Ready expires too), expiryPolicy Retain (database dropped, object
// kept Expired), a pod deleted and re-created (Unavailable, then Ready with its database checked), and a
// Runtime whose deletion and scale-down wait for the Branches on its pods. The real control plane runs
// the same with the StatefulSet controller and the garbage collector (test/kube/platform.kube.ts).

import { expect } from 'chai';
import { AppsV1Api } from '@kubernetes/client-node';
import pg from 'pg';
import type { Operator } from '../../src/operator/operator.js';
import type { TestRuntime } from '../helpers/runtime.js';
import { apiOf, apply, condition, makePod, makeRuntime, NS, read, remove, startCluster, stopCluster, startOperator, startRuntimes, statusOf, waitFor, waitForCondition, waitForGone, type Cluster } from './harness.js';

const SCHEMA = "CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'one');";

interface BranchStatus {
  phase?: string;
  pod?: string;
  database?: string;
  secretName?: string;
  expiresAt?: string;
}

const branch = (name: string, spec: Record<string, unknown> = {}, template = 'app') => ({ apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: template }, ...spec } });

describe('operator: Branch lifecycle (Secrets, ttl and expiry policy, pods that come back, Runtime holds)', function () {
  this.timeout(180_000);
  let c: Cluster;
  let runtimes: TestRuntime[] = [];
  let op: Operator;

  before(async function () {
    c = await startCluster();
    runtimes = await startRuntimes(1);
    await makeRuntime(c, 'main', runtimes);
    op = await startOperator(c);
    await waitFor('leadership', async () => (op.isLeader ? true : null));
    await apply(c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: 'main' }, source: { sql: SCHEMA } } });
    await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');
  });

  after(async function () {
    await op?.stop();
    await Promise.all(runtimes.map((r) => r.stop()));
    await stopCluster(c);
  });

  const secretData = async (name: string): Promise<{ type: string | undefined; data: Record<string, string> }> => {
    const s = await c.core.readNamespacedSecret({ name, namespace: NS });
    return { type: s.type, data: Object.fromEntries(Object.entries(s.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')])) };
  };

  const databaseExists = async (database: string): Promise<boolean> => (await apiOf(runtimes[0]!).listDatabases()).some((d) => d.name === database);

  it('gives the Secret the keys apps and CloudNativePG users expect, and a Service Binding type', async function () {
    await apply(c, 'branches', branch('keys'));
    const s = statusOf<BranchStatus>(await waitForCondition(c, 'branches', 'keys', 'Ready', 'DatabaseReady'));
    const { type, data } = await secretData(s.secretName!);
    expect(type).to.equal('servicebinding.io/postgresql');
    expect(Object.keys(data).sort()).to.deep.equal(['DATABASE_URL', 'database', 'dbname', 'host', 'jdbc-uri', 'password', 'pgpass', 'port', 'provider', 'sslmode', 'type', 'uri', 'user', 'username'].sort());
    expect(data).to.include({ type: 'postgresql', provider: 'pgx', username: data.user, uri: data.DATABASE_URL, database: s.database, sslmode: 'disable' });
    expect(data['jdbc-uri']).to.equal(`jdbc:postgresql://${data.host}:${data.port}/${s.database}?user=${encodeURIComponent(data.user!)}&password=${encodeURIComponent(data.password!)}&sslmode=disable`);
    expect(data.pgpass).to.equal(`${data.host}:${data.port}:${s.database}:${data.user}:${data.password}\n`);
    // The uri connects, and sees the template's rows.
    const client = new pg.Client({ connectionString: data.uri });
    await client.connect();
    try {
      expect((await client.query<{ label: string }>('SELECT label FROM items')).rows[0]!.label).to.equal('one');
    } finally {
      await client.end();
    }
    await remove(c, 'branches', 'keys');
    await waitForGone(c, 'branches', 'keys');
  });

  it('makes a lost Secret again with a new credential, and the lost one stops working', async function () {
    await apply(c, 'branches', branch('lost'));
    const s = statusOf<BranchStatus>(await waitForCondition(c, 'branches', 'lost', 'Ready', 'DatabaseReady'));
    const first = (await secretData(s.secretName!)).data;
    await c.core.deleteNamespacedSecret({ name: s.secretName!, namespace: NS });
    const second = await waitFor('the Secret made again', async () => (await c.core.readNamespacedSecret({ name: s.secretName!, namespace: NS }).catch(() => null)) && (await secretData(s.secretName!)).data);
    expect(second.user).to.not.equal(first.user);
    const login = (uri: string) => new pg.Client({ connectionString: uri }).connect().then(() => 'logged in', (err: { code?: string }) => err.code);
    expect(await login(first.uri!)).to.match(/^28(000|P01)$/);
    const client = new pg.Client({ connectionString: second.uri });
    await client.connect();
    await client.end();
    await remove(c, 'branches', 'lost');
    await waitForGone(c, 'branches', 'lost');
  });

  it('never adopts a Secret it does not own: the condition names the owner, and the Secret is left as it was', async function () {
    await c.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'clash-db' }, stringData: { host: 'elsewhere.example', DATABASE_URL: 'postgresql://someone@elsewhere.example/other' } } });
    await apply(c, 'branches', branch('clash'));
    const taken = await waitForCondition(c, 'branches', 'clash', 'Ready', 'SecretNameTaken');
    expect(condition(taken, 'Ready')?.status).to.equal('False');
    expect(condition(taken, 'Ready')?.message).to.contain('Secret clash-db already exists and belongs to no owner');
    const s = statusOf<BranchStatus>(taken);
    expect(s.phase).to.equal('Pending');
    expect(s.secretName).to.equal(undefined);
    const { data } = await secretData('clash-db');
    expect(data).to.deep.equal({ host: 'elsewhere.example', DATABASE_URL: 'postgresql://someone@elsewhere.example/other' });
    // The name freed, the Branch makes its own Secret and becomes Ready.
    await c.core.deleteNamespacedSecret({ name: 'clash-db', namespace: NS });
    const ready = await waitForCondition(c, 'branches', 'clash', 'Ready', 'DatabaseReady', 60_000);
    expect(statusOf<BranchStatus>(ready).secretName).to.equal('clash-db');
    expect((await c.core.readNamespacedSecret({ name: 'clash-db', namespace: NS })).metadata?.ownerReferences?.[0]?.uid).to.equal(ready.metadata!.uid);
    await remove(c, 'branches', 'clash');
    await waitForGone(c, 'branches', 'clash');
  });

  it('counts the ttl from the Branch\'s creation: a Branch that never became Ready expires too', async function () {
    const created = await apply(c, 'branches', branch('typo', { ttl: '3s' }, 'no-such-template'));
    const pending = await waitForCondition(c, 'branches', 'typo', 'Ready', 'TemplateNotFound');
    expect(statusOf<BranchStatus>(pending).expiresAt).to.equal(new Date(Date.parse(String(created.metadata!.creationTimestamp)) + 3_000).toISOString().replace('.000Z', 'Z'));
    await waitForGone(c, 'branches', 'typo', 30_000);
  });

  it('with expiryPolicy Retain drops the database and deletes the Secret, and keeps the Branch Expired', async function () {
    // Long enough to see it Ready first on a loaded machine: the ttl runs from creation, not from Ready.
    await apply(c, 'branches', branch('kept', { ttl: '10s', expiryPolicy: 'Retain' }));
    const ready = statusOf<BranchStatus>(await waitForCondition(c, 'branches', 'kept', 'Ready', 'DatabaseReady'));
    expect(await databaseExists(ready.database!)).to.equal(true);
    const expired = await waitForCondition(c, 'branches', 'kept', 'Expired', 'TTLExpired', 30_000);
    expect(condition(expired, 'Expired')?.status).to.equal('True');
    expect(condition(expired, 'Ready')).to.include({ status: 'False', reason: 'Expired' });
    const s = statusOf<BranchStatus>(expired);
    expect(s.phase).to.equal('Expired');
    expect(s.database).to.equal(undefined);
    expect(await databaseExists(ready.database!)).to.equal(false);
    await waitFor('the Secret deleted', async () => ((await c.core.listNamespacedSecret({ namespace: NS, labelSelector: 'pgx.dev/branch=kept' })).items.length === 0 ? true : null));
    // Still there, a while later: a GitOps tool sees what it applied, and re-creates nothing.
    await op.idle();
    expect(await read(c, 'branches', 'kept')).to.not.equal(null);
    await remove(c, 'branches', 'kept');
    await waitForGone(c, 'branches', 'kept');
  });

  it('makes a Branch Unavailable while its pod is re-created, and Ready again when it is back with the database', async function () {
    await apply(c, 'branches', branch('survivor'));
    const ready = statusOf<BranchStatus>(await waitForCondition(c, 'branches', 'survivor', 'Ready', 'DatabaseReady'));
    // The StatefulSet controller re-creates a deleted pod under the same name (the double has none: the test does).
    await c.core.deleteNamespacedPod({ name: 'main-0', namespace: NS });
    const away = await waitForCondition(c, 'branches', 'survivor', 'Ready', 'PodUnavailable');
    expect(statusOf<BranchStatus>(away).phase).to.equal('Unavailable');
    await makePod(c, 'main', 'main-0', runtimes[0]!);
    const back = await waitForCondition(c, 'branches', 'survivor', 'Ready', 'DatabaseReady', 60_000);
    expect(statusOf<BranchStatus>(back)).to.include({ phase: 'Ready', pod: 'main-0', database: ready.database });
    // Checked, not assumed: the database gone while the pod was away makes it Lost, saying so.
    await c.core.deleteNamespacedPod({ name: 'main-0', namespace: NS });
    await waitForCondition(c, 'branches', 'survivor', 'Ready', 'PodUnavailable');
    await apiOf(runtimes[0]!).dropDatabase(ready.database!);
    await makePod(c, 'main', 'main-0', runtimes[0]!);
    const lost = await waitForCondition(c, 'branches', 'survivor', 'Ready', 'DatabaseGone', 60_000);
    expect(statusOf<BranchStatus>(lost).phase).to.equal('Lost');
    await remove(c, 'branches', 'survivor');
    await waitForGone(c, 'branches', 'survivor');
  });

  it('holds the deletion of a Runtime with Branches on its pods, naming them (scale-down: test/kube/platform.kube.ts)', async function () {
    await apply(c, 'branches', branch('holder'));
    await waitForCondition(c, 'branches', 'holder', 'Ready', 'DatabaseReady');
    const apps = c.kc.makeApiClient(AppsV1Api);
    // Held by the finalizer while holder has its database on main-0 (the Runtime's own reconcile adds
    // it, which may come a moment after the Branch is Ready); its StatefulSet stays.
    await waitFor('the Runtime held by its finalizer', async () => (((await read(c, 'runtimes', 'main'))?.metadata?.finalizers ?? []).includes('pgx.dev/runtime-in-use') ? true : null));
    await remove(c, 'runtimes', 'main');
    const blocked = await waitForCondition(c, 'runtimes', 'main', 'Ready', 'DeletionBlocked');
    expect(condition(blocked, 'Ready')?.message).to.contain('holder');
    expect((await apps.readNamespacedStatefulSet({ name: 'main', namespace: NS })).metadata?.deletionTimestamp).to.equal(undefined);
    // The Branch stays Ready meanwhile, and no new Branch is placed on a Runtime being deleted.
    expect(condition(await read(c, 'branches', 'holder'), 'Ready')?.reason).to.equal('DatabaseReady');
    await apply(c, 'branches', branch('latecomer'));
    await waitForCondition(c, 'branches', 'latecomer', 'Ready', 'RuntimeDeleting');
    await remove(c, 'branches', 'latecomer');
    await remove(c, 'branches', 'holder');
    await waitForGone(c, 'branches', 'holder');
    await waitForGone(c, 'runtimes', 'main');
  });
});
