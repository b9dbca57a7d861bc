// Bursts of new names larger than the warm pool, against a real runtime: the mint queue keeps clients
// waiting while creations progress (however long that takes in all) and refuses them only when none
// finishes for --mint-timeout; the pool grows towards the demand it could not meet and shrinks back
// to --pool-size once its template goes unminted for --pool-idle; the last spare claimed, the refill
// starts at once; a mint that finds none ready takes the one a refill is making, within a bound.

import { expect } from 'chai';
import type { Clock } from '../../src/clock.js';
import type { PgxError } from '../../src/errors.js';
import type { DatabaseSettings } from '../../src/runtime/databases/settings.js';
import type { SqlClient } from '../../src/runtime/postgres/sql-client.js';
import { waitFor } from '../helpers/commands.js';
import { REFILL_BACKENDS_SQL, createTemplateDatabase, startHarness, type Harness } from './databases-harness.js';

const BURST = 120;

function refusals(results: PromiseSettledResult<unknown>[]): PgxError[] {
  return results.filter((r): r is PromiseRejectedResult => r.status === 'rejected').map((r) => r.reason as PgxError);
}

async function sparesOnDisk(h: Harness): Promise<number> {
  const { rows } = await h.admin.query(`SELECT count(*) FROM pg_database WHERE starts_with(datname, 'pgx_spare_')`);
  return Number(rows[0]![0]);
}

/** A clock whose monotonic time stands still from freeze() on (the settle wait then never ends). */
function freezableClock(): { clock: Clock; freeze: () => void } {
  let frozenAt: number | null = null;
  return {
    clock: { now: () => Date.now(), monotonic: () => frozenAt ?? performance.now() },
    freeze: () => {
      frozenAt = performance.now();
    },
  };
}

/** CREATE DATABASEs (refills' and mints' alike) waiting on a lock, e.g. the template's. */
async function waitingCreates(h: Harness): Promise<number> {
  const { rows } = await h.admin.query(`SELECT count(*) FROM pg_stat_activity WHERE query LIKE 'CREATE DATABASE%' AND wait_event_type = 'Lock'`);
  return Number(rows[0]![0]);
}

/** An uncommitted RENAME of tpl_app on `holder`: every CREATE DATABASE from it waits until ROLLBACK. */
async function holdTemplateLock(holder: SqlClient): Promise<void> {
  await holder.query('BEGIN');
  await holder.query('ALTER DATABASE tpl_app RENAME TO tpl_app_held');
}

/** tpl_app made, sealed, and its pool filled with `spares`. */
async function sealedWithSpares(h: Harness, spares: number): Promise<void> {
  await createTemplateDatabase(h, 'tpl_app');
  await h.dbs.operations.seal('tpl_app', 'postgres');
  await waitFor(`${spares} spares`, async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === spares, 60_000);
}

/**
 * Runs `body` on a harness with `settings` and a session of its own beside it (`holder`, to hold
 * locks); afterwards the holder's transaction is rolled back and both are closed.
 */
async function withHolder(settings: Partial<DatabaseSettings>, body: (h: Harness, holder: SqlClient) => Promise<void>): Promise<void> {
  const h = await startHarness({ settings });
  const holder = await h.rt.runtime.supervisor.connect('postgres', 'postgres');
  try {
    await body(h, holder);
  } finally {
    await holder.query('ROLLBACK').catch(() => {});
    await holder.close();
    await h.stop();
  }
}

/**
 * Runs `body` on a runtime with `settings` whose one tpl_app spare was just handed out (to
 * tdb_tpl_app__a) while the template's lock is held, so the refill's copy waits; `release` ends the hold.
 */
async function withRefillHeld(settings: Partial<DatabaseSettings>, body: (h: Harness, release: () => Promise<void>) => Promise<void>): Promise<void> {
  await withHolder({ graceSeconds: 3600, poolSize: 1, poolMax: 1, ...settings }, async (h, holder) => {
    await sealedWithSpares(h, 1);
    await holdTemplateLock(holder);
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__a' });
    await waitFor('the refill waiting', async () => (await waitingCreates(h)) === 1);
    await body(h, async () => {
      await holder.query('ROLLBACK');
    });
  });
}

/** Waits until the pool is back at --pool-size 1: its target, its spares, and nothing more on disk. */
async function backAtOneSpare(h: Harness): Promise<void> {
  await waitFor('the pool back at 1 spare', async () => {
    const pool = (await h.dbs.operations.status()).pool.tpl_app!;
    return pool.size === 1 && pool.ready === 1 && (await sparesOnDisk(h)) === 1;
  }, 60_000);
}

