// The janitor's lifecycle tasks at scale, counting work: with 10,000 minted databases, a pass reads
// the records of the due databases only (the deadline index, expiries.ts), not every record; an idle
// pass reads none and does not ask the engine for its session counts. Then the same decisions as
// before through the index: a session keeps a database, its end starts grace, a pin keeps it, a TTL
// ends it whatever its sessions, a route postpones it. The drops themselves are counted by a dropper
// that forgets the record as the real one does (janitor.test.ts drops real databases).

import { expect } from 'chai';
import type { Clock } from '../../src/clock.js';
import { silentLogger } from '../../src/log.js';
import { Counters } from '../../src/runtime/databases/counters.js';
import type { Dropper, EngineSessions } from '../../src/runtime/databases/dropper.js';
import type { JanitorTask } from '../../src/runtime/databases/janitor.js';
import { lifecycleTasks } from '../../src/runtime/databases/janitor-tasks.js';
import { newDatabaseRecord, type DatabaseRecord } from '../../src/runtime/databases/records.js';
import { Registry } from '../../src/runtime/databases/registry.js';
import { SessionCounts } from '../../src/runtime/databases/session-counts.js';

const GRACE_MS = 15_000;
const START = 1_700_000_000_000;

interface Setup {
  registry: Registry;
  sessions: SessionCounts;
  clock: Clock & { advance(ms: number): void };
  dropped: string[];
  /** Records read from registry.databases (gets, and every element an iteration yields). */
  reads: () => number;
  engineAsked: () => number;
  engineCounts: Map<string, number>;
  pass(): Promise<void>;
}

function setup(batch = 64): Setup {
  let now = START;
  const clock = { now: () => now, monotonic: () => now, advance: (ms: number) => void (now += ms) };
  const registry = new Registry();
  // The session observer's part (session-observer.ts): a database's first session and last end are recorded.
  const sessions = new SessionCounts({
    busy: (db) => registry.update(db, { inUse: true }),
    idle: (db) => registry.update(db, { inUse: false, lastSessionEnd: clock.now() }),
  });
  const dropped: string[] = [];
  const dropper = {
    closing: false,
    async drop(name: string) {
      dropped.push(name);
      registry.forget(name);
    },
  } as unknown as Dropper;
  let engineAsked = 0;
  const engineCounts = new Map<string, number>();
  const engine: EngineSessions = {
    terminateSessions: () => 0,
    sessionsPerDatabase: () => {
      engineAsked++;
      return new Map(engineCounts);
    },
    closeIdleBackends: () => 0,
  };
  const tasks: JanitorTask[] = lifecycleTasks({
    prefix: 'tdb_',
    graceMs: GRACE_MS,
    protectMs: 5000,
    batch,
    registry,
    sessions,
    engine,
    dropper,
    counters: new Counters(),
    clock,
    logger: silentLogger,
  });
  let reads = 0;
  const map = registry.databases;
  const get = map.get.bind(map);
  map.get = (key: string) => (reads++, get(key));
  for (const method of ['values', 'entries', 'keys', Symbol.iterator] as const) {
    const original = (map[method] as () => IterableIterator<unknown>).bind(map);
    (map as unknown as Record<string | symbol, unknown>)[method] = function* () {
      for (const item of original()) {
        reads++;
        yield item;
      }
    };
  }
  const forEach = map.forEach.bind(map);
  map.forEach = (fn, thisArg) => forEach((v, k, m) => (reads++, fn.call(thisArg, v, k, m)));
  return {
    registry,
    sessions,
    clock,
    dropped,
    reads: () => reads,
    engineAsked: () => engineAsked,
    engineCounts,
    async pass() {
      for (const t of tasks) await t.run();
    },
  };
}

function minted(name: string, at: number, fields: Partial<DatabaseRecord> = {}): DatabaseRecord {
  return { ...newDatabaseRecord({ name, kind: 'ephemeral', template: 'tpl', generation: 1, owner: 'postgres', createdAt: at }), ...fields };
}

