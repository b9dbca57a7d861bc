// A database holding a prepared transaction (PREPARE TRANSACTION, with max_prepared_transactions > 0)
// cannot be dropped: PostgreSQL refuses to rename it (after waiting 5 s for it to go) and refuses
// DROP DATABASE ... WITH (FORCE). Before, a drop spent those 5 s in the rename, logged a wrong reason
// and failed with PostgreSQL's bare 55006 from the in-place drop, its sessions already ended; the
// janitor's pass failed the same way every second. Now the explicit drops (pgx_drop_database, the
// API's operation) answer at once with 55006 naming the prepared transaction and how to finish it,
// without a rename tried or a session ended; the janitor logs it, drops the rest of its batch and
// comes back later. It never rolls a prepared transaction back itself.

import { expect } from 'chai';
import type { Logger } from '../../src/log.js';
import { waitFor } from '../helpers/commands.js';
import { connectClient, createTemplateDatabase, databaseExists, FAST, rejection, startHarness, type Harness } from './databases-harness.js';

const AS_POSTGRES = { user: 'postgres', database: 'postgres' };

interface Line {
  event: string;
  fields: Record<string, unknown>;
}

function recordingLogger(): Logger & { lines: Line[] } {
  const lines: Line[] = [];
  const at = (event: string, fields: Record<string, unknown> = {}): void => void lines.push({ event, fields });
  const logger = { lines, error: at, warn: at, info: at, debug: at, child: () => logger };
  return logger;
}