describe('runtime: bursts larger than the warm pool', function () {
  this.timeout(300_000);

  it('serves a burst that takes many --mint-timeouts in all, with no refusal, while creations progress', async function () {
    // One worker copies the template 120 times over: 10 s to a minute, each copy well within 4 s.
    const h = await startHarness({ settings: { graceSeconds: 3600, poolSize: 1, poolMax: 1, mintWorkers: 1, mintTimeoutSeconds: 4 } });
    try {
      await sealedWithSpares(h, 1);
      const results = await Promise.allSettled(Array.from({ length: BURST }, (_, i) => h.dbs.router.route({ user: 'postgres', database: `tdb_tpl_app__b${i}` })));
      const refused = refusals(results).map((e) => `${e.sqlstate}: ${e.message}`);
      expect(refused.length, refused.slice(0, 3).join('; ')).to.equal(0);
      const status = await h.dbs.operations.status();
      expect(status.mints.warm + status.mints.cold).to.equal(BURST);
      expect(status.mints.cold).to.be.at.least(BURST - 2);
    } finally {
      await h.stop();
    }
  });

  it('refuses with 57P03 and the hint the mints waiting behind a create that cannot go on', async function () {
    await withHolder({ graceSeconds: 3600, poolSize: 0, mintWorkers: 1, mintTimeoutSeconds: 1 }, async (h, holder) => {
      await createTemplateDatabase(h, 'tpl_app');
      await h.dbs.operations.seal('tpl_app', 'postgres');
      // An uncommitted RENAME holds the template's lock: CREATE DATABASE ... TEMPLATE waits on it.
      await holdTemplateLock(holder);
      const mints = Array.from({ length: 3 }, (_, i) => h.dbs.router.route({ user: 'postgres', database: `tdb_tpl_app__s${i}` }));
      const waiting = await Promise.allSettled(mints.slice(1));
      const refused = refusals(waiting);
      expect(refused.length).to.equal(2);
      for (const err of refused) {
        expect(err.sqlstate).to.equal('57P03');
        expect(err.message).to.match(/^timed out waiting to create database "tdb_tpl_app__s[12]": no database was created for \d+ ms$/);
        expect(err.hint).to.match(/--mint-timeout seconds \(1\)/);
        expect(err.hint).to.match(/a session holding the template/);
      }
      await holder.query('ROLLBACK');
      // The create that had started runs to its end once the lock is gone.
      await mints[0];
      const status = await h.dbs.operations.status();
      expect(status.mints.cold).to.equal(1);
      expect(status.mints.failures).to.equal(2);
    });
  });

  it('grows the pool under a burst, up to --pool-max, and shrinks it back to --pool-size after --pool-idle', async function () {
    // One mint worker: of 10 connects, 1 claims the spare, 1 copies the template and the other 8 wait.
    const h = await startHarness({ settings: { graceSeconds: 3600, janitorIntervalMs: 100, poolSize: 1, poolMax: 5, poolIdleSeconds: 15, mintWorkers: 1 } });
    try {
      await sealedWithSpares(h, 1);
      const results = await Promise.allSettled(Array.from({ length: 10 }, (_, i) => h.dbs.router.route({ user: 'postgres', database: `tdb_tpl_app__g${i}` })));
      expect(refusals(results)).to.deep.equal([]);
      // The mints that found no spare ready, 10 under way: the target rose to 1 + 10, capped at 5.
      expect((await h.dbs.operations.status()).pool.tpl_app!.size).to.equal(5);
      await waitFor('5 spares', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 5, 60_000);
      expect(await sparesOnDisk(h)).to.equal(5);
      await backAtOneSpare(h);
    } finally {
      await h.stop();
    }
  });

  it('grows the pool under a burst that comes while the first claim is still renaming its spare', async function () {
    // A row lock on the spare's pg_database row holds the first claim (ALTER DATABASE waits on it)
    // while the other 9 mints find no spare: they all miss before the pool counts as drained, so
    // only the mint queue filling up tells the pool that mints outpace it.
    await withHolder({ graceSeconds: 3600, poolSize: 1, poolMax: 5, mintWorkers: 1 }, async (h, holder) => {
      await sealedWithSpares(h, 1);
      await holder.query('BEGIN');
      await holder.query(`SELECT 1 FROM pg_database WHERE starts_with(datname, 'pgx_spare_') FOR UPDATE`);
      const burst = Promise.allSettled(Array.from({ length: 10 }, (_, i) => h.dbs.router.route({ user: 'postgres', database: `tdb_tpl_app__h${i}` })));
      await waitFor('the claim waiting', async () => {
        const { rows } = await h.admin.query(`SELECT count(*) FROM pg_stat_activity WHERE query LIKE '%OWNER TO%' AND wait_event_type = 'Lock'`);
        return Number(rows[0]![0]) === 1;
      });
      await holder.query('ROLLBACK');
      expect(refusals(await burst)).to.deep.equal([]);
      expect((await h.dbs.operations.status()).pool.tpl_app!.size).to.equal(5);
    });
  });

  it('starts the refill at once when the last spare is claimed, without waiting for the claiming client to settle', async function () {
    // The monotonic clock stands still from the claim on: a refill that waited for the claiming
    // client to settle (or for the hold's bound) would wait for ever.
    const { clock, freeze } = freezableClock();
    const h = await startHarness({ settings: { graceSeconds: 3600, poolSize: 1, poolMax: 1 }, clock });
    try {
      await sealedWithSpares(h, 1);
      freeze();
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__last' });
      expect((await h.dbs.operations.status()).mints.warm).to.equal(1);
      await waitFor('the pool refilled', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 1, 60_000);
    } finally {
      await h.stop();
    }
  });

  it("grows the pool when one client's mints outpace its refills, with no other mint waiting", async function () {
    const h = await startHarness({ settings: { graceSeconds: 3600, poolSize: 1, poolMax: 3 } });
    try {
      await sealedWithSpares(h, 1);
      // One after the other: the second finds the refill behind the first still copying (and takes
      // its spare if it comes within spareWaitMs, else copies the template).
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__first' });
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__second' });
      const status = await h.dbs.operations.status();
      expect(status.mints.warm + status.mints.cold).to.equal(2);
      expect(status.pool.tpl_app!.size).to.equal(2);
      await waitFor('2 spares', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 2, 60_000);
    } finally {
      await h.stop();
    }
  });
});

