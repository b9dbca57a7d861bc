// Vacuum where there was activity (src/runtime/vacuum.ts): with autovacuum's launcher slowed down to
// keep a thousand idle databases cheap, a database that had sessions still gets its dead rows vacuumed,
// by the runtime, soon after; one without enough dead rows is left alone.

import { expect } from 'chai';
import { waitFor } from '../helpers/commands.js';
import { connectClient, createTemplateDatabase, startHarness, type Harness } from './databases-harness.js';

describe('runtime: vacuum after activity', function () {
  this.timeout(90_000);
  let h: Harness;

  before(async function () {
    h = await startHarness({ settings: { graceSeconds: 600, janitorIntervalMs: 200, vacuumDelayMs: 500 }, wire: true });
    await createTemplateDatabase(h, 'tpl_vac');
    // Tables made in the template: a minted copy starts with planner statistics (reltuples) and no
    // pending or recorded activity, so its statistics say exactly what the test does in it.
    const t = await connectClient(h, 'tpl_vac');
    await t.query('CREATE TABLE churn (id int PRIMARY KEY, v text); INSERT INTO churn SELECT g, md5(g::text) FROM generate_series(1, 20000) g');
    await t.query('CREATE TABLE calm (id int PRIMARY KEY); INSERT INTO calm SELECT generate_series(1, 20000)');
    await t.end();
    await h.dbs.operations.seal('tpl_vac', 'postgres');
  });

  after(async function () {
    await h?.stop();
  });

  async function lastVacuum(database: string, table: string): Promise<{ vacuumed: boolean; dead: number }> {
    const c = await connectClient(h, database);
    try {
      const { rows } = await c.query<{ vacuumed: boolean; dead: number }>(
        'SELECT last_vacuum IS NOT NULL AS vacuumed, n_dead_tup::int AS dead FROM pg_stat_user_tables WHERE relname = $1',
        [table],
      );
      return rows[0]!;
    } finally {
      await c.end();
    }
  }

  it('the profile slows the launcher down (naptime 1h) but keeps autovacuum on', async function () {
    const { rows } = await h.admin.query("SELECT current_setting('autovacuum'), current_setting('autovacuum_naptime')");
    expect(rows[0]).to.deep.equal(['on', '1h']);
  });

  it('vacuums a table with dead rows after its session ended; leaves a table without them alone', async function () {
    const db = 'tdb_tpl_vac__dead';
    const c = await connectClient(h, db);
    await c.query('DELETE FROM churn WHERE id <= 10000; DELETE FROM calm WHERE id <= 10');
    await c.end();
    await waitFor('the runtime to vacuum churn', async () => (await lastVacuum(db, 'churn')).vacuumed, 60_000);
    expect((await lastVacuum(db, 'churn')).dead).to.equal(0);
    expect((await lastVacuum(db, 'calm')).vacuumed).to.equal(false);
  });

  it('vacuums a database whose session stays open', async function () {
    const db = 'tdb_tpl_vac__busy';
    const c = await connectClient(h, db);
    try {
      await c.query('UPDATE churn SET v = v || 1');
      await waitFor('the runtime to vacuum the busy database', async () => (await lastVacuum(db, 'churn')).vacuumed && (await lastVacuum(db, 'churn')).dead === 0, 60_000);
    } finally {
      await c.end();
    }
  });
});
