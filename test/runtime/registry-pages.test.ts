// Registry.databasesAfter: the sorted index of minted names that pages GET /v1/databases, kept in step
// with every way a name enters or leaves the registry (load, put, a spare claimed or put back, forget).
// test/api/paging.test.ts pages a real runtime; this checks the index against a plain sort.

import { expect } from 'chai';
import { newDatabaseRecord, type DatabaseRecord } from '../../src/runtime/databases/records.js';
import { Registry } from '../../src/runtime/databases/registry.js';

const record = (name: string, kind: 'ephemeral' | 'spare' = 'ephemeral'): DatabaseRecord =>
  newDatabaseRecord({ name, kind, template: 'tpl', generation: 1, owner: 'postgres', createdAt: 0 });

/** Every page of `limit` from the start, joined. */
function pageAll(r: Registry, limit: number): string[] {
  const out: string[] = [];
  let after: string | null = null;
  for (;;) {
    const page = r.databasesAfter(after, limit);
    out.push(...page.items.map((d) => d.name));
    if (!page.more) return out;
    after = page.items.at(-1)!.name;
  }
}

describe('runtime: the registry pages minted databases by name', () => {
  it('matches a sort of the names through loads, puts, spares claimed and put back, and forgets', () => {
    const r = new Registry();
    // A deterministic shuffle: names arrive out of order.
    const names = Array.from({ length: 300 }, (_, i) => `tdb_tpl__${((i * 7919) % 300).toString(36)}_${i % 3 === 0 ? 'z' : 'a'}`);
    r.load([], names.slice(0, 100).map((n) => record(n)));
    for (const n of names.slice(100, 200)) r.put(record(n));
    for (const n of names.slice(200)) r.put(record(n, 'spare'));
    // A spare claimed under its own name becomes minted; a minted name put again is not listed twice.
    for (const n of names.slice(200, 250)) r.put(record(n));
    for (const n of names.slice(0, 20)) r.put({ ...record(n), pinned: true });
    for (const n of names.slice(20, 60)) r.forget(n);
    for (const n of names.slice(60, 70)) r.put(record(n, 'spare'));
    const expected = [...r.databases.keys()].sort((a, b) => (a < b ? -1 : a > b ? 1 : 0));
    expect(expected.length).to.equal(300 - 40 - 10 - 50);
    for (const limit of [1, 7, 100, 1000]) expect(pageAll(r, limit), `limit ${limit}`).to.deep.equal(expected);
    // After a name that is not (or no longer) there: the page starts at the next one.
    const gone = names[25]!;
    expect(r.databasesAfter(gone, 1).items[0]?.name).to.equal(expected.find((n) => n > gone));
    expect(r.databasesAfter(expected.at(-1)!, 5)).to.deep.equal({ items: [], more: false });
    expect(r.databasesAfter(null, expected.length).more).to.equal(false);
    expect(r.databasesAfter(null, expected.length - 1).more).to.equal(true);
  });
});
