// Who a Template's script runs as: whoever may create a Template is not trusted with the runtime. A
// Template without an owner is built as a role of its own (never postgres), a Template naming a
// privileged owner fails unless its Runtime sets privilegedTemplates, and Branches of an own-role
// Template read and write its tables. And its end: a deleted Template is dropped on its pods. The API
// double, the operator and a real runtime.

import { expect } from 'chai';
import { PatchStrategy, setHeaderOptions } from '@kubernetes/client-node';
import pg from 'pg';
import { queryOnce } from '../helpers/pg-once.js';
import { apply, condition, NS, PGX, read, statusOf, useOperator, waitFor, waitForCondition } from './harness.js';

const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const template = (name: string, spec: Record<string, unknown>) => ({ apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name }, spec: { runtimeRef: { name: 'main' }, ...spec } });

describe('operator: who a Template is built as', function () {
  this.timeout(120_000);
  const setup = useOperator();

  const ownerOf = async (database: string): Promise<string> =>
    (await queryOnce(setup.runtimes[0]!.connection('postgres'), `SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = '${database}'`)).rows[0]!.owner;

  it('builds a Template without an owner as a role of its own, and its Branches read and write its tables', async function () {
    await apply(setup.c, 'templates', template('shop-app', { source: { sql: "CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'one')" } }));
    await waitForCondition(setup.c, 'templates', 'shop-app', 'Ready', 'Sealed');
    expect(await ownerOf('shop_app')).to.equal('shop_app');
    await apply(setup.c, 'branches', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: 'pr-1' }, spec: { templateRef: { name: 'shop-app' } } });
    const s = statusOf<{ secretName: string }>(await waitForCondition(setup.c, 'branches', 'pr-1', 'Ready', 'DatabaseReady'));
    const secret = await setup.c.core.readNamespacedSecret({ name: s.secretName, namespace: NS });
    const client = new pg.Client({ connectionString: Buffer.from(secret.data!.uri!, 'base64').toString('utf8') });
    await client.connect();
    try {
      await client.query("INSERT INTO items VALUES (2, 'two')");
      expect((await client.query('SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 2 }]);
    } finally {
      await client.end();
    }
  });

  it("fails a script that needs a superuser, and an owner with privileges unless the Runtime allows it", async function () {
    await apply(setup.c, 'templates', template('shell', { source: { sql: "CREATE TABLE out (x text); COPY out FROM PROGRAM 'id'" } }));
    const shell = await waitForCondition(setup.c, 'templates', 'shell', 'Ready', 'BuildFailed');
    expect(condition(shell, 'Ready')!.message).to.match(/permission denied to COPY to or from an external program/);

    await apply(setup.c, 'templates', template('as-postgres', { owner: 'postgres', source: { sql: 'CREATE TABLE t (x int)' } }));
    const refused = await waitForCondition(setup.c, 'templates', 'as-postgres', 'Ready', 'BuildFailed');
    expect(condition(refused, 'Ready')!.message).to.match(/role "postgres" has privileges .*set spec.privilegedTemplates: true on Runtime main and change the Template/);
    expect((await databasesLikeAs()).map((t) => t.name)).to.not.include('as_postgres');

    // The Runtime allows it, and the Template is changed: built as postgres.
    await setup.c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', name: 'main', body: { spec: { privilegedTemplates: true } } }, merge);
    await waitFor('the operator to see the Runtime', async () => ((await read(setup.c, 'runtimes', 'main'))?.spec as { privilegedTemplates?: boolean }).privilegedTemplates);
    await setup.c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'templates', name: 'as-postgres', body: { spec: { source: { sql: 'CREATE TABLE t (x int, y int)' } } } }, merge);
    await waitForCondition(setup.c, 'templates', 'as-postgres', 'Ready', 'Sealed');
    expect(await ownerOf('as_postgres')).to.equal('postgres');
  });

  it('drops a deleted Template on its pods once no Branch holds a copy of it', async function () {
    await apply(setup.c, 'templates', template('short-lived', { source: { sql: 'CREATE TABLE t (x int)' } }));
    await waitForCondition(setup.c, 'templates', 'short-lived', 'Ready', 'Sealed');
    await setup.c.custom.deleteNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'templates', name: 'short-lived' });
    await waitFor('the Template gone', async () => ((await read(setup.c, 'templates', 'short-lived')) === null ? true : null));
    const left = await queryOnce(setup.runtimes[0]!.connection('postgres'), "SELECT datname FROM pg_database WHERE datname = 'short_lived'");
    expect(left.rows).to.deep.equal([]);
  });

  async function databasesLikeAs(): Promise<{ name: string }[]> {
    return (await queryOnce(setup.runtimes[0]!.connection('postgres'), "SELECT datname AS name FROM pg_database WHERE datname LIKE 'as_%'")).rows;
  }
});
