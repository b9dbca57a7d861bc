// Minting on connect against a real runtime: the seed quickstart, cold and warm mints through route()
// and through the engine, concurrent connects, who may mint, caps and the mint queue.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { PgxError } from '../../src/errors.js';
import { Permissions } from '../../src/runtime/databases/permissions.js';
import { BACKGROUND_NICE } from '../../src/runtime/databases/background-work.js';
import { procInfo, waitFor } from '../helpers/commands.js';
import { REFILL_BACKENDS_SQL, connectClient, createTemplateDatabase, databaseExists, rejection, startHarness, type Harness } from './databases-harness.js';

const AS_POSTGRES = { user: 'postgres', database: 'postgres' };
/** Janitor and queue timeout stay out of these tests: a busy machine may take longer than either to mint 100. */
const KEEP = { graceSeconds: 3600, mintTimeoutSeconds: 600 };

async function owner(h: Harness, name: string): Promise<string | undefined> {
  const { rows } = await h.admin.query(`SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = '${name}'`);
  return rows[0]?.[0] ?? undefined;
}

async function countLike(h: Harness, prefix: string): Promise<number> {
  const { rows } = await h.admin.query(`SELECT count(*) FROM pg_database WHERE starts_with(datname, '${prefix}')`);
  return Number(rows[0]![0]);
}

