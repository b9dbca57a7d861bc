// Drops through the trash, against a real runtime wired into the engine: a drop answers once its
// database is renamed to pgx_trash_<oid>, the name mints again at once, and the DROP DATABASE runs in
// the background; trash a crash left is dropped at the next start (and found by the janitor's
// reconcile while running); where a rename cannot be had (a session outside the engine, credentials)
// the drop runs in place as before; tenants never reach, mint or drop a trash name.

import { expect } from 'chai';
import pg from 'pg';
import type { Counters } from '../../src/runtime/databases/counters.js';
import type { Trash } from '../../src/runtime/databases/trash.js';
import type { DisposableDatabases } from '../../src/runtime/databases/disposable-databases.js';
import { connectClient, createTemplateDatabase, FAST, rejection, startHarness, type Harness } from './databases-harness.js';

const AS_POSTGRES = { user: 'postgres', database: 'postgres' };
/** The dropper's and the trash's connections close this long after their last drop (short for the test). */
const IDLE_MS = 400;

/** The facade's trash and counters (private parts; the test waits on the background through them). */
function trashOf(dbs: DisposableDatabases): Trash {
  return dbs['trash'];
}
function trashDropped(dbs: DisposableDatabases): number {
  return (dbs['counters'] as Counters).get('trash.dropped');
}

async function oidOf(h: Harness, name: string): Promise<string> {
  const { rows } = await h.admin.query(`SELECT oid FROM pg_database WHERE datname = '${name}'`);
  expect(rows, `database ${name}`).to.have.length(1);
  return rows[0]![0]!;
}

async function nameOfOid(h: Harness, oid: string): Promise<string | null> {
  const { rows } = await h.admin.query(`SELECT datname FROM pg_database WHERE oid = ${oid}`);
  return rows[0]?.[0] ?? null;
}

