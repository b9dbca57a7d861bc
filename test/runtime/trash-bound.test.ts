// The trash's bound, against a real PostgreSQL: drop calls wait while BACKLOG_BOUND dropped databases
// still wait for their DROP DATABASE, so a loop of mints and drops faster than PostgreSQL drops goes at
// PostgreSQL's pace instead of filling the disk with trash.

import { expect } from 'chai';
import { systemClock } from '../../src/clock.js';
import { Counters } from '../../src/runtime/databases/counters.js';
import { Trash } from '../../src/runtime/databases/trash.js';
import { startTestRuntime, testLogger, type TestRuntime } from '../helpers/runtime.js';

describe('runtime: the trash bounds its backlog', function () {
  this.timeout(60_000);
  let rt: TestRuntime;

  before(async function () {
    rt = await startTestRuntime();
  });

  after(async function () {
    await rt?.stop();
  });

  /** A trash on the test runtime's PostgreSQL with a small bound, never holding back for mints. */
  function trashBounded(backlogBound: number): Trash {
    return new Trash({ connect: () => rt.runtime.supervisor.connect('postgres', 'postgres'), clones: false, mintsInFlight: () => false, backlogBound, idleCloseMs: 60_000, counters: new Counters(), clock: systemClock, logger: testLogger() });
  }

  it('keeps drop calls waiting while the backlog is at its bound, and lets them go as it drops', async function () {
    const admin = await rt.runtime.supervisor.connect('postgres', 'postgres');
    const trash = trashBounded(2);
    try {
      const names = ['pgx_trash_900001', 'pgx_trash_900002', 'pgx_trash_900003'];
      for (const name of names) await admin.query(`CREATE DATABASE ${name}`);
      // Not started: nothing is dropped yet.
      trash.add(names[0]!);
      await trash.room(); // one waits: under the bound
      for (const name of names.slice(1)) trash.add(name);
      let answered = false;
      const waiting = trash.room().then(() => (answered = true));
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(answered, 'a drop call answered with the backlog at its bound').to.equal(false);
      trash.start();
      await waiting;
      expect(trash.backlog).to.be.below(2);
      await trash.emptied();
      const { rows } = await admin.query(`SELECT count(*) FROM pg_database WHERE datname LIKE 'pgx\\_trash\\_9%'`);
      expect(Number(rows[0]![0])).to.equal(0);
    } finally {
      await trash.stop();
      await admin.close();
    }
  });

  it('lets waiting drop calls go when it stops', async function () {
    const trash = trashBounded(1);
    trash.add('pgx_trash_900009'); // never started, never dropped
    const waiting = trash.room();
    await trash.stop();
    await waiting;
  });
});