describe('runtime: janitor deadlines (work counted)', function () {
  it('with 10,000 databases a pass reads only the due ones, and an idle pass reads none', async function () {
    const s = setup();
    const now = s.clock.now();
    for (let i = 0; i < 9_980; i++) s.registry.put(minted(`tdb_tpl__live${i}`, now - 60_000, { lastSessionEnd: now - 1000 }));
    for (let i = 0; i < 10; i++) s.registry.put(minted(`tdb_tpl__pinned${i}`, now - 3_600_000, { pinned: true, lastSessionEnd: now - 3_600_000 }));
    for (let i = 0; i < 4; i++) s.registry.put(minted(`tdb_tpl__ttl${i}`, now - 60_000, { expiresAt: now - 1 - i, pinned: true }));
    for (let i = 0; i < 6; i++) s.registry.put(minted(`tdb_tpl__idle${i}`, now - 60_000, { lastSessionEnd: now - GRACE_MS - i }));
    expect(s.registry.databases.size).to.equal(10_000);
    const before = s.reads();

    await s.pass();
    expect([...s.dropped].sort()).to.deep.equal([...[0, 1, 2, 3].map((i) => `tdb_tpl__ttl${i}`), ...[0, 1, 2, 3, 4, 5].map((i) => `tdb_tpl__idle${i}`)].sort());
    const firstPass = s.reads() - before;
    expect(firstPass, 'records read by a pass with 10 due among 10,000').to.be.at.most(3 * 10);
    expect(s.engineAsked()).to.equal(1);
    // Earliest deadline first within each task.
    expect(s.dropped.slice(0, 4)).to.deep.equal(['tdb_tpl__ttl3', 'tdb_tpl__ttl2', 'tdb_tpl__ttl1', 'tdb_tpl__ttl0']);

    // Idle: nothing due. Nothing read, the engine not asked.
    const idleBefore = s.reads();
    for (let i = 0; i < 10; i++) {
      s.clock.advance(1000);
      await s.pass();
    }
    expect(s.reads() - idleBefore, 'records read by ten idle passes').to.equal(0);
    expect(s.engineAsked()).to.equal(1);
    expect(s.dropped).to.have.length(10);

    // Past their grace, the 9,980 come due: a batch (64) per pass, reading about what it drops.
    s.clock.advance(GRACE_MS);
    const dueBefore = s.reads();
    await s.pass();
    expect(s.dropped).to.have.length(10 + 64);
    expect(s.reads() - dueBefore).to.be.at.most(3 * 64);
  });

  it('keeps a database while a session is open; its end starts --grace; the engine still counting one holds it too', async function () {
    const s = setup();
    s.registry.put(minted('tdb_tpl__a', s.clock.now()));
    s.sessions.started('tdb_tpl__a');
    s.clock.advance(GRACE_MS * 10);
    await s.pass();
    expect(s.dropped).to.deep.equal([]);
    s.sessions.ended('tdb_tpl__a');
    s.clock.advance(GRACE_MS - 1);
    await s.pass();
    expect(s.dropped).to.deep.equal([]);
    // Due now, but the engine still counts a session there (one its observer was not told of).
    s.clock.advance(1);
    s.engineCounts.set('tdb_tpl__a', 1);
    await s.pass();
    await s.pass();
    expect(s.dropped).to.deep.equal([]);
    s.engineCounts.clear();
    await s.pass();
    expect(s.dropped).to.deep.equal(['tdb_tpl__a']);
  });

  it('a pin keeps a database; an unpin that restarts grace lets it go after --grace', async function () {
    const s = setup();
    s.registry.put(minted('tdb_tpl__p', s.clock.now(), { pinned: true }));
    s.clock.advance(GRACE_MS * 10);
    await s.pass();
    expect(s.dropped).to.deep.equal([]);
    s.registry.update('tdb_tpl__p', { pinned: false, lastSessionEnd: s.clock.now() });
    await s.pass();
    expect(s.dropped).to.deep.equal([]);
    s.clock.advance(GRACE_MS);
    await s.pass();
    expect(s.dropped).to.deep.equal(['tdb_tpl__p']);
  });

  it('a TTL ends a database whatever its sessions and pin; a TTL moved earlier is seen at once', async function () {
    const s = setup();
    const now = s.clock.now();
    s.registry.put(minted('tdb_tpl__t', now, { expiresAt: now + 3_600_000, pinned: true }));
    s.sessions.started('tdb_tpl__t');
    s.clock.advance(GRACE_MS * 10);
    await s.pass();
    expect(s.dropped).to.deep.equal([]);
    s.registry.update('tdb_tpl__t', { expiresAt: s.clock.now() + 1000 });
    s.clock.advance(1000);
    await s.pass();
    expect(s.dropped).to.deep.equal(['tdb_tpl__t']);
  });

  it('a route after the last session end protects the database until the next session shows', async function () {
    const s = setup();
    s.registry.put(minted('tdb_tpl__r', s.clock.now(), { lastSessionEnd: s.clock.now() }));
    s.clock.advance(GRACE_MS - 1000);
    s.registry.lastRouted.set('tdb_tpl__r', s.clock.now());
    s.clock.advance(1000);
    await s.pass();
    expect(s.dropped, 'protected for 5 s after the route').to.deep.equal([]);
    s.clock.advance(4000);
    await s.pass();
    expect(s.dropped).to.deep.equal(['tdb_tpl__r']);
  });

  it('a drop that fails puts the rest of the batch back: the next pass drops them', async function () {
    const s = setup();
    const now = s.clock.now();
    for (let i = 0; i < 3; i++) s.registry.put(minted(`tdb_tpl__f${i}`, now, { expiresAt: now + i }));
    const tasks = lifecycleTasks({
      prefix: 'tdb_', graceMs: GRACE_MS, protectMs: 5000, batch: 64, registry: s.registry, sessions: s.sessions,
      engine: { terminateSessions: () => 0, sessionsPerDatabase: () => new Map(), closeIdleBackends: () => 0 },
      dropper: {
        closing: false,
        async drop(name: string) {
          if (name === 'tdb_tpl__f1' && s.dropped.length < 2) {
            s.dropped.push('failed');
            throw new Error('PostgreSQL went away');
          }
          s.dropped.push(name);
          s.registry.forget(name);
        },
      } as unknown as Dropper,
      counters: new Counters(), clock: s.clock, logger: silentLogger,
    });
    s.clock.advance(10);
    const err = await tasks[0]!.run().then(() => null, (e: Error) => e);
    expect(err?.message).to.equal('PostgreSQL went away');
    expect(s.dropped).to.deep.equal(['tdb_tpl__f0', 'failed']);
    await tasks[0]!.run();
    expect(s.dropped).to.deep.equal(['tdb_tpl__f0', 'failed', 'tdb_tpl__f1', 'tdb_tpl__f2']);
  });
});
