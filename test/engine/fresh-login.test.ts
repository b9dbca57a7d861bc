// A pooled backend must be exactly a fresh login (docs/limits.md, "What a tenant can and cannot do").
// Each case gives a real role an earlier session through the engine (so an idle pooled backend of its
// key waits), changes what PostgreSQL checks or applies at login, and connects again: through the
// engine the client must get what a direct login to PostgreSQL gives, the same refusal (SQLSTATE,
// message, detail) or the same defaults, and a login event trigger fires with its NOTICE passed on.

import { expect } from 'chai';
import pg from 'pg';
import { directConnection, directEnv, runCommand, waitFor } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

interface Refusal {
  severity: string | undefined;
  code: string | undefined;
  message: string;
  detail: string | undefined;
}

describe('engine: a pooled backend is a fresh login', function () {
  this.timeout(60_000);
  let rt: TestRuntime;

  before(async function () {
    rt = await startTestRuntime();
  });

  after(async function () {
    await rt?.stop();
  });

  /** Runs SQL as the superuser directly on PostgreSQL (not through the engine's pool). */
  async function admin(sql: string, database = 'postgres'): Promise<pg.QueryResult> {
    const client = new pg.Client(directConnection(rt, database));
    client.on('error', () => {});
    await client.connect();
    try {
      return await client.query(sql);
    } finally {
      await client.end();
    }
  }

  /** One session as `user` on `database`: runs `sql` and leaves; a refusal is returned, not thrown. */
  async function session(via: 'engine' | 'direct', user: string, database: string, sql = 'SELECT pg_backend_pid() AS pid'): Promise<pg.QueryResult | Refusal> {
    const config = via === 'engine' ? rt.connection(database, user) : directConnection(rt, database, user);
    const client = new pg.Client(config);
    client.on('error', () => {});
    try {
      await client.connect();
    } catch (err) {
      const e = err as pg.DatabaseError;
      return { severity: e.severity, code: e.code, message: e.message, detail: e.detail };
    }
    try {
      return await client.query(sql);
    } finally {
      await client.end();
      // Through the engine the backend is reset after the session; the next session can have it once idle.
      if (via === 'engine') await waitFor('the backend back in the pool', () => rt.runtime.engine.stats().backends.resetting === 0);
    }
  }

  function refusal(r: pg.QueryResult | Refusal): Refusal {
    expect(r, 'the login should have been refused').to.not.have.property('rows');
    return r as Refusal;
  }

  function result(r: pg.QueryResult | Refusal): pg.QueryResult {
    expect(r, `the login was refused: ${(r as Refusal).message}`).to.have.property('rows');
    return r as pg.QueryResult;
  }

  /** A fresh login role with a pooled idle backend of its own on `database`. */
  async function roleWithPooledBackend(role: string, database = 'postgres'): Promise<number> {
    await admin(`DROP ROLE IF EXISTS ${role}; CREATE ROLE ${role} LOGIN`);
    const first = result(await session('engine', role, database));
    const second = result(await session('engine', role, database));
    // The pool works before anything changes: the second session got the first one's backend.
    expect(second.rows[0].pid).to.equal(first.rows[0].pid);
    return first.rows[0].pid as number;
  }

  /** Both ways refused alike; returns the refusal. */
  async function refusedAlike(role: string, database = 'postgres'): Promise<Refusal> {
    const direct = refusal(await session('direct', role, database));
    const engine = refusal(await session('engine', role, database));
    expect(engine).to.deep.equal(direct);
    return engine;
  }

  it('refuses a role made NOLOGIN after an earlier session, as PostgreSQL does (28000)', async function () {
    await roleWithPooledBackend('fl_nologin');
    await admin('ALTER ROLE fl_nologin NOLOGIN');
    const r = await refusedAlike('fl_nologin');
    expect(r).to.deep.include({ code: '28000', message: 'role "fl_nologin" is not permitted to log in' });
  });

  it('refuses a role whose CONNECT privilege was revoked (42501)', async function () {
    await admin('DROP DATABASE IF EXISTS fl_connect');
    await admin('CREATE DATABASE fl_connect');
    await roleWithPooledBackend('fl_noconnect', 'fl_connect');
    await admin('REVOKE CONNECT ON DATABASE fl_connect FROM PUBLIC');
    const r = await refusedAlike('fl_noconnect', 'fl_connect');
    expect(r).to.deep.include({ code: '42501', message: 'permission denied for database "fl_connect"', detail: 'User does not have CONNECT privilege.' });
  });

  it('refuses a role at CONNECTION LIMIT 0 (53300)', async function () {
    await roleWithPooledBackend('fl_rolelimit');
    await admin('ALTER ROLE fl_rolelimit CONNECTION LIMIT 0');
    const r = await refusedAlike('fl_rolelimit');
    expect(r).to.deep.include({ code: '53300', message: 'too many connections for role "fl_rolelimit"' });
  });

  it('refuses a database at CONNECTION LIMIT 0 (53300), and admits again when it is lifted', async function () {
    await admin('DROP DATABASE IF EXISTS fl_dblimit');
    await admin('CREATE DATABASE fl_dblimit');
    await roleWithPooledBackend('fl_dbuser', 'fl_dblimit');
    await admin('ALTER DATABASE fl_dblimit CONNECTION LIMIT 0');
    const r = await refusedAlike('fl_dbuser', 'fl_dblimit');
    expect(r).to.deep.include({ code: '53300', message: 'too many connections for database "fl_dblimit"' });
    await admin('ALTER DATABASE fl_dblimit CONNECTION LIMIT 1');
    // One session at a limit of one: the pooled backend it replaces is not counted twice.
    result(await session('engine', 'fl_dbuser', 'fl_dblimit'));
    result(await session('engine', 'fl_dbuser', 'fl_dblimit'));
  });

  it('refuses a database made ALLOW_CONNECTIONS false (55000)', async function () {
    await admin('DROP DATABASE IF EXISTS fl_closed');
    await admin('CREATE DATABASE fl_closed');
    await roleWithPooledBackend('fl_closeduser', 'fl_closed');
    await admin('ALTER DATABASE fl_closed ALLOW_CONNECTIONS false');
    const r = await refusedAlike('fl_closeduser', 'fl_closed');
    expect(r).to.deep.include({ code: '55000', message: 'database "fl_closed" is not currently accepting connections' });
  });

  it('refuses a dropped role as PostgreSQL does (28000), not with 42704 on its first query', async function () {
    await roleWithPooledBackend('fl_dropped');
    await admin('DROP ROLE fl_dropped');
    const r = await refusedAlike('fl_dropped');
    expect(r).to.deep.include({ code: '28000', message: 'role "fl_dropped" does not exist' });
  });

  it('refuses a role whose password expired (VALID UNTIL in the past) under --auth scram, as PostgreSQL does (28P01)', async function () {
    const scram = await startTestRuntime({ auth: 'scram', users: [{ name: 'fl_expiring', password: 'secret-one' }] });
    try {
      const config = { ...scram.connection('postgres', 'fl_expiring'), password: 'secret-one' };
      for (let i = 0; i < 2; i++) {
        const c = new pg.Client(config);
        await c.connect();
        await c.end();
      }
      const su = new pg.Client(directConnection(scram));
      await su.connect();
      await su.query("ALTER ROLE fl_expiring VALID UNTIL '2001-01-01'");
      await su.end();
      const c = new pg.Client(config);
      c.on('error', () => {});
      const err = (await c.connect().then(() => null, (e: unknown) => e)) as pg.DatabaseError | null;
      if (err === null) await c.end();
      expect(err?.code).to.equal('28P01');
      expect(err?.message).to.equal('password authentication failed for user "fl_expiring"');
    } finally {
      await scram.stop();
    }
  });

  it('gives the next session the new ALTER ROLE / ALTER DATABASE / IN DATABASE defaults, and their RESET', async function () {
    await admin('DROP DATABASE IF EXISTS fl_defaults');
    await admin('CREATE DATABASE fl_defaults');
    await roleWithPooledBackend('fl_defaults', 'fl_defaults');
    const show = "SELECT current_setting('work_mem') AS work_mem, current_setting('statement_timeout') AS statement_timeout, current_setting('search_path') AS search_path";
    const both = async (): Promise<unknown> => {
      const direct = result(await session('direct', 'fl_defaults', 'fl_defaults', show)).rows;
      const engine = result(await session('engine', 'fl_defaults', 'fl_defaults', show)).rows;
      expect(engine).to.deep.equal(direct);
      return engine[0];
    };
    await admin("ALTER ROLE fl_defaults SET work_mem = '7MB'");
    expect(await both()).to.deep.include({ work_mem: '7MB' });
    await admin("ALTER DATABASE fl_defaults SET statement_timeout = '4s'");
    expect(await both()).to.deep.include({ work_mem: '7MB', statement_timeout: '4s' });
    await admin("ALTER ROLE fl_defaults IN DATABASE fl_defaults SET search_path = tenant, public");
    expect(await both()).to.deep.equal({ work_mem: '7MB', statement_timeout: '4s', search_path: 'tenant, public' });
    await admin('ALTER ROLE fl_defaults RESET work_mem');
    await admin('ALTER ROLE fl_defaults IN DATABASE fl_defaults RESET ALL');
    const after = await both();
    expect(after).to.deep.include({ statement_timeout: '4s', search_path: '"$user", public' });
    expect(after).to.not.deep.include({ work_mem: '7MB' });
  });

  it('gives a role dropped and created again, or a new role under a renamed one\'s name, a login of its own', async function () {
    const show = 'SELECT current_user AS who, pg_backend_pid() AS pid';
    const again = await roleWithPooledBackend('fl_again');
    await admin('DROP ROLE fl_again; CREATE ROLE fl_again LOGIN');
    const fresh = result(await session('engine', 'fl_again', 'postgres', show)).rows[0];
    expect(fresh).to.deep.include({ who: 'fl_again' });
    expect(fresh.pid).to.not.equal(again);

    const renamed = await roleWithPooledBackend('fl_old');
    await admin('DROP ROLE IF EXISTS fl_new; ALTER ROLE fl_old RENAME TO fl_new; CREATE ROLE fl_old LOGIN');
    const newcomer = result(await session('engine', 'fl_old', 'postgres', show)).rows[0];
    expect(newcomer).to.deep.include({ who: 'fl_old' });
    expect(newcomer.pid).to.not.equal(renamed);
  });

  it("takes a new backend's baseline at its login, before its first session's own statements: a RESET made there reaches the next session", async function () {
    // The baseline is read off after the first client's greeting (server.ts, baselinePending), but
    // PostgreSQL runs it before anything that client sends: a baseline taken later would already lack
    // the row RESET removes, and the next session would keep the login's 5MB.
    await admin("DROP ROLE IF EXISTS fl_self; CREATE ROLE fl_self LOGIN; ALTER ROLE fl_self SET work_mem = '5MB'");
    const show = "SELECT current_setting('work_mem') AS work_mem, pg_backend_pid() AS pid";
    const first = result(await session('engine', 'fl_self', 'postgres', `ALTER ROLE CURRENT_USER RESET work_mem`));
    expect(first.command).to.equal('ALTER');
    const next = result(await session('engine', 'fl_self', 'postgres', show)).rows[0];
    const direct = result(await session('direct', 'fl_self', 'postgres', show)).rows[0];
    expect(next.work_mem).to.equal(direct.work_mem);
    expect(next.work_mem).to.not.equal('5MB');
  });

  it("reuses a new backend whose first client left before the login baseline's answer came", async function () {
    await admin('DROP ROLE IF EXISTS fl_brief; CREATE ROLE fl_brief LOGIN');
    const brief = new pg.Client(rt.connection('postgres', 'fl_brief'));
    await brief.connect();
    const pid = (brief as unknown as { processID: number }).processID;
    const idle = rt.runtime.engine.stats().backends.idle;
    await brief.end();
    await waitFor('the backend back in the pool', () => rt.runtime.engine.stats().backends.idle > idle);
    expect(result(await session('engine', 'fl_brief', 'postgres')).rows[0].pid).to.equal(pid);
  });

  it('fires a login event trigger for every session and passes its NOTICE on (psql)', async function () {
    await admin('DROP DATABASE IF EXISTS fl_trigger');
    await admin('CREATE DATABASE fl_trigger');
    await roleWithPooledBackend('fl_greeted', 'fl_trigger');
    await admin(
      `CREATE TABLE logins (who text);
       CREATE FUNCTION greet() RETURNS event_trigger LANGUAGE plpgsql SECURITY DEFINER SET search_path = public AS $$
       BEGIN RAISE NOTICE 'welcome %', session_user; INSERT INTO logins VALUES (session_user); END $$;
       CREATE EVENT TRIGGER greet ON login EXECUTE FUNCTION greet();`,
      'fl_trigger',
    );
    const psql = (env: NodeJS.ProcessEnv) => runCommand('psql', ['-X', '-At', '-c', 'SELECT 1'], { env });
    const direct = await psql(directEnv(rt, 'fl_trigger', 'fl_greeted'));
    expect(direct.stderr).to.equal('NOTICE:  welcome fl_greeted\n');
    for (let i = 0; i < 3; i++) {
      const engine = await psql(rt.env('fl_trigger', 'fl_greeted'));
      expect(engine.stdout).to.equal(direct.stdout);
      expect(engine.stderr, `session ${i + 1}`).to.equal(direct.stderr);
    }
    const { rows } = await admin("SELECT count(*)::int AS n FROM logins WHERE who = 'fl_greeted'", 'fl_trigger');
    expect(rows[0].n).to.equal(4);
  });

  it('reads the defaults of a role whose name needs quotes, beside its lower-case twin, as PostgreSQL does', async function () {
    // Read as an unquoted name, "FL_Mixed" would be fl_mixed: its baseline and checks would follow the
    // twin's rows, and a new default of its own would never reach a reused backend.
    await admin('DROP ROLE IF EXISTS "FL_Mixed", fl_mixed; CREATE ROLE "FL_Mixed" LOGIN; CREATE ROLE fl_mixed LOGIN');
    const show = "SELECT current_setting('work_mem') AS work_mem, pg_backend_pid() AS pid";
    const first = result(await session('engine', 'FL_Mixed', 'postgres', show)).rows[0];
    expect(result(await session('engine', 'FL_Mixed', 'postgres', show)).rows[0].pid, 'reused while nothing changed').to.equal(first.pid);
    await admin(`ALTER ROLE "FL_Mixed" SET work_mem = '7MB'`);
    const next = result(await session('engine', 'FL_Mixed', 'postgres', show)).rows[0];
    expect(next.work_mem).to.equal('7MB');
    expect(next.pid).to.not.equal(first.pid);
  });

  it('still reuses the backend when nothing a login depends on changed, writes elsewhere or not', async function () {
    const pid = await roleWithPooledBackend('fl_steady');
    await admin('CREATE TABLE IF NOT EXISTS fl_noise (n int); INSERT INTO fl_noise VALUES (1)');
    expect(result(await session('engine', 'fl_steady', 'postgres')).rows[0].pid).to.equal(pid);
    expect(result(await session('engine', 'fl_steady', 'postgres')).rows[0].pid).to.equal(pid);
  });
});