describe('runtime: mint on connect', function () {
  this.timeout(300_000);

  describe('cold (no warm pool)', function () {
    let h: Harness;

    before(async function () {
      h = await startHarness({ settings: { ...KEEP, poolSize: 0 }, wire: true });
      await h.admin.query('CREATE ROLE alice LOGIN CREATEDB; CREATE ROLE bob LOGIN');
      await createTemplateDatabase(h, 'tpl_app');
    });

    after(async function () {
      await h?.stop();
    });

    it('refuses names under the prefix before the template is sealed (3D000, hint to seal)', async function () {
      const err = await rejection(h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__early' }));
      expect(err.sqlstate).to.equal('3D000');
      expect(err.message).to.equal('database "tdb_tpl_app__early" does not exist');
      expect(err.hint).to.match(/pgx_seal_template\('tpl_app'\)/);
      expect(await databaseExists(h, 'tdb_tpl_app__early')).to.equal(false);
    });

    it('runs the seed quickstart: seal, agent42 inserts, agent43 counts 0, status shows both', async function () {
      await h.dbs.control.call('seal_template', ['tpl_app'], AS_POSTGRES);
      const a42 = await connectClient(h, 'tdb_tpl_app__agent42');
      await a42.query("INSERT INTO users (email) VALUES ('a@example.com')");
      const a43 = await connectClient(h, 'tdb_tpl_app__agent43');
      const { rows } = await a43.query('SELECT count(*)::int AS n FROM users');
      expect(rows[0].n).to.equal(0);
      const back = await a42.query('SELECT email FROM users');
      expect(back.rows).to.deep.equal([{ email: 'a@example.com' }]);
      const status = JSON.parse(await h.dbs.control.call('runtime_status', [], AS_POSTGRES));
      expect(status.databases.ephemeral).to.equal(2);
      expect(status.sessions.total).to.equal(2);
      expect(status.mints.cold).to.equal(2);
      expect(status.mints.warm).to.equal(0);
      expect(status.mints.latency_ms.mean).to.be.greaterThan(0);
      await a42.end();
      await a43.end();
    });

    it('mints through route(), owned by the connecting role, reachable directly afterwards', async function () {
      await h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__alice1' });
      expect(await owner(h, 'tdb_tpl_app__alice1')).to.equal('alice');
      const record = h.dbs.operations.database('tdb_tpl_app__alice1');
      expect(record).to.include({ kind: 'ephemeral', template: 'tpl_app', owner: 'alice', pinned: false, expiresAt: null });
      const c = await connectClient(h, 'tdb_tpl_app__alice1', 'alice');
      expect((await c.query('SELECT current_database() AS db')).rows[0].db).to.equal('tdb_tpl_app__alice1');
      await c.end();
    });

    it('passes other names through untouched and hides PGX\'s own databases', async function () {
      await h.dbs.router.route({ user: 'postgres', database: 'postgres' });
      await h.dbs.router.route({ user: 'postgres', database: 'no_such_db' });
      for (const hidden of ['pgx_control', 'pgx_spare_1']) {
        const err = await rejection(h.dbs.router.route({ user: 'postgres', database: hidden }));
        expect(err.sqlstate).to.equal('3D000');
        expect(err.message).to.equal(`database "${hidden}" does not exist`);
      }
      const viaEngine = await rejection(connectClient(h, 'pgx_control'));
      expect(viaEngine.code).to.equal('3D000');
    });

    it('refuses bad names through the engine with 3D000 and a hint', async function () {
      for (const name of ['tdb_tpl_app', 'tdb_Tpl_app__x', 'tdb_tpl_app__x"y']) {
        const err = (await rejection(connectClient(h, name))) as Error & { code?: string; hint?: string };
        expect(err.code, name).to.equal('3D000');
        expect(err.hint, name).to.match(/tdb_<template>__<token>/);
      }
      expect(await countLike(h, 'tdb_tpl_app__x')).to.equal(0);
    });

    it('reads a name over 63 bytes as PostgreSQL does: its first 63 bytes, minted under that name', async function () {
      const long = `tdb_tpl_app__${'y'.repeat(60)}`;
      const client = await connectClient(h, long);
      try {
        expect((await client.query('SELECT current_database() AS d')).rows).to.deep.equal([{ d: long.slice(0, 63) }]);
      } finally {
        await client.end();
      }
      expect(h.dbs.operations.database(long.slice(0, 63))).to.not.equal(null);
    });

    it('refuses unknown templates with 3D000', async function () {
      const err = await rejection(h.dbs.router.route({ user: 'postgres', database: 'tdb_nosuch__x' }));
      expect(err.sqlstate).to.equal('3D000');
      expect(err.hint).to.match(/no sealed template "nosuch"/);
    });

    it('refuses a role without CREATEDB with 3D000 as PostgreSQL words it, creating nothing', async function () {
      const err = await rejection(h.dbs.router.route({ user: 'bob', database: 'tdb_tpl_app__bob1' }));
      expect(err).to.be.instanceOf(PgxError);
      expect(err.sqlstate).to.equal('3D000');
      expect(err.message).to.equal('database "tdb_tpl_app__bob1" does not exist');
      expect(err.hint).to.match(/Role "bob" may not create databases on connect.*CREATEDB/);
      expect(await databaseExists(h, 'tdb_tpl_app__bob1')).to.equal(false);
      // A database that exists is alice's: bob is refused it as PostgreSQL refuses CONNECT (42501).
      expect((await rejection(h.dbs.router.route({ user: 'bob', database: 'tdb_tpl_app__alice1' }))).sqlstate).to.equal('42501');
    });

    it('lets a role another role is refused for share the same name', async function () {
      const results = await Promise.allSettled([
        h.dbs.router.route({ user: 'bob', database: 'tdb_tpl_app__shared' }),
        h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__shared' }),
      ]);
      expect(results[1]!.status).to.equal('fulfilled');
      expect(await owner(h, 'tdb_tpl_app__shared')).to.equal('alice');
    });

    it('asks PostgreSQL who may mint: any role, CREATEDB roles, or a list', async function () {
      const client = async () => h.admin;
      expect(await new Permissions(client, { kind: 'createdb' }).mayMint('alice')).to.equal(true);
      expect(await new Permissions(client, { kind: 'createdb' }).mayMint('bob')).to.equal(false);
      expect(await new Permissions(client, { kind: 'createdb' }).mayMint('postgres')).to.equal(true);
      expect(await new Permissions(client, { kind: 'any' }).mayMint('bob')).to.equal(true);
      expect(await new Permissions(client, { kind: 'list', roles: ['bob'] }).mayMint('bob')).to.equal(true);
      expect(await new Permissions(client, { kind: 'list', roles: ['bob'] }).mayMint('alice')).to.equal(false);
      expect(await new Permissions(client, { kind: 'list', roles: [] }).mayMint('postgres')).to.equal(true);
      expect(await new Permissions(client, { kind: 'createdb' }).mayMint('no_such_role')).to.equal(false);
      // Which claims may skip the lookup: the settings decide, or PostgreSQL's rename rule does.
      expect(new Permissions(client, { kind: 'any' }).claimCheck('bob')).to.equal('none');
      expect(new Permissions(client, { kind: 'list', roles: ['bob'] }).claimCheck('bob')).to.equal('none');
      expect(new Permissions(client, { kind: 'list', roles: ['bob'] }).claimCheck('alice')).to.equal(null);
      expect(new Permissions(client, { kind: 'createdb' }).claimCheck('bob')).to.equal('rename');
    });

    it('serves 100 concurrent routes to 100 new names: each exists once, counters agree', async function () {
      const before = await h.dbs.operations.status();
      const names = Array.from({ length: 100 }, (_, i) => `tdb_tpl_app__many${i}`);
      const results = await Promise.allSettled(names.map((database) => h.dbs.router.route({ user: 'postgres', database })));
      expect(results.filter((r) => r.status === 'rejected')).to.deep.equal([]);
      expect(await countLike(h, 'tdb_tpl_app__many')).to.equal(100);
      const after = await h.dbs.operations.status();
      expect(after.mints.cold + after.mints.warm - before.mints.cold - before.mints.warm).to.equal(100);
      expect(after.mints.failures).to.equal(before.mints.failures);
      expect(after.databases.ephemeral - before.databases.ephemeral).to.equal(100);
    });

    it('serves 20 concurrent routes to one new name with one mint', async function () {
      const before = await h.dbs.operations.status();
      const results = await Promise.allSettled(Array.from({ length: 20 }, () => h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__one' })));
      expect(results.filter((r) => r.status === 'rejected')).to.deep.equal([]);
      expect(await countLike(h, 'tdb_tpl_app__one')).to.equal(1);
      const after = await h.dbs.operations.status();
      expect(after.mints.cold + after.mints.warm - before.mints.cold - before.mints.warm).to.equal(1);
      expect(after.databases.ephemeral - before.databases.ephemeral).to.equal(1);
    });

    it('serves 20 concurrent engine connects to one new name', async function () {
      const clients = await Promise.all(Array.from({ length: 20 }, () => connectClient(h, 'tdb_tpl_app__burst')));
      const dbs = await Promise.all(clients.map(async (c) => (await c.query('SELECT current_database() AS db')).rows[0].db));
      expect(new Set(dbs)).to.deep.equal(new Set(['tdb_tpl_app__burst']));
      await Promise.all(clients.map((c) => c.end()));
      expect(await countLike(h, 'tdb_tpl_app__burst')).to.equal(1);
    });

    it('keeps serving names minted before an unseal, and refuses new ones until resealed', async function () {
      await h.dbs.operations.unseal('tpl_app', 'postgres');
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__agent42' });
      const err = await rejection(h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__after_unseal' }));
      expect(err.sqlstate).to.equal('3D000');
      expect(err.hint).to.match(/is unsealed/);
      await h.dbs.operations.seal('tpl_app', 'postgres');
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__after_unseal' });
    });
  });

  describe('warm (pool of 2)', function () {
    let h: Harness;

    before(async function () {
      // A fixed pool of 2 (--pool-max 2): the growth under bursts is pool-burst.test.ts's.
      h = await startHarness({ settings: { ...KEEP, poolSize: 2, poolMax: 2 }, wire: true });
      await h.admin.query('CREATE ROLE alice LOGIN CREATEDB; CREATE ROLE bob LOGIN');
      await createTemplateDatabase(h, 'tpl_app');
      await h.dbs.operations.seal('tpl_app', 'postgres');
      await waitFor('2 spares', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
    });

    after(async function () {
      await h?.stop();
    });

    it('claims a spare: renamed, owned by the client role, open to connections; the pool refills', async function () {
      const before = await h.dbs.operations.status();
      await h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__warm1' });
      const after = await h.dbs.operations.status();
      expect(after.mints.warm - before.mints.warm).to.equal(1);
      expect(after.mints.cold).to.equal(before.mints.cold);
      expect(after.pool.tpl_app!.handouts).to.equal(1);
      expect(await owner(h, 'tdb_tpl_app__warm1')).to.equal('alice');
      const { rows } = await h.admin.query(`SELECT datallowconn, datistemplate FROM pg_database WHERE datname = 'tdb_tpl_app__warm1'`);
      expect(rows[0]).to.deep.equal(['t', 'f']);
      const c = await connectClient(h, 'tdb_tpl_app__warm1', 'alice');
      expect((await c.query("SELECT to_regclass('users') IS NOT NULL AS has")).rows[0].has).to.equal(true);
      await c.end();
      await waitFor('the pool to refill', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
      expect((await h.dbs.operations.status()).pool.tpl_app!.refills).to.be.at.least(3);
    });

    it("gives a warm mint's backend the login baseline its claim read: no query of its own, reused while nothing changed, replaced when a default did", async function () {
      // A name regrole must read quoted: the claim reads this role's rows, not a lower-case twin's.
      await h.admin.query(`CREATE ROLE "Carol" LOGIN CREATEDB; CREATE ROLE carol LOGIN; ALTER ROLE "Carol" SET statement_timeout = '9s'; ALTER ROLE carol SET statement_timeout = '8s'`);
      await waitFor('the pool to be full', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
      const name = 'tdb_tpl_app__baseline1';
      const show = "SELECT current_setting('work_mem') AS work_mem, current_setting('statement_timeout') AS timeout, pg_backend_pid() AS pid";
      const session = async (): Promise<{ work_mem: string; timeout: string; pid: number }> => {
        const c = await connectClient(h, name, 'Carol');
        const row = (await c.query(show)).rows[0] as { work_mem: string; timeout: string; pid: number };
        const idle = h.rt.runtime.engine.stats().backends.idle;
        await c.end();
        await waitFor('its backend back in the pool', () => h.rt.runtime.engine.stats().backends.idle > idle);
        return row;
      };
      const first = await connectClient(h, name, 'Carol');
      expect((await h.dbs.operations.status()).mints.warm, 'minted warm').to.be.greaterThan(0);
      // Before the client's first query its backend has run none: the baseline came with the claim.
      const pid = (first as unknown as { processID: number }).processID;
      const { rows } = await h.admin.query(`SELECT query FROM pg_stat_activity WHERE pid = ${pid}`);
      expect(rows).to.deep.equal([['']]);
      const idle = h.rt.runtime.engine.stats().backends.idle;
      await first.end();
      await waitFor('its backend idle', () => h.rt.runtime.engine.stats().backends.idle > idle);
      // The claim's rows match what the backend's own check reads, byte for byte: it is reused.
      expect(await session()).to.deep.equal({ work_mem: '4MB', timeout: '9s', pid });
      await h.admin.query(`ALTER ROLE "Carol" SET work_mem = '7MB'`);
      const changed = await session();
      expect(changed).to.include({ work_mem: '7MB', timeout: '9s' });
      expect(changed.pid).to.not.equal(pid);
    });

    it("reuses a role's baseline in its next claims: a default changed in between replaces the new database's backend at its first reuse, never passes it", async function () {
      await h.admin.query(`CREATE ROLE dave LOGIN CREATEDB`);
      const show = "SELECT current_setting('work_mem') AS work_mem, pg_backend_pid() AS pid";
      const session = async (database: string): Promise<{ work_mem: string; pid: number }> => {
        const c = await connectClient(h, database, 'dave');
        const row = (await c.query(show)).rows[0] as { work_mem: string; pid: number };
        const idle = h.rt.runtime.engine.stats().backends.idle;
        await c.end();
        await waitFor('its backend back in the pool', () => h.rt.runtime.engine.stats().backends.idle > idle);
        return row;
      };
      await waitFor('the pool to be full', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
      const first = await session('tdb_tpl_app__dave1');
      expect(await session('tdb_tpl_app__dave1'), 'reused: its own claim read its rows').to.deep.equal(first);
      // The next claim reuses the rows read before this change: its backend logs in with 6MB, and
      // the rows it was given are older than its login, so its first reuse check fails.
      await h.admin.query(`ALTER ROLE dave SET work_mem = '6MB'`);
      await waitFor('the pool to be full', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
      const second = await session('tdb_tpl_app__dave2');
      expect(second.work_mem).to.equal('6MB');
      const again = await session('tdb_tpl_app__dave2');
      expect(again.work_mem).to.equal('6MB');
      expect(again.pid, 'replaced at its first reuse').to.not.equal(second.pid);
      expect(await session('tdb_tpl_app__dave2'), 'the replacement read its own rows: reused').to.deep.equal(again);
    });

    it('refuses a role without CREATEDB while spares are ready: 3D000, the spare untouched and still ready', async function () {
      await waitFor('the pool to be full', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
      const spares = async () => (await h.admin.query(`SELECT datname, pg_get_userbyid(datdba), datallowconn FROM pg_database WHERE starts_with(datname, 'pgx_spare_') ORDER BY 1`)).rows;
      const before = await spares();
      const err = await rejection(h.dbs.router.route({ user: 'bob', database: 'tdb_tpl_app__bob_warm' }));
      expect(err.sqlstate).to.equal('3D000');
      expect(err.hint).to.match(/Role "bob" may not create databases on connect/);
      expect(await databaseExists(h, 'tdb_tpl_app__bob_warm')).to.equal(false);
      expect(await spares()).to.deep.equal(before);
      const status = await h.dbs.operations.status();
      expect(status.pool.tpl_app!.ready).to.equal(2);
      expect(status.mints.failures).to.equal(0);
      // Refused for bob, the same name is there for a role that may mint.
      await h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__bob_warm' });
      expect(await owner(h, 'tdb_tpl_app__bob_warm')).to.equal('alice');
      await waitFor('the pool to refill', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
    });

    it('keeps spares out of sight: not routable, closed to connections, not counted as databases', async function () {
      const { rows } = await h.admin.query(`SELECT datname, datallowconn FROM pg_database WHERE starts_with(datname, 'pgx_spare_')`);
      expect(rows.length).to.be.at.least(2);
      for (const [name, allow] of rows) {
        expect(allow).to.equal('f');
        const err = await rejection(h.dbs.router.route({ user: 'postgres', database: name! }));
        expect(err.sqlstate).to.equal('3D000');
      }
      const status = await h.dbs.operations.status();
      const { rows: all } = await h.admin.query(`SELECT count(*) FROM pg_database WHERE datname <> 'pgx_control' AND NOT starts_with(datname, 'pgx_spare_') AND NOT starts_with(datname, 'pgx_trash_')`);
      expect(status.databases.total).to.equal(Number(all[0]![0]));
    });

    it('warms each spare up: its relation cache file is written before a client claims it', async function () {
      const { rows } = await h.admin.query(`SELECT oid FROM pg_database WHERE starts_with(datname, 'pgx_spare_') AND datallowconn = false`);
      expect(rows.length).to.be.at.least(2);
      for (const [oid] of rows) {
        expect(fs.existsSync(path.join(h.rt.dataDir, 'base', oid!, 'pg_internal.init')), `spare ${oid}`).to.equal(true);
      }
    });

    it('makes spares on a backend at the lowest CPU priority (nice 19), so clients come first', async function () {
      // A refill connection's last statement after a spare reads whether any database has a login
      // event trigger (login-triggers.ts); there are two while the pool is more than one spare short.
      let pids: number[] = [];
      await waitFor('the refill connections idle after a spare', async () => {
        const { rows } = await h.admin.query(REFILL_BACKENDS_SQL);
        pids = rows.map((r) => Number(r[0]));
        return pids.length > 0;
      });
      for (const pid of pids) expect((await procInfo(pid))?.nice).to.equal(BACKGROUND_NICE);
      // The engine's and the admin session's backends keep the default.
      const { rows: self } = await h.admin.query('SELECT pg_backend_pid()');
      expect((await procInfo(Number(self[0]![0])))?.nice).to.equal(0);
    });

    it('serves 100 concurrent routes to 100 names, warm first and then cold', async function () {
      const before = await h.dbs.operations.status();
      const names = Array.from({ length: 100 }, (_, i) => `tdb_tpl_app__hundred${i}`);
      const results = await Promise.allSettled(names.map((database) => h.dbs.router.route({ user: 'postgres', database })));
      expect(results.filter((r) => r.status === 'rejected')).to.deep.equal([]);
      expect(await countLike(h, 'tdb_tpl_app__hundred')).to.equal(100);
      const after = await h.dbs.operations.status();
      const warm = after.mints.warm - before.mints.warm;
      const cold = after.mints.cold - before.mints.cold;
      expect(warm + cold).to.equal(100);
      expect(warm).to.be.at.least(1);
      expect(after.pool.tpl_app!.handouts - before.pool.tpl_app!.handouts).to.equal(warm);
    });

    it('turns spares stale on unseal and rebuilds them from the new content on reseal', async function () {
      const { rows: old } = await h.admin.query(`SELECT datname FROM pg_database WHERE starts_with(datname, 'pgx_spare_')`);
      await h.dbs.operations.unseal('tpl_app', 'postgres');
      const c = await connectClient(h, 'tpl_app');
      await c.query('CREATE TABLE added_after_unseal (id int)');
      await c.end();
      await h.dbs.operations.seal('tpl_app', 'postgres');
      await waitFor('old spares dropped and 2 fresh ones ready', async () => {
        const { rows } = await h.admin.query(`SELECT datname FROM pg_database WHERE starts_with(datname, 'pgx_spare_')`);
        const names = rows.map((r) => r[0]);
        return old.every((o) => !names.includes(o[0]!)) && (await h.dbs.operations.status()).pool.tpl_app?.ready === 2;
      });
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__fresh' });
      const f = await connectClient(h, 'tdb_tpl_app__fresh');
      expect((await f.query("SELECT to_regclass('added_after_unseal') IS NOT NULL AS has")).rows[0].has).to.equal(true);
      await f.end();
    });

    /**
     * A role whose first claim has read its login baseline: its next claims reuse it, which sends the
     * client's login beside the claim. Returns with the pool full.
     */
    /** Sessions PostgreSQL counted on `database` (they are counted once they end). */
    async function sessionsOn(database: string): Promise<number> {
      const { rows } = await h.admin.query(`SELECT pg_stat_clear_snapshot(); SELECT sessions FROM pg_stat_database WHERE datname = '${database}'`);
      return Number(rows[0]?.[0]);
    }

    async function newMinter(role: string): Promise<void> {
      await h.admin.query(`CREATE ROLE ${role} LOGIN CREATEDB`);
      await waitFor('the pool to be full', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
      await mintAndRefill(`tdb_tpl_app__${role}1`, role);
    }

    /** Mints `database` as `role`, then waits for the refill behind it, to its last statement. */
    async function mintAndRefill(database: string, role: string): Promise<void> {
      await (await connectClient(h, database, role)).end();
      await waitFor('the pool to be full', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2);
      await waitFor('the refill done', async () => (await h.admin.query(REFILL_BACKENDS_SQL)).rows.length > 0);
    }

    it("sends the client's login beside a warm claim: one that looked the name up before the claim committed (3D000) logs in again", async function () {
      await newMinter('erin');
      // The claim's ALTER OWNER waits on this lock, so her login looks the name up before it exists.
      const blocker = await h.rt.runtime.supervisor.connect('postgres', 'postgres');
      await blocker.query('BEGIN; LOCK TABLE pg_catalog.pg_shdepend IN SHARE MODE');
      const connecting = connectClient(h, 'tdb_tpl_app__erin2', 'erin');
      await waitFor('the claim waiting on the lock', async () => {
        const { rows } = await h.admin.query("SELECT 1 FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND query LIKE '%RENAME TO \"tdb_tpl_app__erin2\"%'");
        return rows.length > 0;
      });
      await new Promise((resolve) => setTimeout(resolve, 200));
      await blocker.query('COMMIT');
      await blocker.close();
      const c = await connecting;
      expect((await c.query('SELECT current_database() AS d, current_user AS u')).rows).to.deep.equal([{ d: 'tdb_tpl_app__erin2', u: 'erin' }]);
      await c.end();
    });

    it('closes a login sent beside a claim that failed, unserved: a name made outside PGX stays refused (42P04)', async function () {
      await newMinter('frank');
      // Made outside PGX, open to every role: frank's login beside the claim gets in; the claim fails.
      await h.admin.query('CREATE DATABASE tdb_tpl_app__squat');
      const err = await rejection(connectClient(h, 'tdb_tpl_app__squat', 'frank'));
      expect(err.code).to.equal('42P04');
      expect(err.message).to.equal('database "tdb_tpl_app__squat" exists but was not minted by PGX');
      await waitFor('no backend left on it', async () => (await h.admin.query("SELECT 1 FROM pg_stat_activity WHERE datname = 'tdb_tpl_app__squat'")).rows.length === 0);
      await waitFor("frank's login counted there", async () => (await sessionsOn('tdb_tpl_app__squat')) === 1);
    });

    it('keeps the login behind the claim while any database has a login event trigger (a copy of it under the prefix could run it)', async function () {
      await h.admin.query('CREATE DATABASE trig_db');
      const trig = await h.rt.runtime.supervisor.connect('trig_db', 'postgres');
      await trig.query('CREATE FUNCTION on_login() RETURNS event_trigger LANGUAGE plpgsql AS $f$ BEGIN END $f$; CREATE EVENT TRIGGER on_login ON login EXECUTE FUNCTION on_login()');
      await trig.close();
      // The refill after gina's first mint reads that a database has one.
      await newMinter('gina');
      await h.admin.query('CREATE DATABASE tdb_tpl_app__squat2');
      expect((await rejection(connectClient(h, 'tdb_tpl_app__squat2', 'gina'))).code).to.equal('42P04');
      await new Promise((resolve) => setTimeout(resolve, 1000));
      expect(await sessionsOn('tdb_tpl_app__squat2'), 'a login reached it').to.equal(0);
      // Gone (its flag clears at the next login there), the next refill reads none: the login goes beside again.
      const again = await h.rt.runtime.supervisor.connect('trig_db', 'postgres');
      await again.query('DROP EVENT TRIGGER on_login');
      await again.close();
      await (await h.rt.runtime.supervisor.connect('trig_db', 'postgres')).close();
      await mintAndRefill('tdb_tpl_app__gina2', 'gina');
      await h.admin.query('CREATE DATABASE tdb_tpl_app__squat3');
      expect((await rejection(connectClient(h, 'tdb_tpl_app__squat3', 'gina'))).code).to.equal('42P04');
      await waitFor("gina's login counted there", async () => (await sessionsOn('tdb_tpl_app__squat3')) === 1);
    });
  });

  describe('caps and the mint queue', function () {
    let h: Harness;

    before(async function () {
      h = await startHarness({ settings: { ...KEEP, poolSize: 0, maxDatabases: 3, maxDatabasesPerRole: 2 } });
      await h.admin.query('CREATE ROLE alice LOGIN CREATEDB');
      await createTemplateDatabase(h, 'tpl_app');
      await h.dbs.operations.seal('tpl_app', 'postgres');
    });

    after(async function () {
      await h?.stop();
    });

    it('refuses past the per-role cap and the runtime cap with 53400 naming the setting', async function () {
      await h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__a1' });
      await h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__a2' });
      const perRole = await rejection(h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__a3' }));
      expect(perRole.sqlstate).to.equal('53400');
      expect(perRole.message).to.match(/role "alice" already owns its maximum of 2 databases/);
      expect(perRole.hint).to.match(/--max-databases-per-role/);
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__p1' });
      const runtime = await rejection(h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__p2' }));
      expect(runtime.sqlstate).to.equal('53400');
      expect(runtime.hint).to.match(/--max-databases/);
      expect(await databaseExists(h, 'tdb_tpl_app__a3')).to.equal(false);
      expect(await databaseExists(h, 'tdb_tpl_app__p2')).to.equal(false);
      // Existing names still route at the cap.
      await h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__a1' });
    });
  });

  describe('a full mint queue', function () {
    it('refuses with 57P03 naming the setting, and creates only what it accepted', async function () {
      const h = await startHarness({ settings: { ...KEEP, poolSize: 0, mintWorkers: 1, mintQueueSize: 0 } });
      try {
        await createTemplateDatabase(h, 'tpl_app');
        await h.dbs.operations.seal('tpl_app', 'postgres');
        const results = await Promise.allSettled(Array.from({ length: 6 }, (_, i) => h.dbs.router.route({ user: 'postgres', database: `tdb_tpl_app__q${i}` })));
        const refused = results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as PgxError);
        expect(results[0]!.status).to.equal('fulfilled');
        expect(refused.length).to.be.at.least(1);
        for (const err of refused) {
          expect(err.sqlstate).to.equal('57P03');
          expect(err.message).to.match(/the mint queue is full/);
          expect(err.hint).to.match(/--mint-queue-size/);
        }
        const status = await h.dbs.operations.status();
        expect(status.mints.failures).to.equal(refused.length);
        expect(await countLike(h, 'tdb_tpl_app__q')).to.equal(6 - refused.length);
      } finally {
        await h.stop();
      }
    });
  });
});