describe('runtime: dropping a database a prepared transaction holds', function () {
  this.timeout(120_000);
  let h: Harness;
  const log = recordingLogger();

  before(async function () {
    h = await startHarness({ settings: { ...FAST, poolSize: 0 }, wire: true, runtime: { pgSettings: { max_prepared_transactions: '4' } }, logger: log });
    await createTemplateDatabase(h, 'tpl_2pc');
    await h.dbs.operations.seal('tpl_2pc', 'postgres');
  });

  after(async function () {
    await h?.stop();
  });

  /** Leaves a prepared transaction `gid` in `name` (an insert into users, not committed yet). */
  async function prepare(name: string, gid: string): Promise<void> {
    const c = await connectClient(h, name);
    const literal = gid.replace(/'/g, "''");
    await c.query(`BEGIN; INSERT INTO users (email) VALUES ('${literal}@example.com'); PREPARE TRANSACTION '${literal}'`);
    await c.end();
  }

  /** Runs `sql` connected straight to `database` (not through the engine). */
  async function direct(database: string, sql: string): Promise<string[][]> {
    const c = await h.rt.runtime.supervisor.connect(database, 'postgres');
    try {
      return (await c.query(sql)).rows as string[][];
    } finally {
      await c.close();
    }
  }

  const linesAbout = (event: string, database: string): Line[] => log.lines.filter((l) => l.event === event && l.fields.database === database);

  it('pgx_drop_database answers 55006 at once, naming the transaction and COMMIT/ROLLBACK PREPARED; no rename tried, no session ended', async function () {
    const name = 'tdb_tpl_2pc__explicit';
    const c = await connectClient(h, 'tdb_tpl_2pc__explicit');
    await h.dbs.operations.setPinned(name, true, 'postgres');
    await prepare(name, 'gid_explicit');
    const err = await rejection(h.dbs.control.call('drop_database', [name], AS_POSTGRES));
    expect(err.sqlstate).to.equal('55006');
    expect(err.message).to.equal(`database "${name}" is being used by prepared transactions`);
    expect((err as { detail?: string }).detail).to.match(/^There is 1 prepared transaction using the database: 'gid_explicit' \(prepared by role "postgres" at \d{4}-/);
    expect(err.hint).to.equal(`Connect to "${name}" and finish it: COMMIT PREPARED 'gid_explicit' keeps its changes, ROLLBACK PREPARED 'gid_explicit' discards them. Then drop the database again.`);
    // Refused before the rename (which would have waited 5 s, then dropped in place) and before the sessions.
    expect(linesAbout('database-drop-in-place', name)).to.deep.equal([]);
    expect(h.terminations.filter((t) => t.database === name)).to.deep.equal([]);
    expect((await c.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    expect(await databaseExists(h, name)).to.equal(true);
    expect(h.dbs.operations.database(name)).to.not.equal(null);

    // The same through the operation the HTTP API calls (DELETE /v1/databases/NAME: 409, 55006).
    const viaApi = await rejection(h.dbs.operations.drop(name, AS_POSTGRES));
    expect(viaApi.sqlstate).to.equal('55006');
    expect(viaApi.hint).to.contain("COMMIT PREPARED 'gid_explicit'");

    // Finished as the hint says, its changes kept, the drop goes through.
    await direct(name, "COMMIT PREPARED 'gid_explicit'");
    expect((await c.query("SELECT count(*)::int AS n FROM users WHERE email = 'gid_explicit@example.com'")).rows).to.deep.equal([{ n: 1 }]);
    await c.end();
    expect(await h.dbs.control.call('drop_database', [name], AS_POSTGRES)).to.equal(name);
    expect(await databaseExists(h, name)).to.equal(false);
  });

  it('names every prepared transaction when there are several', async function () {
    const name = 'tdb_tpl_2pc__several';
    await connectClient(h, name).then((c) => c.end());
    await h.dbs.operations.setPinned(name, true, 'postgres');
    await prepare(name, 'gid_one');
    await prepare(name, "gid_it's");
    const err = await rejection(h.dbs.control.call('drop_database', [name], AS_POSTGRES));
    expect(err.sqlstate).to.equal('55006');
    expect((err as { detail?: string }).detail).to.match(/^There are 2 prepared transactions using the database: 'gid_one' .*, 'gid_it''s' /);
    expect(err.hint).to.equal(`Connect to "${name}" and finish each: COMMIT PREPARED or ROLLBACK PREPARED 'gid_one', 'gid_it''s'. Then drop the database again.`);
    await direct(name, "ROLLBACK PREPARED 'gid_one'");
    await direct(name, "ROLLBACK PREPARED 'gid_it''s'");
    await h.dbs.control.call('drop_database', [name], AS_POSTGRES);
    expect(await databaseExists(h, name)).to.equal(false);
  });

  it('the janitor logs the refusal, drops the rest of its batch, keeps the prepared transaction, and drops the database once it is finished', async function () {
    const held = 'tdb_tpl_2pc__held';
    const plain = 'tdb_tpl_2pc__plain';
    await connectClient(h, held).then((c) => c.end());
    await prepare(held, 'gid_janitor');
    // Both expire at once; the held one first in the batch (its deadline is earlier).
    await h.dbs.operations.setTtl(held, 1, 'postgres');
    await h.dbs.operations.create('tpl_2pc', { name: plain, user: 'postgres', settings: { ttlSeconds: 1.5 } });
    await waitFor('the plain database to be dropped', async () => !(await databaseExists(h, plain)));
    await waitFor('the refusal to be logged', () => linesAbout('database-drop-refused', held).length > 0);
    const refused = linesAbout('database-drop-refused', held)[0]!.fields;
    expect(refused.reason).to.equal(`database "${held}" is being used by prepared transactions`);
    expect(refused.hint).to.contain("COMMIT PREPARED 'gid_janitor'").and.contain("ROLLBACK PREPARED 'gid_janitor'");
    expect(refused.retryInSeconds).to.equal(1);
    expect(log.lines.filter((l) => l.event === 'janitor-task-failed'), 'no pass failed').to.deep.equal([]);
    expect(linesAbout('database-drop-in-place', held)).to.deep.equal([]);
    // Not rolled back behind anyone's back: the transaction is still prepared, the database still there.
    expect(await direct('postgres', "SELECT gid FROM pg_prepared_xacts WHERE database = 'tdb_tpl_2pc__held'")).to.deep.equal([['gid_janitor']]);
    expect(await databaseExists(h, held)).to.equal(true);

    await direct(held, "ROLLBACK PREPARED 'gid_janitor'");
    // The name goes at the rename to pgx_trash_<oid>; the drop is logged just after it.
    await waitFor('the janitor to drop it once finished', () => linesAbout('database-dropped', held).length > 0);
    expect(linesAbout('database-dropped', held)).to.have.length(1);
    expect(await databaseExists(h, held)).to.equal(false);
  });
});
