// A Template copied from a source database (a real PostgreSQL 15 holding "production" rows): the URL
// comes from a Secret, the masking script from a ConfigMap; the operator runs the runtime's import job,
// and a Branch of it sees the masked rows. A mask whose rules still match fails the build, reported in
// the Template's condition with the runtime's reason.

import { expect } from 'chai';
import pg from 'pg';
import type { Operator } from '../../src/operator/operator.js';
import { sourceUnavailable, startSourcePostgres, type SourcePostgres } from '../helpers/source-postgres.js';
import type { TestRuntime } from '../helpers/runtime.js';
import { apply, condition, makeRuntime, NS, remove, startCluster, stopCluster, startOperator, startRuntimes, statusOf, waitFor, waitForCondition, waitForGone, type Cluster } from './harness.js';

const SOURCE_PASSWORD = 'source-secret-pw';
const MASK = "-- pgx:forbid customers.email ~ '@(?!example\\.invalid$)'\nUPDATE customers SET email = 'customer' || id || '@example.invalid';";

async function query(url: string, sql: string): Promise<pg.QueryResult> {
  const c = new pg.Client({ connectionString: url });
  await c.connect();
  try {
    return await c.query(sql);
  } finally {
    await c.end();
  }
}

describe('operator: Templates imported from a source database', function () {
  this.timeout(180_000);
  let c: Cluster;
  let source: SourcePostgres;
  let runtimes: TestRuntime[] = [];
  let op: Operator;

  before(async function () {
    const why = sourceUnavailable();
    if (why !== null) {
      console.warn(`    ${why}`);
      this.skip();
    }
    source = await startSourcePostgres(SOURCE_PASSWORD);
    // It accepts connections before it accepts queries ("the database system is starting up").
    await waitFor('the source to answer', () => query(source.url('postgres'), 'SELECT 1').then(() => true, () => null), 30_000);
    await query(source.url('postgres'), 'CREATE DATABASE crm');
    await query(source.url('crm'), "CREATE TABLE customers (id int PRIMARY KEY, email text); INSERT INTO customers VALUES (1, 'ada@real.example'), (2, 'alan@real.example');");
    c = await startCluster();
    runtimes = await startRuntimes(1);
    await makeRuntime(c, 'main', runtimes);
    op = await startOperator(c);
  });

  after(async function () {
    await op?.stop();
    await Promise.all(runtimes.map((r) => r.stop()));
    await stopCluster(c);
    await source?.stop();
  });

  it('imports, masks and seals it; a Branch sees only masked rows', async function () {
    await c.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'crm-source' }, stringData: { url: source.url('crm') } } });
    await c.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'crm-mask' }, data: { 'mask.sql': MASK } } });
    await apply(c, 'templates', {
      apiVersion: 'pgx.dev/v1alpha1',
      kind: 'Template',
      metadata: { name: 'crm' },
      spec: { runtimeRef: { name: 'main' }, source: { database: { urlSecretRef: { name: 'crm-source' }, maskConfigMapRef: { name: 'crm-mask' } } } },
    });
    await waitForCondition(c, 'templates', 'crm', 'Ready', 'Sealed', 120_000);
    await apply(c, 'branches', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: 'crm-1' }, spec: { templateRef: { name: 'crm' } } });
    const ready = await waitForCondition(c, 'branches', 'crm-1', 'Ready', 'DatabaseReady');
    const secret = await c.core.readNamespacedSecret({ name: statusOf<{ secretName: string }>(ready).secretName, namespace: NS });
    const rows = await query(Buffer.from(secret.data!.DATABASE_URL!, 'base64').toString('utf8'), 'SELECT email FROM customers ORDER BY id');
    expect(rows.rows.map((r: { email: string }) => r.email)).to.deep.equal(['customer1@example.invalid', 'customer2@example.invalid']);
    await remove(c, 'branches', 'crm-1');
    await waitForGone(c, 'branches', 'crm-1');
  });

  it('reports a mask that leaves personal data as BuildFailed, with the column', async function () {
    await apply(c, 'templates', {
      apiVersion: 'pgx.dev/v1alpha1',
      kind: 'Template',
      metadata: { name: 'crm-leaky' },
      spec: { runtimeRef: { name: 'main' }, source: { database: { urlSecretRef: { name: 'crm-source' }, mask: "-- pgx:forbid customers.email ~ '@real\\.example$'\nSELECT 1;" } } },
    });
    const failed = await waitForCondition(c, 'templates', 'crm-leaky', 'Ready', 'BuildFailed', 120_000);
    const message = condition(failed, 'Ready')!.message;
    expect(message).to.contain('import failed').and.contain('customers.email').and.contain('23514');
    expect(message).to.not.contain(SOURCE_PASSWORD);
  });
});