describe('runtime: a warm pool behind its handouts', function () {
  this.timeout(300_000);

  it('refills without waiting for the claiming clients to settle while more than one spare is missing', async function () {
    // The monotonic clock stands still from the claims on: a refill that waits for the last claiming
    // client to settle (or for the hold's bound) waits for ever. It does so only with one spare missing.
    const { clock, freeze } = freezableClock();
    const h = await startHarness({ settings: { graceSeconds: 3600, poolSize: 3, poolMax: 3 }, clock });
    try {
      await sealedWithSpares(h, 3);
      freeze();
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__one' });
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__two' });
      expect((await h.dbs.operations.status()).mints.warm).to.equal(2);
      await waitFor('the pool at most one spare short', async () => (await h.dbs.operations.status()).pool.tpl_app!.ready >= 2, 60_000);
    } finally {
      await h.stop();
    }
  });

  it('grows towards the mints at once, not the count of misses: a long loop of creates two at a time', async function () {
    const h = await startHarness({ settings: { graceSeconds: 3600, poolSize: 1, poolMax: 50 } });
    try {
      await sealedWithSpares(h, 1);
      for (let round = 0; round < 15; round++) {
        await Promise.all([0, 1].map((i) => h.dbs.router.route({ user: 'postgres', database: `tdb_tpl_app__r${round}_${i}` })));
      }
      // --pool-size 1 plus the two mints in flight at a miss (a loop that never outpaced the pool
      // would have left it at 1).
      expect((await h.dbs.operations.status()).pool.tpl_app!.size).to.equal(3);
    } finally {
      await h.stop();
    }
  });

  it('makes two spares at once while more than one is missing, and one at a time otherwise', async function () {
    await withHolder({ graceSeconds: 3600, poolSize: 3, poolMax: 3 }, async (h, holder) => {
      await sealedWithSpares(h, 3);
      await holdTemplateLock(holder);
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__one' });
      await waitFor('one refill waiting', async () => (await waitingCreates(h)) === 1);
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__two' });
      await waitFor('two refills waiting', async () => (await waitingCreates(h)) === 2);
      await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__three' });
      // A third spare missing does not start a third refill.
      await new Promise((resolve) => setTimeout(resolve, 500));
      expect(await waitingCreates(h)).to.equal(2);
      await holder.query('ROLLBACK');
      await waitFor('the pool refilled', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 3, 60_000);
      expect((await h.dbs.operations.status()).mints.warm).to.equal(3);
      // The pool full, the second refill backend goes.
      await waitFor('one refill backend left', async () => {
        return (await h.admin.query(REFILL_BACKENDS_SQL)).rows.length === 1;
      });
    });
  });

  it('gives a mint that finds no spare ready the one a refill is making, one mint per spare in the making', async function () {
    // The first mint after the handout waits for the refill's spare (spareWaitMs is long here), the
    // second copies the template at once; both copies wait on the lock until it goes.
    await withRefillHeld({ spareWaitMs: 120_000 }, async (h, release) => {
      const b = h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__b' });
      const c = h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__c' });
      await waitFor("c's own copy waiting", async () => (await waitingCreates(h)) === 2);
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(await waitingCreates(h), 'b copies the template too').to.equal(2);
      await release();
      await Promise.all([b, c]);
      const { mints } = await h.dbs.operations.status();
      expect([mints.warm, mints.cold]).to.deep.equal([2, 1]);
    });
  });

  it('copies the template itself once the spare being made has not come within spareWaitMs', async function () {
    await withRefillHeld({ spareWaitMs: 200 }, async (h, release) => {
      const b = h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__b' });
      // A wait without its bound would hold b for as long as the lock, with no copy of its own.
      await waitFor("b's own copy waiting", async () => (await waitingCreates(h)) === 2, 5000);
      await release();
      await b;
      const { mints } = await h.dbs.operations.status();
      expect([mints.warm, mints.cold]).to.deep.equal([1, 1]);
    });
  });
});