describe('runtime: drops through the trash', function () {
  this.timeout(60_000);
  let h: Harness;
  /** Trash the stopped trash left for the next start. */
  let leftover = '';

  before(async function () {
    h = await startHarness({ settings: { ...FAST, graceSeconds: 600, poolSize: 0, reconcileIntervalMs: 0, dropConnectionIdleMs: IDLE_MS }, wire: true });
    await h.admin.query('CREATE ROLE alice LOGIN CREATEDB');
    await createTemplateDatabase(h, 'tpl_app');
    await h.dbs.operations.seal('tpl_app', 'postgres');
  });

  after(async function () {
    await h?.stop();
  });

  it('answers a drop once the database is renamed away: the name mints again at once, and the old one is dropped in the background', async function () {
    const name = 'tdb_tpl_app__again';
    const c = await connectClient(h, name);
    await c.query("INSERT INTO users (email) VALUES ('old@example.com')");
    await c.end();
    const oid = await oidOf(h, name);
    const dropped = trashDropped(h.dbs);

    expect(await h.dbs.control.call('drop_database', [name], AS_POSTGRES)).to.equal(name);
    // The old database is trash now (or already gone): never under its name again.
    const renamed = await nameOfOid(h, oid);
    expect(renamed === null || renamed === `pgx_trash_${oid}`, `oid ${oid} is named ${renamed}`).to.equal(true);

    const again = await connectClient(h, name);
    const { rows } = await again.query('SELECT count(*)::int AS n FROM users');
    await again.end();
    expect(rows).to.deep.equal([{ n: 0 }]);
    expect(await oidOf(h, name)).to.not.equal(oid);

    await trashOf(h.dbs).emptied();
    expect(await nameOfOid(h, oid)).to.equal(null);
    expect(trashDropped(h.dbs)).to.equal(dropped + 1);
    expect((await h.dbs.operations.status()).databases.trash).to.equal(0);
  });

  it("closes the dropper's and the trash's connections once drops are over, and opens them again for the next", async function () {
    const runtimeBackends = async (): Promise<Set<string>> => {
      const { rows } = await h.admin.query(`SELECT pid FROM pg_stat_activity WHERE backend_type = 'client backend' AND application_name = 'pgx-runtime' AND pid <> pg_backend_pid()`);
      return new Set(rows.map((r) => r[0]!));
    };
    const idle = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, IDLE_MS * 3));
    for (const round of [1, 2]) {
      await idle();
      const before = await runtimeBackends();
      const name = `tdb_tpl_app__idle${round}`;
      await h.dbs.router.route({ user: 'postgres', database: name });
      expect(await h.dbs.control.call('drop_database', [name], AS_POSTGRES)).to.equal(name);
      await trashOf(h.dbs).emptied();
      const opened = [...(await runtimeBackends())].filter((pid) => !before.has(pid));
      expect(opened.length, `round ${round}: backends the drop opened (dropper, trash, the mint's worker)`).to.be.at.least(2);
      await idle();
      const left = await runtimeBackends();
      expect(opened.filter((pid) => left.has(pid)), `round ${round}: still there ${IDLE_MS * 3} ms after the drop`).to.deep.equal([]);
    }
  });

  it('shares one drop between two concurrent drops of a name', async function () {
    const name = 'tdb_tpl_app__twice';
    await h.dbs.router.route({ user: 'postgres', database: name });
    const dropped = trashDropped(h.dbs);
    await Promise.all([h.dbs.control.call('drop_database', [name], AS_POSTGRES), h.dbs.control.call('drop_database', [name], AS_POSTGRES)]);
    await trashOf(h.dbs).emptied();
    expect(trashDropped(h.dbs)).to.equal(dropped + 1);
  });

  it('drops in place, ending it, when a session outside the engine stays on the database', async function () {
    const name = 'tdb_tpl_app__direct';
    await h.dbs.router.route({ user: 'postgres', database: name });
    const oid = await oidOf(h, name);
    const direct = new pg.Client({ host: h.rt.runtime.supervisor.socketDirectory, port: 5432, user: 'postgres', database: name });
    const ended = new Promise<Error>((resolve) => direct.on('error', resolve));
    await direct.connect();
    const dropped = trashDropped(h.dbs);
    await h.dbs.control.call('drop_database', [name], AS_POSTGRES);
    // In place: gone from pg_database when the drop answers, and no trash made.
    expect(await nameOfOid(h, oid)).to.equal(null);
    expect(((await ended) as Error & { code?: string }).code).to.equal('57P01');
    await trashOf(h.dbs).emptied();
    expect(trashDropped(h.dbs)).to.equal(dropped);
  });

  it('drops a database with a credential in place, and its credential role with it', async function () {
    const created = await h.dbs.operations.create('tpl_app', { name: 'tdb_tpl_app__cred', user: 'postgres', credential: {} });
    const oid = await oidOf(h, created.name);
    await h.dbs.control.call('drop_database', [created.name], AS_POSTGRES);
    expect(await nameOfOid(h, oid)).to.equal(null);
    const { rows } = await h.admin.query(`SELECT 1 FROM pg_roles WHERE rolname = '${created.credential!.user}'`);
    expect(rows).to.deep.equal([]);
  });

  it("drops in place when a tenant's own database holds the trash name, and leaves that database alone", async function () {
    const name = 'tdb_tpl_app__squatted';
    await h.dbs.router.route({ user: 'postgres', database: name });
    const oid = await oidOf(h, name);
    const asAlice = await h.rt.runtime.supervisor.connect('postgres', 'alice');
    try {
      await asAlice.query(`CREATE DATABASE pgx_trash_${oid}`);
    } finally {
      await asAlice.close();
    }
    try {
      await h.dbs.control.call('drop_database', [name], AS_POSTGRES);
      const { rows } = await h.admin.query(`SELECT 1 FROM pg_database WHERE datname = '${name}'`);
      expect(rows).to.deep.equal([]);
      await h.dbs.operations.runJanitor();
      await trashOf(h.dbs).emptied();
      const { rows: squat } = await h.admin.query(`SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'pgx_trash_${oid}'`);
      expect(squat).to.deep.equal([['alice']]);
    } finally {
      await h.admin.query(`DROP DATABASE IF EXISTS pgx_trash_${oid}`);
    }
  });

  it('never lets a tenant reach, mint or drop a trash name', async function () {
    // A tenant's own (the trash takes only databases a superuser owns), open to it as PostgreSQL sees it.
    await h.admin.query('CREATE DATABASE pgx_trash_424242 OWNER alice');
    try {
      const client = new pg.Client(h.rt.connection('pgx_trash_424242', 'alice'));
      client.on('error', () => undefined);
      const err = await rejection(client.connect());
      expect(err.code).to.equal('3D000');
      expect((await rejection(h.dbs.router.route({ user: 'postgres', database: 'pgx_trash_424242' }))).sqlstate).to.equal('3D000');
      const mint = await rejection(h.dbs.operations.create('tpl_app', { name: 'pgx_trash_424243', user: 'postgres' }));
      expect(mint.sqlstate).to.equal('22023');
      const drop = await rejection(h.dbs.control.call('drop_database', ['pgx_trash_424242'], { user: 'alice', database: 'postgres' }));
      expect(drop.sqlstate).to.equal('3D000');
    } finally {
      await h.admin.query('DROP DATABASE IF EXISTS pgx_trash_424242');
    }
  });

  it("drops trash the janitor's reconcile finds while running (a drop that failed after its rename)", async function () {
    await h.admin.query('CREATE DATABASE pgx_trash_515151');
    const dropped = trashDropped(h.dbs);
    await h.dbs.operations.runJanitor();
    await trashOf(h.dbs).emptied();
    const { rows } = await h.admin.query("SELECT 1 FROM pg_database WHERE datname = 'pgx_trash_515151'");
    expect(rows).to.deep.equal([]);
    expect(trashDropped(h.dbs)).to.be.at.least(dropped + 1);
  });

  it('answers a drop only once the trash is under its bound again', async function () {
    const name = 'tdb_tpl_app__bounded';
    await h.dbs.router.route({ user: 'postgres', database: name });
    const oid = await oidOf(h, name);
    const trash = trashOf(h.dbs) as unknown as { bound: number };
    const bound = trash.bound;
    trash.bound = 1; // this drop's own trash fills it
    try {
      await h.dbs.control.call('drop_database', [name], AS_POSTGRES);
      // Answered after its DROP DATABASE ran, not after the rename.
      expect(await nameOfOid(h, oid)).to.equal(null);
    } finally {
      trash.bound = bound;
    }
  });

  it('holds trash closed to everyone, owned by the runtime, and counted in the status until its DROP DATABASE runs', async function () {
    const name = 'tdb_tpl_app__owned';
    await h.dbs.router.route({ user: 'alice', database: name });
    const oid = await oidOf(h, name);
    expect((await h.admin.query(`SELECT pg_get_userbyid(datdba) FROM pg_database WHERE oid = ${oid}`)).rows).to.deep.equal([['alice']]);
    // The trash stops as at a shutdown: what it holds waits for the next start (the test after this one).
    await trashOf(h.dbs).stop();
    await h.dbs.control.call('drop_database', [name], AS_POSTGRES);
    const { rows } = await h.admin.query(`SELECT datname, pg_get_userbyid(datdba), datallowconn FROM pg_database WHERE oid = ${oid}`);
    expect(rows).to.deep.equal([[`pgx_trash_${oid}`, 'postgres', 'f']]);
    expect((await h.dbs.operations.status()).databases.trash).to.equal(1);
    expect(h.dbs.operations.database(name)).to.equal(null);
    leftover = `pgx_trash_${oid}`;
  });

  it('drops trash a crash left behind when the runtime starts', async function () {
    await h.stopDatabases();
    // What a runtime that died between a rename and its DROP DATABASE leaves: a pgx_trash_ database.
    await h.admin.query('CREATE DATABASE pgx_trash_616161');
    // A long grace: the janitor drops nothing meanwhile, so the backlog read below is the start-up's.
    const next = await startHarness({ rt: h.rt, settings: { ...FAST, graceSeconds: 600, poolSize: 0 } });
    try {
      await trashOf(next.dbs).emptied();
      const { rows } = await next.admin.query(`SELECT datname FROM pg_database WHERE datname IN ('pgx_trash_616161', '${leftover}')`);
      expect(leftover).to.match(/^pgx_trash_[0-9]+$/);
      expect(rows).to.deep.equal([]);
      expect((await next.dbs.operations.status()).databases.trash, String([...trashOf(next.dbs)['pending']])).to.equal(0);
    } finally {
      await next.admin.close();
      await next.stopDatabases();
    }
  });
});
