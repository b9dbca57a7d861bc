// A runtime restart on the same data directory keeps what PGX recorded in pgx_control: sealed
// templates, pinned and live databases with their TTLs, warm spares, counters; and the janitor resumes
// from the recorded times. Drift made while the runtime was down is reconciled at start.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { waitFor } from '../helpers/commands.js';
import { startTestRuntime } from '../helpers/runtime.js';
import { createTemplateDatabase, databaseExists, FAST, startHarness, type Harness } from './databases-harness.js';

describe('runtime: restart keeps disposable databases', function () {
  this.timeout(120_000);
  let first: Harness | undefined;
  let second: Harness | undefined;
  let expiresAt: number;
  let coldBefore: number;
  let restartedAt: number;

  before(async function () {
    // Grace long enough that nothing is dropped before the restart.
    first = await startHarness({ settings: { poolSize: 1, graceSeconds: 600 } });
    const h = first;
    await createTemplateDatabase(h, 'tpl_app');
    await h.dbs.operations.seal('tpl_app', 'postgres');
    await waitFor('a spare', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 1);
    // Cold mints only from here: the one spare stays for after the restart.
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__pinned' }); // warm: takes the spare
    await waitFor('the spare refilled', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 1);
    await h.dbs.operations.setPinned('tdb_tpl_app__pinned', true, 'postgres');
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__ttl' });
    await waitFor('the spare refilled', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 1);
    expiresAt = (await h.dbs.operations.setTtl('tdb_tpl_app__ttl', 3600, 'postgres')).expiresAt!;
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__idle' });
    await waitFor('the spare refilled', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 1);
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__live' });
    await waitFor('the spare refilled', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 1);
    coldBefore = (await h.dbs.operations.status()).mints.cold + (await h.dbs.operations.status()).mints.warm;
    // A session still open when the runtime goes down, as if it died: no session end is reported
    // (stop() writes the session start, which it had queued, before closing pgx_control).
    h.dbs.sessions.sessionStarted('tdb_tpl_app__pinned');

    // A snapshot as a runtime before 2026-12-05 sealed it: IS_TEMPLATE, which let any role with
    // CREATEDB copy it.
    await h.dbs.operations.snapshot('tdb_tpl_app__idle', 'idle_snap', 'postgres', false, true);
    await h.admin.query('ALTER DATABASE idle_snap WITH IS_TEMPLATE true');
    // Drift while down: a minted database dropped by hand, one created by hand under the prefix.
    await h.admin.query('DROP DATABASE tdb_tpl_app__live WITH (FORCE)');
    await h.admin.query('CREATE DATABASE tdb_tpl_app__byhand TEMPLATE tpl_app');
    await h.admin.close();
    await h.stopDatabases();
    await h.rt.runtime.stop();
    fs.rmSync(h.rt.socketDir, { recursive: true, force: true });

    restartedAt = Date.now();
    const rt = await startTestRuntime({ dataDir: h.rt.dataDir });
    // The janitor passes only when a test asks, so what it sees after the restart is deterministic.
    second = await startHarness({ rt, settings: { ...FAST, poolSize: 1, janitorIntervalMs: 3_600_000, reconcileIntervalMs: 0 } });
  });

  after(async function () {
    await second?.stop();
    if (first) fs.rmSync(path.dirname(first.rt.dataDir), { recursive: true, force: true });
  });

  it('forgets a database dropped by hand and adopts one made by hand under the prefix', async function () {
    const h = second!;
    expect(h.dbs.operations.database('tdb_tpl_app__live')).to.equal(null);
    expect(h.dbs.operations.database('tdb_tpl_app__byhand')).to.include({ kind: 'ephemeral', template: 'tpl_app', owner: 'postgres' });
  });

  it('keeps the sealed template and its spare, minting warm from it', async function () {
    const h = second!;
    const status = await h.dbs.operations.status();
    expect(status.databases.templates).to.equal(2); // tpl_app and the snapshot idle_snap
    expect(status.pool.tpl_app!.ready).to.be.at.least(1);
    const warmBefore = status.mints.warm;
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__after' });
    expect((await h.dbs.operations.status()).mints.warm).to.equal(warmBefore + 1);
  });

  it('keeps a snapshot sealed, no longer IS_TEMPLATE: only a superuser or its owner copies it', async function () {
    const h = second!;
    await h.dbs.operations.runJanitor(); // reconciles: closed to connections is what sealed means for a snapshot
    expect(h.dbs.operations.listTemplates().find((t) => t.name === 'idle_snap')).to.include({ sealed: true, snapshotOf: 'tdb_tpl_app__idle' });
    const { rows } = await h.admin.query("SELECT datistemplate, datallowconn FROM pg_database WHERE datname = 'idle_snap'");
    expect(rows).to.deep.equal([['f', 'f']]);
  });

  it('keeps counters across the restart', async function () {
    const status = await second!.dbs.operations.status();
    expect(status.mints.cold + status.mints.warm).to.be.at.least(coldBefore);
  });

  it('keeps pins and TTLs, and the janitor resumes from the recorded times', async function () {
    const h = second!;
    expect(h.dbs.operations.database('tdb_tpl_app__pinned')?.pinned).to.equal(true);
    expect(h.dbs.operations.database('tdb_tpl_app__ttl')?.expiresAt).to.equal(expiresAt);
    // Its session died with the old runtime: idle since the restart, not since an older session end.
    expect(h.dbs.operations.database('tdb_tpl_app__pinned')).to.include({ inUse: false });
    expect(h.dbs.operations.database('tdb_tpl_app__pinned')!.lastSessionEnd).to.be.at.least(restartedAt);
    // Grace is now 1 s; all were minted long enough ago. The one with neither pin nor TTL goes; the
    // pinned one stays, and so does the one with a TTL: an hour is its lifetime, sessions or not.
    await waitFor('the unpinned database to be dropped', async () => {
      await h.dbs.operations.runJanitor();
      return !(await databaseExists(h, 'tdb_tpl_app__idle'));
    });
    expect(await databaseExists(h, 'tdb_tpl_app__pinned')).to.equal(true);
    expect(await databaseExists(h, 'tdb_tpl_app__ttl')).to.equal(true);
  });
});

