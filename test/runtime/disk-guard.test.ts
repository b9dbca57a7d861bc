// The disk guard's lines, reserve and restart gate on a real small filesystem (a tmpfs mounted for
// the test; root, as CI runs), without PostgreSQL: the states follow statfs, the reserve is real
// blocks that go when space runs out and come back with it, and the gate holds a restart until there
// is room for crash recovery. Free space is read less often the further it is above the line.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { systemClock } from '../../src/clock.js';
import { PgxError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import { DiskGuard, nextCheckDelay, RESERVE_FILE } from '../../src/runtime/postgres/disk-guard.js';
import { fill, tmpfsForSuite } from '../helpers/tmpfs.js';

const MB = 2 ** 20;
const GB = 2 ** 30;

describe('runtime: disk guard on a small tmpfs', function () {
  this.timeout(30_000);
  let guard: DiskGuard | undefined;

  after(async function () {
    await guard?.stop();
  });
  const mounted = tmpfsForSuite('pgx-disk-guard-', '80m');

  it('refuses new work when low, gives the reserve up when out of space, gates a restart, and recovers', async function () {
    const mountPoint = mounted();
    let rooms = 0;
    guard = new DiskGuard({
      dataDir: mountPoint,
      minFree: { mb: 32 },
      intervalMs: 50,
      connect: () => Promise.reject(new Error('no PostgreSQL in this test')),
      cancelStatements: () => 0,
      postgresUp: () => true, // its CHECKPOINT and cancels fail (no PostgreSQL here), which a pass logs and survives
      clock: systemClock,
      logger: silentLogger,
    });
    guard.onRoom(() => rooms++);
    await guard.start();
    const reserve = path.join(mountPoint, RESERVE_FILE);
    expect(guard.status()).to.include({ state: 'ok', min_free_mb: 32, reserve_mb: 8 });
    expect(fs.statSync(reserve).blocks * 512, 'the reserve holds real blocks').to.equal(8 * MB);
    guard.assertRoom('cannot create database "x"');

    // Something fills the filesystem.
    const ballast = path.join(mountPoint, 'ballast');
    fill(ballast);
    await guard.check();
    expect(guard.state).to.equal('critical');
    expect(fs.existsSync(reserve), 'the reserve, given up').to.equal(false);
    const refusal = (() => {
      try {
        guard.assertRoom('cannot create database "x"');
      } catch (err) {
        return err as PgxError;
      }
      return null;
    })();
    expect(refusal?.sqlstate).to.equal('53100');
    expect(refusal?.message).to.include('under the runtime\'s --min-free-disk of 32 MB');
    expect(refusal?.hint).to.include('Free space');

    // Filled again past the reserve's room: a restart waits until space is freed.
    fill(ballast);
    const abort = new AbortController();
    let gateOpen = false;
    const gate = guard.roomToRestart(abort.signal).then(() => (gateOpen = true));
    await new Promise((r) => setTimeout(r, 300));
    expect(gateOpen, 'the restart gate while the disk is full').to.equal(false);
    fs.rmSync(ballast);
    await gate;

    await guard.check();
    expect(guard.status()).to.include({ state: 'ok', reserve_mb: 8 });
    expect(fs.statSync(reserve).blocks * 512).to.equal(8 * MB);
    expect(rooms, 'room listeners told once').to.equal(1);
    expect(guard.status().refusals).to.equal(1);
  });
});

describe('runtime: disk guard cadence', function () {
  it('reads once a second far above the line, every interval near or under it', function () {
    expect(nextCheckDelay(100 * GB, GB, 0, 100), 'far above').to.equal(1_000);
    expect(nextCheckDelay(GB + 50 * MB, GB, 0, 100), 'near').to.equal(100);
    expect(nextCheckDelay(GB + 500 * MB, GB, 0, 100), 'half a second of a fast writer above').to.be.within(450, 550);
    expect(nextCheckDelay(3 * GB, GB, (4 * GB) / 1_000, 100), '2 GB above, falling at 4 GB/s').to.be.closeTo(500, 1);
    expect(nextCheckDelay(GB / 2, GB, 0, 100), 'under').to.equal(100);
    expect(nextCheckDelay(GB / 2, GB, 0, 250), 'under, a slower fastest cadence').to.equal(250);
  });
});

describe('runtime: disk guard cadence on a large empty tmpfs', function () {
  this.timeout(30_000);
  // Nothing is written to it: a tmpfs takes memory only for what it holds.
  const mounted = tmpfsForSuite('pgx-disk-cadence-', '4g');

  it('reads free space seldom with gigabytes above the line, every interval near or under it, and not after stop', async function () {
    const mountPoint = mounted();
    const fsStat = fs.statfsSync(mountPoint);
    const free = fsStat.bavail * fsStat.bsize;
    const passes = { far: 0, near: 0, under: 0 };
    const guards = Object.entries({ far: 32, near: free / MB - 20, under: 8_000 }).map(([name, minMb]) => {
      const guard = new DiskGuard({
        dataDir: mountPoint,
        minFree: { mb: minMb },
        intervalMs: 50,
        connect: () => Promise.reject(new Error('no PostgreSQL in this test')),
        cancelStatements: () => 0,
        postgresUp: () => false, // no reserve written (the free space stays put), no CHECKPOINT tried
        clock: systemClock,
        logger: silentLogger,
      });
      const check = guard.check.bind(guard);
      guard.check = () => {
        passes[name as keyof typeof passes]++;
        return check();
      };
      return guard;
    });
    try {
      await Promise.all(guards.map((g) => g.start()));
      expect(guards.map((g) => g.hasRoom())).to.deep.equal([true, true, false]);
      await new Promise((r) => setTimeout(r, 1_500));
    } finally {
      await Promise.all(guards.map((g) => g.stop()));
    }
    // Every 50 ms would be about 30 passes in 1.5 s; once a second, 2 or 3 (the first in start()).
    expect(passes.far, 'passes with 4 GB above the line').to.be.within(2, 5);
    expect(passes.near, 'passes with 20 MB above the line').to.be.at.least(12);
    expect(passes.under, 'passes under the line').to.be.at.least(12);

    const after = { ...passes };
    await new Promise((r) => setTimeout(r, 300));
    expect(passes, 'passes after stop').to.deep.equal(after);
  });
});