describe('runtime: a grown warm pool across a restart', function () {
  this.timeout(300_000);

  /** A runtime whose pool a burst of 10 grew to 5 spares; the janitor drops nothing on its own. */
  async function grownPool(): Promise<Harness> {
    const h = await startHarness({ settings: { graceSeconds: 3600, janitorIntervalMs: 3_600_000, poolSize: 1, poolMax: 5, poolIdleSeconds: 600, mintWorkers: 1 } });
    try {
      await sealedWithSpares(h, 1);
      await Promise.all(Array.from({ length: 10 }, (_, i) => h.dbs.router.route({ user: 'postgres', database: `tdb_tpl_app__g${i}` })));
      // Once failed in CI, not reproduced since: the pool's state goes with the timeout.
      await waitFor('5 spares', async () => (await h.dbs.operations.status()).pool.tpl_app?.ready === 5, 60_000).catch(async (err: Error) => {
        const status = await h.dbs.operations.status();
        throw new Error(`${err.message}; pool ${JSON.stringify(status.pool.tpl_app)}, mints ${JSON.stringify(status.mints)}`);
      });
      return h;
    } catch (err) {
      // The tests' own cleanup never gets this runtime (that CI run left its PostgreSQL running).
      await h.stop();
      throw err;
    }
  }

  async function restarted(h: Harness, poolIdleSeconds: number, janitorIntervalMs = 100): Promise<Harness> {
    await h.admin.close();
    await h.stopDatabases();
    return startHarness({ rt: h.rt, settings: { graceSeconds: 3600, janitorIntervalMs, poolSize: 1, poolMax: 5, poolIdleSeconds } });
  }

  it('keeps the extra spares of a pool that shrank before the restart stale, never handed out', async function () {
    // Shrunk after --pool-idle with the janitor idle: the 4 extra spares are marked, not yet dropped.
    const shrunk = await restarted(await grownPool(), 2, 3_600_000);
    await waitFor('the pool shrunk', async () => (await shrunk.dbs.operations.status()).pool.tpl_app?.size === 1, 60_000);
    expect((await shrunk.dbs.operations.status()).pool.tpl_app!.ready).to.equal(1);
    const h = await restarted(shrunk, 600);
    try {
      expect((await h.dbs.operations.status()).pool.tpl_app).to.include({ size: 1, ready: 1 });
      await waitFor('the stale spares dropped', async () => (await sparesOnDisk(h)) === 1, 60_000);
    } finally {
      await h.stop();
    }
  });

  it('keeps a pool grown before the restart at its size, and shrinks it after --pool-idle', async function () {
    const h = await restarted(await grownPool(), 2);
    try {
      expect((await h.dbs.operations.status()).pool.tpl_app).to.include({ size: 5, ready: 5 });
      await backAtOneSpare(h);
    } finally {
      await h.stop();
    }
  });
});
