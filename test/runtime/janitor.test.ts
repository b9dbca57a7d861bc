// The janitor against a real runtime, wired into the engine so real client sessions drive the grace
// clock: dropped after grace, kept while a session is open or while pinned, a fresh grace after unpin,
// TTL expiry ends sessions with 57P01 and drops. Then drop_database and who may call it.

import { expect } from 'chai';
import type pg from 'pg';
import { idleDueAt } from '../../src/runtime/databases/janitor-tasks.js';
import type { DatabaseRecord } from '../../src/runtime/databases/records.js';
import { Registry } from '../../src/runtime/databases/registry.js';
import { waitFor } from '../helpers/commands.js';
import { connectClient, createTemplateDatabase, databaseExists, FAST, rejection, startHarness, type Harness } from './databases-harness.js';

const AS_POSTGRES = { user: 'postgres', database: 'postgres' };

/** Lets the janitor run a few passes past the grace period, then says whether `name` survived. */
async function survivesGrace(h: Harness, name: string): Promise<boolean> {
  await new Promise((r) => setTimeout(r, (FAST.graceSeconds! + 0.8) * 1000));
  await h.dbs.operations.runJanitor();
  return databaseExists(h, name);
}

function errorOf(client: pg.Client): () => (Error & { code?: string }) | undefined {
  let seen: (Error & { code?: string }) | undefined;
  client.on('error', (err) => (seen ??= err));
  return () => seen;
}