describe('runtime: a stop during the janitor\'s drops', function () {
  this.timeout(120_000);
  let first: Harness | undefined;
  let second: Harness | undefined;

  after(async function () {
    await second?.admin.close();
    await second?.stopDatabases();
    await first?.rt.stop();
  });

  it('ends after the drop in progress; the rest keep their records and are dropped after the next start', async function () {
    // The janitor passes only when asked, so the pass below is the one the stop interrupts.
    const settings = { ...FAST, poolSize: 0, janitorIntervalMs: 3_600_000 };
    first = await startHarness({ settings });
    const h = first;
    await createTemplateDatabase(h, 'tpl_app');
    await h.dbs.operations.seal('tpl_app', 'postgres');
    const names = Array.from({ length: 8 }, (_, i) => `tdb_tpl_app__due${i}`);
    for (const database of names) await h.dbs.router.route({ user: 'postgres', database });
    await new Promise((r) => setTimeout(r, (FAST.graceSeconds! + 0.5) * 1000));

    const pass = h.dbs.operations.runJanitor(); // eight drops due, one after another
    await h.stopDatabases();
    await pass;
    const { rows } = await h.admin.query(`SELECT count(*) FROM pg_database WHERE starts_with(datname, 'tdb_tpl_app__due')`);
    expect(Number(rows[0]![0])).to.be.at.least(names.length - 1);

    second = await startHarness({ rt: h.rt, settings });
    await h.admin.close();
    await second.dbs.operations.runJanitor();
    for (const name of names) expect(await databaseExists(second, name), name).to.equal(false);
  });
});
