// Tombstones on their own, with a clock the test moves: a buried name refuses with its reason until
// --tombstone has passed, then the janitor's task forgets it (in memory and on disk) and it mints again.

import { expect } from 'chai';
import type { MetadataStore } from '../../src/runtime/databases/metadata.js';
import type { Tombstone } from '../../src/runtime/databases/records.js';
import { Tombstones } from '../../src/runtime/databases/tombstones.js';

/** The three calls Tombstones makes of the metadata store, on a Map standing in for the table. */
function tableOnMap(rows: Map<string, Tombstone>): MetadataStore {
  return {
    loadTombstones: async () => [...rows.values()],
    saveTombstone: async (t: Tombstone) => void rows.set(t.name, t),
    deleteTombstones: async (names: string[]) => names.forEach((n) => rows.delete(n)),
  } as unknown as MetadataStore;
}

describe('runtime: tombstones', function () {
  it('refuse a buried name with 3D000 and the reason until --tombstone has passed, then are forgotten', async function () {
    let now = Date.UTC(2026, 11, 1, 12, 3, 4);
    const clock = { now: () => now, monotonic: () => now };
    const table = new Map<string, Tombstone>();
    const tombstones = new Tombstones(tableOnMap(table), 60_000, clock);
    await tombstones.bury('tdb_tpl__a', 'its ttl expired');
    const err = tombstones.refusal('tdb_tpl__a')!;
    expect(err.sqlstate).to.equal('3D000');
    expect(err.message).to.equal('database "tdb_tpl__a" was dropped at 2026-12-01 12:03:04 UTC (its ttl expired)');
    expect(tombstones.refusal('tdb_tpl__b')).to.equal(null);

    // Reloaded from the table (a restart): the same answer.
    const reloaded = new Tombstones(tableOnMap(table), 60_000, clock);
    await reloaded.load();
    expect(reloaded.refusal('tdb_tpl__a')?.message).to.equal(err.message);

    now += 59_000;
    expect(await reloaded.task(10).run()).to.equal(0);
    now += 1_000;
    expect(reloaded.refusal('tdb_tpl__a')).to.equal(null);
    expect(await reloaded.task(10).run()).to.equal(1);
    expect(table.size).to.equal(0);
  });

  it('bury only databases with a TTL or created by request', function () {
    const base = { name: 'x', kind: 'ephemeral', template: 't', generation: 1, owner: 'o', createdAt: 0, lastSessionEnd: null, inUse: false, pinned: false, connectionLimit: null, memoryLimitMb: null } as const;
    expect(Tombstones.reasonFor({ ...base, expiresAt: null, origin: 'connect' }, 'r')).to.equal(null);
    expect(Tombstones.reasonFor({ ...base, expiresAt: 5, origin: 'connect' }, 'r')).to.equal('r');
    expect(Tombstones.reasonFor({ ...base, expiresAt: null, origin: 'request' }, 'r')).to.equal('r');
    expect(Tombstones.reasonFor(undefined, 'r')).to.equal(null);
  });

  it('keep none with --tombstone 0', async function () {
    const tombstones = new Tombstones(tableOnMap(new Map()), 0, { now: () => 1, monotonic: () => 1 });
    await tombstones.bury('tdb_tpl__a', 'its ttl expired');
    expect(tombstones.refusal('tdb_tpl__a')).to.equal(null);
  });
});