describe('runtime: janitor', function () {
  this.timeout(60_000);
  let h: Harness;

  before(async function () {
    h = await startHarness({ settings: { ...FAST, poolSize: 0 }, wire: true });
    await h.admin.query('CREATE ROLE alice LOGIN CREATEDB; CREATE ROLE bob LOGIN CREATEDB');
    await createTemplateDatabase(h, 'tpl_app');
    await h.dbs.operations.seal('tpl_app', 'postgres');
  });

  after(async function () {
    await h?.stop();
  });

  it('drops a minted database --grace after its last session ends', async function () {
    const c = await connectClient(h, 'tdb_tpl_app__grace');
    await c.query('SELECT 1');
    await c.end();
    await waitFor('the last session end to be recorded', () => h.dbs.operations.database('tdb_tpl_app__grace')?.lastSessionEnd !== null);
    const drops = (await h.dbs.operations.status()).janitor.drops;
    await waitFor('the drop', async () => !(await databaseExists(h, 'tdb_tpl_app__grace')));
    const status = await h.dbs.operations.status();
    expect(status.janitor.drops).to.equal(drops + 1);
    expect(status.janitor.last_run).to.be.a('string');
    expect(h.dbs.operations.database('tdb_tpl_app__grace')).to.equal(null);
  });

  it('drops a database minted but never connected to, once grace has passed', async function () {
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__unused' });
    await waitFor('the drop', async () => !(await databaseExists(h, 'tdb_tpl_app__unused')));
  });

  it('does not drop while a session is open', async function () {
    const c = await connectClient(h, 'tdb_tpl_app__open');
    expect(await survivesGrace(h, 'tdb_tpl_app__open')).to.equal(true);
    expect((await c.query('SELECT 1 AS one')).rows[0].one).to.equal(1);
    await c.end();
    await waitFor('the drop after the session ended', async () => !(await databaseExists(h, 'tdb_tpl_app__open')));
  });

  it('does not drop a pinned database; unpin starts a fresh grace', async function () {
    const c = await connectClient(h, 'tdb_tpl_app__pinned');
    await c.end();
    expect(await h.dbs.control.call('pin_database', ['tdb_tpl_app__pinned'], AS_POSTGRES)).to.equal('tdb_tpl_app__pinned');
    expect(await survivesGrace(h, 'tdb_tpl_app__pinned')).to.equal(true);
    expect((await h.dbs.operations.status()).databases.pinned).to.equal(1);

    const lastEndBefore = h.dbs.operations.database('tdb_tpl_app__pinned')!.lastSessionEnd!;
    await h.dbs.control.call('unpin_database', ['tdb_tpl_app__pinned'], AS_POSTGRES);
    const record = h.dbs.operations.database('tdb_tpl_app__pinned')!;
    expect(record.pinned).to.equal(false);
    // Grace counts from the unpin, not from the session end long past.
    expect(record.lastSessionEnd!).to.be.greaterThan(lastEndBefore + FAST.graceSeconds! * 1000);
    await h.dbs.operations.runJanitor();
    expect(await databaseExists(h, 'tdb_tpl_app__pinned')).to.equal(true);
    await waitFor('the drop after the fresh grace', async () => !(await databaseExists(h, 'tdb_tpl_app__pinned')));
  });

  it('at TTL expiry ends sessions with 57P01 naming the expiry, then drops, pinned or not', async function () {
    const c = await connectClient(h, 'tdb_tpl_app__ttl');
    const seen = errorOf(c);
    await h.dbs.operations.setPinned('tdb_tpl_app__ttl', true, 'postgres');
    const record = await h.dbs.operations.setTtl('tdb_tpl_app__ttl', 1, 'postgres');
    expect(record.expiresAt).to.be.a('number');
    await waitFor('the session to be ended', () => seen() !== undefined);
    expect(seen()!.code).to.equal('57P01');
    expect(seen()!.message).to.match(/^terminating connection: database "tdb_tpl_app__ttl" expired at \d{4}-\d\d-\d\dT/);
    const termination = h.terminations.find((t) => t.database === 'tdb_tpl_app__ttl');
    expect(termination?.message).to.match(/expired at/);
    expect(termination?.hint).to.match(/TTL ran out/);
    await waitFor('the drop', async () => !(await databaseExists(h, 'tdb_tpl_app__ttl')));
  });

  it('mints a name again after it was dropped', async function () {
    const c = await connectClient(h, 'tdb_tpl_app__again');
    await c.query('CREATE TABLE marker (id int)');
    await c.end();
    await waitFor('the drop', async () => !(await databaseExists(h, 'tdb_tpl_app__again')));
    const c2 = await connectClient(h, 'tdb_tpl_app__again');
    expect((await c2.query("SELECT to_regclass('marker') IS NULL AS fresh")).rows[0].fresh).to.equal(true);
    await c2.end();
  });

  it('protects a database just minted or routed to, even with no session yet', function () {
    const registry = new Registry();
    const d: DatabaseRecord = {
      name: 'tdb_tpl_app__p',
      kind: 'ephemeral',
      template: 'tpl_app',
      generation: 1,
      owner: 'postgres',
      createdAt: 1_000_000,
      lastSessionEnd: null,
      inUse: false,
      pinned: false,
      expiresAt: null,
      connectionLimit: null,
      memoryLimitMb: null,
      origin: 'connect',
    };
    expect(idleDueAt(d, { graceMs: 0, protectMs: 5000, registry })).to.equal(1_005_000);
    expect(idleDueAt(d, { graceMs: 15_000, protectMs: 5000, registry })).to.equal(1_015_000);
    expect(idleDueAt({ ...d, lastSessionEnd: 1_100_000 }, { graceMs: 15_000, protectMs: 5000, registry })).to.equal(1_115_000);
    // Routed again after the last session ended: protected until the new client's session shows.
    registry.lastRouted.set(d.name, 1_200_000);
    expect(idleDueAt({ ...d, lastSessionEnd: 1_100_000 }, { graceMs: 2000, protectMs: 5000, registry })).to.equal(1_205_000);
    // A session began and ended after that route: grace alone counts.
    expect(idleDueAt({ ...d, lastSessionEnd: 1_201_000 }, { graceMs: 2000, protectMs: 5000, registry })).to.equal(1_203_000);
  });

  describe('lifetimes: a TTL is the lifetime, and a dropped address answers with why', function () {
    it('keeps a database with a TTL and no session past --grace, and drops it at its TTL', async function () {
      const created = await h.dbs.operations.create('tpl_app', { name: 'tdb_tpl_app__ttl_alone', user: 'postgres', settings: { ttlSeconds: 3 } });
      expect(h.dbs.operations.database(created.name)!.expiresAt).to.be.a('number');
      // Grace (1 s) and the mint's protection have passed, the TTL (3 s) has not.
      expect(await survivesGrace(h, created.name)).to.equal(true);
      await waitFor('the drop at the TTL', async () => !(await databaseExists(h, created.name)));
    });

    it('answers a connect to an expired TTL database with 3D000 saying when and why, not an empty mint', async function () {
      const err = await rejection(connectClient(h, 'tdb_tpl_app__ttl_alone'));
      expect(err.code).to.equal('3D000');
      expect(err.message).to.match(/^database "tdb_tpl_app__ttl_alone" was dropped at \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(its ttl expired\)$/);
      expect(await databaseExists(h, 'tdb_tpl_app__ttl_alone')).to.equal(false);
      // Kept on disk, so a restart does not forget it.
      const control = await h.rt.runtime.supervisor.connect('pgx_control', 'postgres');
      try {
        const { rows } = await control.query("SELECT reason FROM tombstones WHERE name = 'tdb_tpl_app__ttl_alone'");
        expect(rows).to.deep.equal([['its ttl expired']]);
      } finally {
        await control.close();
      }
    });

    it('buries a name created by request and dropped after its grace; an explicit create reuses it', async function () {
      await h.dbs.operations.create('tpl_app', { name: 'tdb_tpl_app__asked', user: 'postgres' });
      await waitFor('the drop after grace', async () => !(await databaseExists(h, 'tdb_tpl_app__asked')));
      const err = await rejection(h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__asked' }));
      expect(err.message).to.match(/was dropped at .* \(no session for --grace 1 s\)$/);
      const again = await h.dbs.operations.create('tpl_app', { name: 'tdb_tpl_app__asked', user: 'postgres', settings: { pinned: true } });
      expect(again.name).to.equal('tdb_tpl_app__asked');
      const c = await connectClient(h, 'tdb_tpl_app__asked');
      await c.end();
      await h.dbs.operations.drop('tdb_tpl_app__asked', AS_POSTGRES);
      const dropped = await rejection(connectClient(h, 'tdb_tpl_app__asked'));
      expect(dropped.message).to.match(/\(dropped by role "postgres"\)$/);
    });

    it('leaves no tombstone for a name minted by connecting, so a job can reconnect to it', async function () {
      const c = await connectClient(h, 'tdb_tpl_app__ci_job');
      await c.end();
      await waitFor('the drop after grace', async () => !(await databaseExists(h, 'tdb_tpl_app__ci_job')));
      const again = await connectClient(h, 'tdb_tpl_app__ci_job');
      await again.end();
    });
  });

  describe('pin, unpin, TTL and drop_database permissions', function () {
    before(async function () {
      await h.dbs.router.route({ user: 'alice', database: 'tdb_tpl_app__alices' });
      await h.dbs.operations.setPinned('tdb_tpl_app__alices', true, 'alice');
      await h.admin.query('CREATE DATABASE plain_db');
    });

    it('lets the owner pin and drop, refuses other roles with 42501 naming the function', async function () {
      for (const fn of ['pin_database', 'unpin_database', 'drop_database'] as const) {
        const err = await rejection(h.dbs.control.call(fn, ['tdb_tpl_app__alices'], { user: 'bob', database: 'postgres' }));
        expect(err.sqlstate, fn).to.equal('42501');
        expect(err.message).to.equal(`permission denied for function pgx_${fn}`);
      }
      expect(await databaseExists(h, 'tdb_tpl_app__alices')).to.equal(true);
      expect(h.dbs.operations.database('tdb_tpl_app__alices')!.pinned).to.equal(true);
    });

    it('refuses to pin a database PGX did not mint, and reserved names as missing', async function () {
      const plain = await rejection(h.dbs.control.call('pin_database', ['plain_db'], AS_POSTGRES));
      expect(plain.sqlstate).to.equal('22023');
      expect(plain.message).to.match(/was not minted by PGX/);
      const control = await rejection(h.dbs.control.call('pin_database', ['pgx_control'], AS_POSTGRES));
      expect(control.sqlstate).to.equal('3D000');
      const missing = await rejection(h.dbs.control.call('unpin_database', ['tdb_tpl_app__nope'], AS_POSTGRES));
      expect(missing.sqlstate).to.equal('3D000');
    });

    it('drops a non-minted database for a superuser only', async function () {
      const err = await rejection(h.dbs.control.call('drop_database', ['plain_db'], { user: 'alice', database: 'postgres' }));
      expect(err.sqlstate).to.equal('42501');
      expect(err.hint).to.match(/only a superuser may drop it/);
      expect(await databaseExists(h, 'plain_db')).to.equal(true);
      expect(await h.dbs.control.call('drop_database', ['plain_db'], AS_POSTGRES)).to.equal('plain_db');
      expect(await databaseExists(h, 'plain_db')).to.equal(false);
    });

    it('refuses system databases, sealed templates and the caller\'s own database', async function () {
      expect((await rejection(h.dbs.control.call('drop_database', ['postgres'], { user: 'postgres', database: 'tpl_x' }))).sqlstate).to.equal('22023');
      const tpl = await rejection(h.dbs.control.call('drop_database', ['tpl_app'], AS_POSTGRES));
      expect(tpl.sqlstate).to.equal('55006');
      expect(tpl.hint).to.match(/pgx_unseal_template/);
      const own = await rejection(h.dbs.control.call('drop_database', ['tdb_tpl_app__alices'], { user: 'alice', database: 'tdb_tpl_app__alices' }));
      expect(own.sqlstate).to.equal('55006');
      expect(await databaseExists(h, 'tpl_app')).to.equal(true);
    });

    it('lets the owner drop a minted database, ending its sessions first', async function () {
      const c = await connectClient(h, 'tdb_tpl_app__alices', 'alice');
      const seen = errorOf(c);
      expect(await h.dbs.control.call('drop_database', ['tdb_tpl_app__alices'], { user: 'alice', database: 'postgres' })).to.equal('tdb_tpl_app__alices');
      expect(await databaseExists(h, 'tdb_tpl_app__alices')).to.equal(false);
      await waitFor('the session to be ended', () => seen() !== undefined);
      expect(seen()!.code).to.equal('57P01');
      expect(h.dbs.operations.database('tdb_tpl_app__alices')).to.equal(null);
    });
  });
});
