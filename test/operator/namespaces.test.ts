// Namespaces: an operator watching a list of namespaces (--namespace a,b), and a Branch in one namespace
// on a Runtime (and Template) of another, where the Runtime allows it (spec.allowedNamespaces, as
// Gateway API's allowedRoutes): per-PR namespaces share one Runtime, the Secret lands in the Branch's
// namespace, and a namespace the Runtime does not allow gets a condition saying so; a placed Branch of a
// namespace no longer allowed is cut off (credential revoked, Secret deleted, database kept) until it
// is allowed again. The operator runs with the chart's ClusterRole (operator.allNamespaces=true), which
// lets it read namespace labels.

import { CoreV1Api, CustomObjectsApi, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { expect } from 'chai';
import pg from 'pg';
import { MERGE_PATCH, type CustomObject } from '../../src/operator/kube.js';
import type { Operator } from '../../src/operator/operator.js';
import { selectorMatches } from '../../src/operator/namespaces.js';
import { startKubeApi } from '../helpers/kube-api/index.js';
import type { TestRuntime } from '../helpers/runtime.js';
import { apiOf, condition, makeRuntime, NS, PGX, startOperator, startRuntimes, statusOf, stopCluster, waitFor, type Cluster } from './harness.js';
import { helm, yamlObjects } from './kube-tools.js';

describe('operator: a list of namespaces, and Branches on a Runtime of another namespace', function () {
  this.timeout(120_000);
  let c: Cluster | undefined;
  let op: Operator | undefined;
  let runtimes: TestRuntime[] = [];

  after(async () => {
    await op?.stop();
    await Promise.all(runtimes.map((r) => r.stop()));
    await stopCluster(c);
  });

  const read = async (ns: string, plural: string, name: string): Promise<CustomObject | null> =>
    ((await c!.custom.getNamespacedCustomObject({ ...PGX, namespace: ns, plural, name }).catch(() => null)) as CustomObject | null);
  const waitReason = (ns: string, plural: string, name: string, reason: string) =>
    waitFor(`${ns}/${name} Ready ${reason}`, async () => {
      const o = await read(ns, plural, name);
      return condition(o, 'Ready')?.reason === reason ? o : null;
    });
  const branch = (name: string) => ({ apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: 'app', namespace: NS } } });

  before(async () => {
    const api = await startKubeApi();
    const kc = api.kubeConfig();
    // The chart's ClusterRole, bound to its ServiceAccount, as helm install with operator.allNamespaces=true makes them.
    const rendered = yamlObjects(helm('template', 'pgx', 'charts/pgx', '--namespace', NS, '--set', 'operator.allNamespaces=true'));
    const objects = KubernetesObjectApi.makeApiClient(kc);
    for (const o of rendered.filter((o) => ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding'].includes(String(o.kind)))) await objects.create(o as unknown as KubernetesObject);
    const saName = String((rendered.find((o) => o.kind === 'ServiceAccount')!.metadata as { name: string }).name);
    c = { api, kc, operatorKc: api.serviceAccountKubeConfig(NS, saName), operatorUser: `system:serviceaccount:${NS}:${saName}`, core: kc.makeApiClient(CoreV1Api), custom: kc.makeApiClient(CustomObjectsApi) };
    for (const [name, labels] of [['pr-1', { 'pgx.dev/previews': 'true' }], ['pr-2', {}]] as const) await c.core.createNamespace({ body: { metadata: { name, labels } } });

    runtimes = await startRuntimes(1);
    await makeRuntime(c, 'main', runtimes);
    await c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', name: 'main', body: { spec: { allowedNamespaces: { from: 'Selector', selector: { matchLabels: { 'pgx.dev/previews': 'true' } } } } } }, MERGE_PATCH);
    // Three namespaces, listed: one list and watch each (a Role in each would do; here the ClusterRole).
    op = await startOperator(c, { namespace: [NS, 'pr-1', 'pr-2'] });
    await waitFor('leadership', async () => (op!.isLeader ? true : null));
    await c.custom.createNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'templates', body: { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: 'main' }, source: { sql: "CREATE TABLE t (x text); INSERT INTO t VALUES ('shared');" } } } });
    await waitReason(NS, 'templates', 'app', 'Sealed');
  });

  it('matches label selectors as Kubernetes does', () => {
    expect(selectorMatches({ matchLabels: { a: '1' } }, { a: '1', b: '2' })).to.equal(true);
    expect(selectorMatches({ matchLabels: { a: '1' } }, { a: '2' })).to.equal(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'tier', operator: 'In', values: ['preview', 'ci'] }] }, { tier: 'ci' })).to.equal(true);
    expect(selectorMatches({ matchExpressions: [{ key: 'tier', operator: 'NotIn', values: ['prod'] }] }, { tier: 'prod' })).to.equal(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'x', operator: 'Exists' }] }, {})).to.equal(false);
    expect(selectorMatches({ matchExpressions: [{ key: 'x', operator: 'DoesNotExist' }] }, {})).to.equal(true);
    expect(selectorMatches({}, { any: 'thing' })).to.equal(true);
  });

  const setRuntime = (allowedNamespaces: Record<string, unknown>) =>
    c!.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', name: 'main', body: { spec: { allowedNamespaces } } }, MERGE_PATCH);
  const uriOf = async (ns: string, name: string) => Buffer.from((await c!.core.readNamespacedSecret({ name, namespace: ns })).data!.uri!, 'base64').toString('utf8');
  const query = async (uri: string, sql: string): Promise<unknown[]> => {
    const client = new pg.Client({ connectionString: uri });
    await client.connect();
    try {
      return (await client.query(sql)).rows;
    } finally {
      await client.end();
    }
  };

  it('cuts a placed Branch off when its namespace is no longer admitted, keeping its database, and lets it back in', async () => {
    await c!.custom.createNamespacedCustomObject({ ...PGX, namespace: 'pr-1', plural: 'branches', body: branch('cut'), fieldValidation: 'Strict' });
    const ready = statusOf<{ pod: string; database: string }>(await waitReason('pr-1', 'branches', 'cut', 'DatabaseReady'));
    const before = await uriOf('pr-1', 'cut-db');
    await query(before, "INSERT INTO t VALUES ('kept')");
    // A credential the Secret does not hold (one a copy of an earlier, lost Secret would).
    const earlier = (await apiOf(runtimes[0]!).createCredential(ready.database)).url;

    // The namespace's labels no longer match the Runtime's selector (read again within 10 s, at a resync).
    await c!.core.patchNamespace({ name: 'pr-1', body: { metadata: { labels: { 'pgx.dev/previews': null } } } }, MERGE_PATCH);
    try {
      const cut = await waitReason('pr-1', 'branches', 'cut', 'NamespaceNotAllowed');
      expect(condition(cut, 'Ready')?.message).to.contain('do not match spec.allowedNamespaces.selector').and.contain(`Database ${ready.database} is kept`);
      expect(statusOf<{ phase: string; database: string; secretName?: string }>(cut)).to.include({ phase: 'Pending', database: ready.database }).and.not.have.property('secretName');
      // Its credential is revoked: the role the Secret named is gone (28000 from this test runtime's
      // loopback auth; 28P01 where SCRAM hides whether a role exists).
      const refused = await query(before, 'SELECT 1').then(() => 'logged in', (err: { code?: string; message?: string }) => `${err.code} ${err.message}`);
      expect(refused).to.match(/^28(000|P01) /);
      expect(await query(earlier, 'SELECT 1').then(() => 'logged in', (err: { code?: string }) => `${err.code}`)).to.match(/^28(000|P01)$/);
      // No Secret, and none made again at the resyncs (every second here) that follow; the database stays.
      await new Promise((r) => setTimeout(r, 3_000));
      expect(await c!.core.readNamespacedSecret({ name: 'cut-db', namespace: 'pr-1' }).catch(() => null)).to.equal(null);
      expect((await apiOf(runtimes[0]!).getDatabase(ready.database)).name).to.equal(ready.database);

      // Admitted again (the Runtime now takes every namespace): a new credential and Secret, the same data.
      await setRuntime({ from: 'All' });
      const back = await waitReason('pr-1', 'branches', 'cut', 'DatabaseReady');
      expect(statusOf<{ database: string }>(back).database).to.equal(ready.database);
      expect(await query(await uriOf('pr-1', 'cut-db'), 'SELECT x FROM t ORDER BY x')).to.deep.equal([{ x: 'kept' }, { x: 'shared' }]);

      // Deletion still drops it.
      await c!.custom.deleteNamespacedCustomObject({ ...PGX, namespace: 'pr-1', plural: 'branches', name: 'cut' });
      await waitFor('the Branch gone', async () => ((await read('pr-1', 'branches', 'cut')) === null ? true : null));
      expect((await apiOf(runtimes[0]!).listDatabases()).map((d) => d.name)).to.not.include(ready.database);
    } finally {
      // As the next test expects: pr-1 labelled, the Runtime taking labelled namespaces only.
      await c!.core.patchNamespace({ name: 'pr-1', body: { metadata: { labels: { 'pgx.dev/previews': 'true' } } } }, MERGE_PATCH);
      await setRuntime({ from: 'Selector', selector: { matchLabels: { 'pgx.dev/previews': 'true' } } });
    }
  });

  it('places a Branch of namespace pr-1 on the Runtime of default that allows it, with its Secret in pr-1; refuses pr-2', async () => {
    await c!.custom.createNamespacedCustomObject({ ...PGX, namespace: 'pr-1', plural: 'branches', body: branch('db'), fieldValidation: 'Strict' });
    const ready = await waitReason('pr-1', 'branches', 'db', 'DatabaseReady');
    expect(statusOf<{ pod: string }>(ready).pod).to.equal('main-0');
    const secret = await c!.core.readNamespacedSecret({ name: 'db-db', namespace: 'pr-1' });
    const client = new pg.Client({ connectionString: Buffer.from(secret.data!.uri!, 'base64').toString('utf8') });
    await client.connect();
    try {
      expect((await client.query<{ x: string }>('SELECT x FROM t')).rows).to.deep.equal([{ x: 'shared' }]);
    } finally {
      await client.end();
    }

    await c!.custom.createNamespacedCustomObject({ ...PGX, namespace: 'pr-2', plural: 'branches', body: branch('db'), fieldValidation: 'Strict' });
    const refused = await waitReason('pr-2', 'branches', 'db', 'NamespaceNotAllowed');
    expect(condition(refused, 'Ready')?.message, condition(refused, 'Ready')?.message).to.contain('do not match spec.allowedNamespaces.selector');

    // The Template's deletion waits for the Branch of pr-1, which holds a copy of it, and not for pr-2's,
    // which the Runtime never admitted: a namespace it does not admit cannot pin the Template.
    await c!.custom.deleteNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'templates', name: 'app' });
    const pinned = await waitReason(NS, 'templates', 'app', 'DeletionBlocked');
    expect(condition(pinned, 'Ready')?.message).to.contain('pr-1/db').and.not.contain('pr-2/db');

    // The Runtime's deletion waits for the Branch of pr-1, naming it with its namespace.
    await c!.custom.deleteNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', name: 'main' });
    const blocked = await waitReason(NS, 'runtimes', 'main', 'DeletionBlocked');
    expect(condition(blocked, 'Ready')?.message).to.contain('pr-1/db');
    for (const ns of ['pr-1', 'pr-2']) await c!.custom.deleteNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', name: 'db' });
    await waitFor('the Runtime gone', async () => ((await read(NS, 'runtimes', 'main')) === null ? true : null));
    await waitFor('the Template gone', async () => ((await read(NS, 'templates', 'app')) === null ? true : null));
  });
});
