// The work queue: keys deduplicated, one worker per key with a rerun when the key is dirtied mid-run,
// failing keys retried after a growing backoff that resets on success, nothing run while paused; the
// record of the operator's own writes that recognises their watch echoes.

import { expect } from 'chai';
import { WorkQueue } from '../../src/operator/queue.js';
import { OwnWrites } from '../../src/operator/own-writes.js';
import { choosePod, PlacementLedger } from '../../src/operator/placement.js';

const tick = (ms = 0): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('operator work queue', () => {
  it('dedupes keys, runs one worker per key, and reruns a key dirtied while it ran', async () => {
    const runs: string[] = [];
    let running = 0;
    let maxSameKey = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const q = new WorkQueue(
      async (key) => {
        running++;
        maxSameKey = Math.max(maxSameKey, running);
        runs.push(key);
        if (runs.length === 1) await gate;
        running--;
      },
      { workers: 4, baseDelayMs: 1, maxDelayMs: 10 },
      () => undefined,
    );
    q.add('a');
    q.add('a'); // deduped before it starts
    q.setActive(true);
    await tick();
    q.add('a'); // dirtied while running: one rerun after it finishes, not a second worker
    q.add('a');
    release();
    await q.idle();
    expect(runs).to.deep.equal(['a', 'a']);
    expect(maxSameKey).to.equal(1);
    q.stop();
  });

  it('retries a failing key with a growing backoff and resets it on success', async () => {
    const delays: number[] = [];
    let calls = 0;
    const q = new WorkQueue(
      async () => {
        calls++;
        if (calls <= 3) throw new Error('not yet');
      },
      { workers: 1, baseDelayMs: 5, maxDelayMs: 12 },
      (_key, _err, retryIn) => delays.push(retryIn),
    );
    q.setActive(true);
    q.add('k');
    while (calls < 4) await tick(5);
    await q.idle();
    expect(delays).to.deep.equal([5, 10, 12]);
    // After a success the next failure starts from the base delay again.
    calls = 0;
    delays.length = 0;
    q.add('k');
    while (calls < 1) await tick(1);
    await q.idle();
    expect(delays).to.deep.equal([5]);
    q.stop();
  });

  it('holds keys while paused (a replica that is not the leader)', async () => {
    const runs: string[] = [];
    const q = new WorkQueue(async (k) => void runs.push(k), { workers: 2, baseDelayMs: 1, maxDelayMs: 1 }, () => undefined);
    q.add('x');
    q.add('y');
    await tick(5);
    expect(runs).to.deep.equal([]);
    expect(q.length).to.equal(2);
    q.setActive(true);
    await q.idle();
    expect(runs.sort()).to.deep.equal(['x', 'y']);
    q.stop();
  });
});

describe('branch placement', () => {
  it('picks the pod with the fewest databases, counting Branches placed but not yet reported', () => {
    expect(choosePod([
      { pod: 'a', databases: 5, memoryBytes: 1, placed: 5 },
      { pod: 'b', databases: 2, memoryBytes: 9, placed: 2 },
    ])).to.equal('b');
    // Status lags a burst: b reports 0 but already has 3 placed.
    expect(choosePod([
      { pod: 'a', databases: 1, memoryBytes: 1, placed: 1 },
      { pod: 'b', databases: 0, memoryBytes: 1, placed: 3 },
    ])).to.equal('a');
    expect(choosePod([{ pod: 'a', databases: null, memoryBytes: null, placed: 0 }])).to.equal(null);
  });

  it('counts placements made here that the Branch cache does not show yet, once', () => {
    const ledger = new PlacementLedger();
    // ns/b1 is on a in the cache; ns/b2 and ns/b3 were just placed here, the cache has no pod for them yet.
    const cached = new Map<string, string | undefined>([['ns/b1', 'ns/a'], ['ns/b2', undefined], ['ns/b3', undefined]]);
    ledger.record('ns/b2', 'ns/a');
    ledger.record('ns/b3', 'ns/b');
    expect([ledger.placedOn('ns/a', cached), ledger.placedOn('ns/b', cached)]).to.deep.equal([2, 1]);
    // The cache catches up: b2 shows on a; it is not counted twice.
    cached.set('ns/b2', 'ns/a');
    expect(ledger.placedOn('ns/a', cached)).to.equal(2);
    // A placement reset (the pod refused the database) is forgotten.
    ledger.forget('ns/b3');
    expect(ledger.placedOn('ns/b', cached)).to.equal(0);
    // A burst: each choice counts the ones before it, so the Branches spread.
    const fresh = new PlacementLedger();
    const burst = new Map<string, string | undefined>();
    const chosen: string[] = [];
    for (let i = 0; i < 6; i++) {
      burst.set(`ns/x${i}`, undefined);
      const pod = choosePod(['ns/a', 'ns/b'].map((p) => ({ pod: p, databases: 0, memoryBytes: 1, placed: fresh.placedOn(p, burst) })))!;
      fresh.record(`ns/x${i}`, pod);
      chosen.push(pod);
    }
    expect(chosen).to.deep.equal(['ns/a', 'ns/b', 'ns/a', 'ns/b', 'ns/a', 'ns/b']);
  });
});

describe("the operator's own writes (watch echoes)", () => {
  const clock = { t: 0, now: () => clock.t, monotonic: () => clock.t };

  it('skips an echo the same pass superseded, trusts the last one once, and nothing else', () => {
    const writes = new OwnWrites(clock, 60_000);
    // A pass that wrote the finalizer, then Creating, then Ready.
    writes.wrote('ns/b', '11');
    writes.wrote('ns/b', '12');
    writes.wrote('ns/b', '13');
    expect(writes.classify('ns/b', '10')).to.equal('none'); // older than the pass: someone else's state
    writes.wrote('ns/b', '11');
    writes.wrote('ns/b', '12');
    writes.wrote('ns/b', '13');
    expect(writes.classify('ns/b', '11')).to.equal('stale');
    expect(writes.classify('ns/b', '12')).to.equal('stale');
    expect(writes.classify('ns/b', '13')).to.equal('latest');
    // Said once: a resync of the same object later verifies it again.
    expect(writes.classify('ns/b', '13')).to.equal('none');
    // A write by someone else after ours: not ours, and the record goes.
    writes.wrote('ns/b', '20');
    writes.wrote('ns/b', '21');
    expect(writes.classify('ns/b', '22')).to.equal('none');
    expect(writes.classify('ns/b', '20')).to.equal('none');
    expect(writes.size).to.equal(0);
    // Other keys are apart.
    writes.wrote('ns/a', '30');
    expect(writes.classify('ns/b', '30')).to.equal('none');
    expect(writes.classify('ns/a', '30')).to.equal('latest');
  });

  it('stops trusting a record after maxAgeMs (a stalled watch must not keep a key waiting)', () => {
    const writes = new OwnWrites(clock, 60_000);
    clock.t = 1_000;
    writes.wrote('ns/b', '41');
    writes.wrote('ns/b', '42');
    clock.t = 30_000;
    expect(writes.classify('ns/b', '41')).to.equal('stale');
    clock.t = 61_000;
    expect(writes.classify('ns/b', '41')).to.equal('none');
    expect(writes.size).to.equal(0);
    writes.wrote('ns/b', '43');
    clock.t = 200_000;
    expect(writes.classify('ns/b', '43')).to.equal('none');
  });
});
