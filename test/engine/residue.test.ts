// The byte scanner that decides whether a session's backend may be pooled (src/engine/residue.ts):
// examples, and a property check against a plain regular-expression statement of the same rule.

import { expect } from 'chai';
import fc from 'fast-check';
import { mayLeaveResidue } from '../../src/engine/residue.js';

function scan(sql: string, pad = ''): boolean {
  // The scanner reads a range of a larger buffer (a frame's body): surround the text with other bytes.
  const buf = Buffer.from(`${pad}${sql}${pad}`, 'latin1');
  return mayLeaveResidue(buf, pad.length, pad.length + Buffer.byteLength(sql, 'latin1'));
}

/** The rule, stated plainly: temp or load anywhere; a word starting set (or reset) and a dot. */
function reference(sql: string): boolean {
  if (/temp|load/i.test(sql)) return true;
  return /(^|[^a-z0-9_\x80-\xff])(re)?set/i.test(sql) && sql.includes('.');
}

describe('engine: session residue that DISCARD ALL leaves', () => {
  it('flags what leaves state behind', () => {
    for (const sql of [
      'CREATE TEMP TABLE t (id int)',
      'create temporary table t (id int)',
      'SELECT * FROM pg_temp.t',
      "LOAD 'auto_explain'",
      "SET myapp.tenant = 'acme'",
      "set local my.x to 1",
      'RESET myapp.tenant',
      "SELECT set_config('myapp.tenant', 'acme', false)",
      'SET "MyApp"."Tenant" = 1',
    ]) {
      expect(scan(sql), sql).to.equal(true);
    }
  });

  it('lets ordinary sessions keep their pooled backend', () => {
    for (const sql of [
      'SELECT 1',
      'SELECT abalance FROM pgbench_accounts WHERE aid = $1',
      "SET statement_timeout = '5s'",
      'SET search_path TO app, public',
      'RESET ALL',
      'UPDATE items SET qty = 1 WHERE id = 2',
      'SELECT * FROM app.items OFFSET 10',
      'SELECT 1.5',
    ]) {
      expect(scan(sql), sql).to.equal(false);
    }
  });

  it('reads only its range of the buffer', () => {
    expect(scan('SELECT 1', 'temp')).to.equal(false);
    expect(scan('SET x = 1', '.')).to.equal(false);
    expect(scan('SET a.b = 1', 'zz')).to.equal(true);
  });

  it('agrees with the plain statement of the rule on any text', () => {
    const alphabet = fc.constantFrom(...'tempLOADsetRE. _x1"\''.split(''), 'é', '\0');
    fc.assert(
      fc.property(fc.array(alphabet, { maxLength: 40 }).map((cs) => cs.join('')), fc.constantFrom('', 'q', '.'), (sql, pad) => {
        expect(scan(sql, pad), JSON.stringify(sql)).to.equal(reference(sql));
      }),
      { numRuns: 5000 },
    );
  });
});
