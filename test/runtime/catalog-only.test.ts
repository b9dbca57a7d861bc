// The runtime's superuser works inside databases whose objects others own: the activity vacuum in a
// tenant's database, the credentials' grants, a template's seal. A tenant (or a template's author)
// who may create in public can define an operator that matches the runtime's statements' argument
// types exactly where pg_catalog's needs a cast; with the default search_path PostgreSQL calls it,
// as superuser. Each test arms such traps and checks that the runtime did its work there and that
// no trap ran (sql-client.ts CATALOG_ONLY).

import { expect } from 'chai';
import { waitFor } from '../helpers/commands.js';
import { connectClient, createTemplateDatabase, startHarness, type Harness } from './databases-harness.js';

/** Operators that would stand in for pg_catalog's in the runtime's statements; each call leaves a row. */
const TRAPS = `
CREATE TABLE public.seen (who text, op text);
CREATE FUNCTION public.trap_times(numeric, real) RETURNS numeric LANGUAGE plpgsql
  AS $$ BEGIN INSERT INTO public.seen VALUES (current_user, '*'); RETURN 0; END $$;
CREATE OPERATOR public.* (LEFTARG = numeric, RIGHTARG = real, FUNCTION = public.trap_times);
CREATE FUNCTION public.trap_gt(bigint, numeric) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN INSERT INTO public.seen VALUES (current_user, '>'); RETURN false; END $$;
CREATE OPERATOR public.> (LEFTARG = bigint, RIGHTARG = numeric, FUNCTION = public.trap_gt);
CREATE FUNCTION public.trap_not_like(name, name) RETURNS boolean LANGUAGE plpgsql
  AS $$ BEGIN INSERT INTO public.seen VALUES (current_user, '!~~'); RETURN false; END $$;
CREATE OPERATOR public.!~~ (LEFTARG = name, RIGHTARG = name, FUNCTION = public.trap_not_like);
`;

describe("runtime: a tenant's operators never run as the runtime's superuser", function () {
  this.timeout(90_000);
  let h: Harness;

  before(async function () {
    h = await startHarness({ settings: { graceSeconds: 600, janitorIntervalMs: 200, vacuumDelayMs: 500, poolSize: 0 }, wire: true });
    await h.admin.query('CREATE ROLE mallory LOGIN CREATEDB');
    await createTemplateDatabase(h, 'tpl_plain');
    await h.dbs.operations.seal('tpl_plain', 'postgres');
  });

  after(async function () {
    await h?.stop();
  });

  /** `sql`'s rows, read as the tenant on a connection of its own. */
  async function asMallory<T>(database: string, sql: string): Promise<T[]> {
    const c = await connectClient(h, database, 'mallory');
    try {
      return (await c.query(sql)).rows;
    } finally {
      await c.end();
    }
  }

  const seen = (database: string): Promise<unknown[]> => asMallory(database, 'SELECT who, op FROM seen');

  it('the activity vacuum in a tenant database', async function () {
    const db = 'tdb_tpl_plain__vac';
    const c = await connectClient(h, db, 'mallory');
    await c.query(TRAPS);
    await c.query('CREATE TABLE churn (id int); INSERT INTO churn SELECT generate_series(1, 1000); DELETE FROM churn');
    // The traps are armed: the tenant's own statements call them.
    await c.query("SELECT 1::bigint > 0.5, 0.2 * 1::real, 'a'::name NOT LIKE 'b'::name");
    expect((await c.query('SELECT op FROM seen ORDER BY op')).rows.map((r: { op: string }) => r.op)).to.deep.equal(['!~~', '*', '>']);
    await c.query('DELETE FROM seen');
    await c.end();
    // Until the vacuum ran, or a trap did (which answers that nothing is due, so the vacuum never would).
    const look = async (): Promise<{ vacuumed: boolean; trapped: number }> =>
      (await asMallory<{ vacuumed: boolean; trapped: number }>(db, "SELECT (SELECT last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE relname = 'churn') AS vacuumed, (SELECT count(*)::int FROM seen) AS trapped"))[0]!;
    await waitFor('the runtime to vacuum churn (or a trap to run)', async () => {
      const now = await look();
      return now.vacuumed || now.trapped > 0;
    }, 60_000);
    expect(await seen(db)).to.deep.equal([]);
    expect((await look()).vacuumed).to.equal(true);
  });

  it("a credential's grants inside a database the tenant owns", async function () {
    const db = 'tdb_tpl_plain__cred';
    const c = await connectClient(h, db, 'mallory');
    await c.query(TRAPS);
    await c.end();
    const credential = await h.dbs.operations.createCredential(db);
    const t = await connectClient(h, db, credential.user).catch((err: Error) => {
      throw new Error(`the credential ${credential.user} cannot connect: ${err.message}`);
    });
    await t.end();
    expect(await seen(db)).to.deep.equal([]);
  });

  it('sealing a template its author armed', async function () {
    await createTemplateDatabase(h, 'tpl_armed', 'mallory');
    const c = await connectClient(h, 'tpl_armed', 'mallory');
    await c.query(TRAPS);
    await c.end();
    await h.dbs.operations.seal('tpl_armed', 'postgres');
    expect(await seen('tdb_tpl_armed__a')).to.deep.equal([]);
  });
});
