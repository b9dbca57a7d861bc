// Snapshots for agents, through the engine's control functions, the HTTP API and the CLI, against a
// real runtime: snapshot before a risky change, break the database, restore, see the data back.

import { expect } from 'chai';
import path from 'node:path';
import pg from 'pg';
import { ApiClient, ApiClientError } from '../../src/api/client.js';
import { runCommand } from '../helpers/commands.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-snap-0123456789abcdef';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

describe('runtime: snapshots and restores', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let api: ApiClient;
  /** A session on postgres, from which the control functions are called (as an agent would). */
  let admin: pg.Client;

  async function rows(database: string, sql: string, user = 'postgres'): Promise<unknown[]> {
    return (await queryOnce(rt.connection(database, user), sql)).rows;
  }

  async function sqlError(client: pg.Client, sql: string): Promise<{ code?: string; message: string }> {
    const err = await client.query(sql).then(
      () => null,
      (e: unknown) => e as { code?: string; message: string },
    );
    expect(err, sql).to.not.equal(null);
    return err!;
  }

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 1 });
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_snap', sql: "CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'one'), (2, 'two')" });
    admin = new pg.Client(rt.connection('postgres'));
    await admin.connect();
  });

  after(async function () {
    await admin?.end();
    await rt?.stop();
  });

  it('snapshot, break, restore with the SQL functions: the data is back and the snapshot is a sealed template', async function () {
    const db = 'tdb_tpl_snap__agent1';
    await rows(db, "INSERT INTO items VALUES (3, 'three')");
    const snap = await admin.query(`SELECT pgx_snapshot_database('${db}', 'agent1_before')`);
    expect(snap.rows).to.deep.equal([{ pgx_snapshot_database: 'agent1_before' }]);
    await rows(db, 'DROP TABLE items; CREATE TABLE broken (x int)');
    const restored = await admin.query(`SELECT pgx_restore_database('${db}', 'agent1_before')`);
    expect(restored.rows).to.deep.equal([{ pgx_restore_database: db }]);
    expect(await rows(db, 'SELECT id, label FROM items ORDER BY id')).to.deep.equal([
      { id: 1, label: 'one' },
      { id: 2, label: 'two' },
      { id: 3, label: 'three' },
    ]);
    expect(await rows(db, "SELECT to_regclass('broken') IS NULL AS gone")).to.deep.equal([{ gone: true }]);
    // Restored under the same name, still a minted database with its record (pin, TTL, janitor).
    expect((await api.getDatabase(db)).template).to.equal('tpl_snap');
    const t = (await api.listTemplates()).find((x) => x.name === 'agent1_before');
    expect(t).to.include({ sealed: true, snapshot_of: db });
    // A snapshot can be restored again, and minted from.
    await rows(db, 'DELETE FROM items');
    await admin.query(`SELECT pgx_restore_database('${db}', 'agent1_before')`);
    expect(await rows(db, 'SELECT count(*)::int AS n FROM items')).to.deep.equal([{ n: 3 }]);
    expect(await rows('tdb_agent1_before__copy', 'SELECT count(*)::int AS n FROM items')).to.deep.equal([{ n: 3 }]);
  });

  it('open sessions make a restore fail with 55006 and change nothing; with force they get 57P01 naming the restore', async function () {
    const db = 'tdb_tpl_snap__agent2';
    await rows(db, 'SELECT 1');
    await admin.query(`SELECT pgx_snapshot_database('${db}', 'agent2_clean')`);
    const open = new pg.Client(rt.connection(db));
    await open.connect();
    const ended = new Promise<{ code?: string; message: string }>((resolve) => open.on('error', (e: Error & { code?: string }) => resolve(e)));
    await open.query("INSERT INTO items VALUES (9, 'nine')");
    const refused = await sqlError(admin, `SELECT pgx_restore_database('${db}', 'agent2_clean')`);
    expect(refused.code).to.equal('55006');
    expect(refused.message).to.equal(`database "${db}" is being accessed by other users`);
    expect((await open.query('SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 3 }]);

    await admin.query(`SELECT pgx_restore_database('${db}', 'agent2_clean', true)`);
    const err = await ended;
    expect(err.code).to.equal('57P01');
    expect(err.message).to.equal(`terminating connection: database "${db}" is being restored to snapshot "agent2_clean"`);
    await open.end().catch(() => undefined);
    expect(await rows(db, 'SELECT count(*)::int AS n FROM items')).to.deep.equal([{ n: 2 }]);
  });

  it('a snapshot with sessions open: 55006 unless forced', async function () {
    const db = 'tdb_tpl_snap__agent3';
    const open = new pg.Client(rt.connection(db));
    await open.connect();
    open.on('error', () => undefined);
    expect((await sqlError(admin, `SELECT pgx_snapshot_database('${db}', 'agent3_s')`)).code).to.equal('55006');
    expect((await api.listTemplates()).map((t) => t.name)).to.not.include('agent3_s');
    await admin.query(`SELECT pgx_snapshot_database('${db}', 'agent3_s', true)`);
    await open.end().catch(() => undefined);
    expect(await rows('tdb_agent3_s__x', 'SELECT count(*)::int AS n FROM items')).to.deep.equal([{ n: 2 }]);
  });

  it('refuses what it cannot do, with PostgreSQL-style errors, and changes nothing', async function () {
    const db = 'tdb_tpl_snap__agent4';
    const own = new pg.Client(rt.connection(db));
    await own.connect();
    const self = await sqlError(own, `SELECT pgx_snapshot_database('${db}', 'agent4_self')`);
    expect(self.code).to.equal('55006');
    expect(self.message).to.equal(`cannot snapshot the currently open database "${db}"`);
    await own.end();
    const cases: [string, string, RegExp][] = [
      [`SELECT pgx_snapshot_database('${db}', 'agent1_before')`, '42P04', /database "agent1_before" already exists/],
      [`SELECT pgx_snapshot_database('tdb_tpl_snap__nope', 'x_snap')`, '3D000', /database "tdb_tpl_snap__nope" does not exist/],
      [`SELECT pgx_snapshot_database('${db}', 'Bad-Name')`, '22023', /cannot name a snapshot/],
      [`SELECT pgx_snapshot_database('${db}', 'tdb_x')`, '22023', /cannot name a snapshot/],
      [`SELECT pgx_snapshot_database('tpl_snap', 'x_snap')`, '22023', /is a template/],
      [`SELECT pgx_snapshot_database('agent1_before', 'x_snap')`, '22023', /is a template/],
      [`SELECT pgx_snapshot_database('pgx_control', 'x_snap')`, '3D000', /does not exist/],
      [`SELECT pgx_restore_database('postgres', 'agent1_before')`, '22023', /cannot be restored: PGX and PostgreSQL rely on it/],
      [`SELECT pgx_snapshot_database('template1', 'x_snap')`, '22023', /cannot be snapshotted/],
      [`SELECT pgx_restore_database('${db}', 'no_such_snapshot')`, '3D000', /database "no_such_snapshot" does not exist/],
      [`SELECT pgx_restore_database('${db}', NULL)`, '22023', /takes two names/],
      [`SELECT pgx_restore_database('${db}', 'agent1_before', 'maybe')`, '22023', /force must be true or false/],
    ];
    for (const [sql, code, message] of cases) {
      const err = await sqlError(admin, sql);
      expect(err.code, sql).to.equal(code);
      expect(err.message, sql).to.match(message);
    }
    // The session that saw the errors carries on.
    expect((await admin.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
  });

  it("a role that does not own the database may not snapshot or restore it (42501)", async function () {
    await admin.query('CREATE ROLE mallory LOGIN');
    const db = 'tdb_tpl_snap__agent5';
    await rows(db, 'SELECT 1');
    const mallory = new pg.Client(rt.connection('postgres', 'mallory'));
    await mallory.connect();
    try {
      for (const sql of [`SELECT pgx_snapshot_database('${db}', 'mallory_s')`, `SELECT pgx_restore_database('${db}', 'agent1_before')`]) {
        const err = await sqlError(mallory, sql);
        expect(err.code, sql).to.equal('42501');
      }
    } finally {
      await mallory.end();
    }
  });

  it('a per-database credential still reaches its database after a restore, and only it', async function () {
    const created = await api.createDatabase({ template: 'tpl_snap', pinned: true });
    const cred = await api.createCredential(created.name);
    await api.snapshot(created.name, 'cred_snap');
    await rows(created.name, 'DELETE FROM items');
    await api.restore(created.name, 'cred_snap');
    expect((await queryOnce(cred.url, 'SELECT count(*)::int AS n FROM items')).rows).to.deep.equal([{ n: 2 }]);
    // PUBLIC lost CONNECT on the restored database again (the second wall).
    const acl = await rows('postgres', `SELECT has_database_privilege('mallory', '${created.name}', 'CONNECT') AS can`);
    expect(acl).to.deep.equal([{ can: false }]);
  });

  it('the HTTP API: snapshot and restore, with 409/55006 for open sessions and 404 for a missing snapshot', async function () {
    const created = await api.createDatabase({ template: 'tpl_snap' });
    const t = await api.snapshot(created.name, 'api_snap');
    expect(t).to.include({ name: 'api_snap', sealed: true, snapshot_of: created.name });
    const open = new pg.Client(rt.connection(created.name));
    await open.connect();
    open.on('error', () => undefined);
    await open.query('DELETE FROM items');
    const busy = await api.restore(created.name, 'api_snap').catch((e: unknown) => e as ApiClientError);
    expect(busy).to.be.instanceOf(ApiClientError);
    expect((busy as ApiClientError).status).to.equal(409);
    expect((busy as ApiClientError).sqlstate).to.equal('55006');
    const d = await api.restore(created.name, 'api_snap', true);
    expect(d.name).to.equal(created.name);
    await open.end().catch(() => undefined);
    expect(await rows(created.name, 'SELECT count(*)::int AS n FROM items')).to.deep.equal([{ n: 2 }]);
    const missing = await api.restore(created.name, 'nope').catch((e: unknown) => e as ApiClientError);
    expect((missing as ApiClientError).status).to.equal(404);
  });

  it('the CLI: pgx db snapshot and pgx db restore', async function () {
    const env = { ...process.env, PGX_URL: `http://127.0.0.1:${rt.runtime.api!.port}`, PGX_API_TOKEN: TOKEN };
    const pgx = (args: string[]) => runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...args], { cwd: root, env });
    const db = (await api.createDatabase({ template: 'tpl_snap' })).name;
    const snap = await pgx(['db', 'snapshot', db, 'cli_snap']);
    expect(snap.code, snap.stderr).to.equal(0);
    expect(snap.stdout).to.equal(`snapshot cli_snap of ${db} taken\n`);
    await rows(db, 'TRUNCATE items');
    const restore = await pgx(['db', 'restore', db, 'cli_snap', '--json']);
    expect(restore.code, restore.stderr).to.equal(0);
    expect((JSON.parse(restore.stdout) as { name: string }).name).to.equal(db);
    expect(await rows(db, 'SELECT count(*)::int AS n FROM items')).to.deep.equal([{ n: 2 }]);
    const usage = await pgx(['db', 'list', '--force']);
    expect(usage.code).to.equal(2);
  });
});

describe('runtime: snapshots count against --max-databases-per-role', function () {
  this.timeout(60_000);
  let rt: TestRuntime;

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, maxDatabasesPerRole: 2 });
    const api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_cap', sql: 'CREATE TABLE items (id int)' });
    await queryOnce(rt.connection('postgres'), 'CREATE ROLE capped LOGIN CREATEDB');
  });

  after(async function () {
    await rt?.stop();
  });

  it('a tenant at its cap takes no more snapshots (53400): kept ones would outlive every drop', async function () {
    await queryOnce(rt.connection('tdb_tpl_cap__a', 'capped'), 'SELECT 1');
    const tenant = new pg.Client(rt.connection('postgres', 'capped'));
    await tenant.connect();
    try {
      await tenant.query("SELECT pgx_snapshot_database('tdb_tpl_cap__a', 'capped_one')");
      const err = await tenant.query("SELECT pgx_snapshot_database('tdb_tpl_cap__a', 'capped_two')").then(
        () => null,
        (e: unknown) => e as { code?: string; message: string },
      );
      expect(err?.code).to.equal('53400');
      expect(err?.message).to.equal('cannot snapshot database "tdb_tpl_cap__a": role "capped" already owns its maximum of 2 databases');
      expect(await queryOnce(rt.connection('postgres'), "SELECT count(*)::int AS n FROM pg_database WHERE datname = 'capped_two'").then((r) => r.rows)).to.deep.equal([{ n: 0 }]);
    } finally {
      await tenant.end();
    }
  });
});
