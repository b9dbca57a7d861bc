// --max-active-per-db: sessions per database with a transaction in progress at once. The next
// transaction waits its turn in a queue, other databases are not affected, a wait past
// --active-wait-timeout ends with 53300, and a client that leaves while waiting gives its place back.

import { expect } from 'chai';
import pg from 'pg';
import postgres from 'postgres';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

describe('engine: active sessions per database (--max-active-per-db)', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  const open: pg.Client[] = [];

  async function connect(database = 'postgres'): Promise<pg.Client> {
    const client = new pg.Client(rt.connection(database));
    client.on('error', () => undefined); // a FATAL from the queue timeout also arrives as an event
    await client.connect();
    open.push(client);
    return client;
  }

  before(async function () {
    rt = await startTestRuntime({ poolSize: 0, maxActivePerDb: 2, activeWaitTimeout: 1.5 });
    const admin = await connect();
    await admin.query('CREATE DATABASE other');
    await admin.end();
  });

  afterEach(async function () {
    await Promise.all(open.splice(0).map((c) => c.end().catch(() => undefined)));
  });

  after(async function () {
    await rt?.stop();
  });

  it('a third transaction waits until one of two open ones ends; other databases do not wait', async function () {
    const [a, b, c] = [await connect(), await connect(), await connect()];
    await a.query('BEGIN');
    await b.query('BEGIN');
    let committed = false;
    const waited = c.query('SELECT 42 AS answer').then((r) => ({ rows: r.rows, afterCommit: committed }));
    // Meanwhile a session on another database is served at once.
    const elsewhere = await connect('other');
    expect((await elsewhere.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    await new Promise((r) => setTimeout(r, 300));
    committed = true;
    await a.query('COMMIT');
    const got = await waited;
    expect(got.rows).to.deep.equal([{ answer: 42 }]);
    expect(got.afterCommit, 'the waiting query ran only after a slot was freed').to.equal(true);
    await b.query('COMMIT');
  });

  it('a wait past --active-wait-timeout ends with 53300; the sessions in transactions go on', async function () {
    const [a, b, c] = [await connect(), await connect(), await connect()];
    await a.query('BEGIN');
    await b.query('BEGIN');
    const err = (await c.query('SELECT 1').then(
      () => null,
      (e: unknown) => e,
    )) as { code?: string; message: string } | null;
    expect(err).to.not.equal(null);
    expect(err!.code).to.equal('53300');
    expect(err!.message).to.equal('too many active sessions on database "postgres": waited 1500 ms for one of its 2 active backends');
    expect((await a.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    await a.query('COMMIT');
    await b.query('COMMIT');
  });

  it('a client that leaves while waiting gives its place back', async function () {
    const [a, b] = [await connect(), await connect()];
    await a.query('BEGIN');
    await b.query('BEGIN');
    const leaver = await connect();
    void leaver.query('SELECT 1').catch(() => undefined);
    await new Promise((r) => setTimeout(r, 100));
    await leaver.end().catch(() => undefined);
    await a.query('COMMIT');
    await b.query('COMMIT');
    // Both slots are free again: two transactions at once, no wait.
    const [x, y] = [await connect(), await connect()];
    await x.query('BEGIN');
    await y.query('BEGIN');
    await x.query('COMMIT');
    await y.query('COMMIT');
  });

  it('postgres.js pipelines and node-postgres pools run under the cap', async function () {
    const sql = postgres({ ...rt.connection(), max: 4, onnotice: () => undefined });
    try {
      const results = await Promise.all(Array.from({ length: 40 }, (_, i) => sql`SELECT ${i}::int AS i`));
      expect(results.map((r) => r[0]!.i)).to.deep.equal(Array.from({ length: 40 }, (_, i) => i));
      await sql.begin(async (tx) => {
        await tx`SELECT 1`;
        await tx`SELECT 2`;
      });
    } finally {
      await sql.end();
    }
    const pool = new pg.Pool({ ...rt.connection(), max: 6 });
    try {
      const rows = await Promise.all(Array.from({ length: 30 }, (_, i) => pool.query('SELECT $1::int AS i, pg_sleep(0.01)', [i])));
      expect(rows.map((r) => r.rows[0].i)).to.deep.equal(Array.from({ length: 30 }, (_, i) => i));
    } finally {
      await pool.end();
    }
  });
});
