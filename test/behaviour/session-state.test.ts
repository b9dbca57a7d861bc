// Session state that a pooling proxy can leak from one client to the next or lose on the way: settings
// (SET, RESET, SET LOCAL), ParameterStatus values, temporary tables, cursors WITH HOLD and prepared
// statements. Run on direct PostgreSQL and through the engine; through the engine a later session
// usually gets the backend an earlier one left, so each scenario ends a session and checks that the
// next one starts as fresh as it would on PostgreSQL.

import { expect } from 'chai';
import Cursor from 'pg-cursor';
import { PLAIN_ROLE, code, rows, describeScenarios, type Scenario } from './harness.js';

/** Every setting not at its built-in default, as a session sees it. */
const NON_DEFAULT = "SELECT name, setting, source FROM pg_settings WHERE source NOT IN ('default', 'override') ORDER BY name";

const settings: Scenario = {
  name: 'SET, RESET and SET LOCAL stay in their session',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    const fresh = rows(await b.q(NON_DEFAULT));
    const initial = rows(await a.q('SHOW work_mem'));
    const [zone] = rows(await b.q("SELECT current_setting('TimeZone') AS tz"));
    await a.q("SET work_mem = '7MB'");
    expect(rows(await a.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '7MB' }]);
    expect(rows(await b.q('SHOW work_mem'))).to.deep.equal(initial);
    // SET LOCAL lasts until the end of the transaction; SET in a rolled-back one is undone.
    await a.q('BEGIN');
    await a.q("SET LOCAL work_mem = '9MB'");
    expect(rows(await a.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '9MB' }]);
    await a.q('COMMIT');
    expect(rows(await a.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '7MB' }]);
    await a.q('BEGIN');
    await a.q("SET work_mem = '11MB'");
    await a.q('ROLLBACK');
    expect(rows(await a.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '7MB' }]);
    await a.q('BEGIN');
    await a.q("SET work_mem = '12MB'");
    await a.q('SAVEPOINT s');
    await a.q("SET work_mem = '13MB'");
    await a.q('ROLLBACK TO SAVEPOINT s');
    expect(rows(await a.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '12MB' }]);
    await a.q('COMMIT');
    expect(rows(await a.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '12MB' }]);
    const outside = await a.q("SET LOCAL work_mem = '14MB'");
    expect(outside.notices).to.deep.equal([{ severity: 'WARNING', code: '25P01', message: 'SET LOCAL can only be used in transaction blocks', routine: 'CheckTransactionBlock' }]);
    expect(rows(await a.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '12MB' }]);
    await a.q('RESET work_mem');
    expect(rows(await a.q('SHOW work_mem'))).to.deep.equal(initial);
    // Leave plenty changed behind, then leave.
    await a.q("SET search_path = pg_catalog, public");
    await a.q("SET TimeZone = 'Asia/Kolkata'");
    await a.q("SELECT set_config('work_mem', '5MB', false)");
    await a.q('SET SESSION CHARACTERISTICS AS TRANSACTION READ ONLY');
    await a.q("SET statement_timeout = '1h'");
    await a.q("SET myapp.tenant = 'acme'");
    expect(rows(await a.q("SELECT current_setting('myapp.tenant') AS tenant"))).to.deep.equal([{ tenant: 'acme' }]);
    const readOnly = await a.q('INSERT INTO jobs VALUES (9)');
    expect(readOnly.error).to.include({ code: '25006', message: 'cannot execute INSERT in a read-only transaction' });
    expect(rows(await b.q("SELECT current_setting('TimeZone') AS tz"))).to.deep.equal([zone]);
    expect(rows(await b.q("SELECT current_setting('myapp.tenant', true) AS tenant"))).to.deep.equal([{ tenant: null }]);
    expect(code(await b.q('INSERT INTO jobs VALUES (9)'))).to.equal('ok');
    expect(rows(await b.q(NON_DEFAULT))).to.deep.equal(fresh);
    await t.leave(a);
    // The next session with the same startup parameters starts fresh: a set a custom setting
    // (myapp.tenant), whose placeholder DISCARD ALL keeps, so the engine did not pool its backend.
    const c = await t.session('c');
    t.freshBackend(c, a);
    expect(rows(await c.q(NON_DEFAULT))).to.deep.equal(fresh);
    expect(rows(await c.q('SHOW work_mem'))).to.deep.equal(initial);
    expect(code(await c.q('INSERT INTO jobs VALUES (10)'))).to.equal('ok');
    // Startup parameters are the session's defaults: RESET returns to them, not to the server's.
    const d = await t.session('d', { options: '-c work_mem=5MB -c search_path=pg_catalog,public' });
    expect(rows(await d.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '5MB' }]);
    await d.q("SET work_mem = '8MB'");
    await d.q('RESET work_mem');
    expect(rows(await d.q('SHOW work_mem'))).to.deep.equal([{ work_mem: '5MB' }]);
    await d.q("SET work_mem = '8MB'");
    await d.q('SET search_path = public');
    await d.q('RESET ALL');
    expect(rows(await d.q("SELECT current_setting('work_mem') AS w, current_setting('search_path') AS p"))).to.deep.equal([{ w: '5MB', p: 'pg_catalog,public' }]);
    await d.end();
    const e = await t.session('e');
    expect(rows(await e.q('SHOW work_mem'))).to.deep.equal(initial);
    expect(rows(await e.q(NON_DEFAULT))).to.deep.equal(fresh);
  },
};

const parameterStatus: Scenario = {
  name: 'ParameterStatus values seen by the client',
  async run(t) {
    const a = await t.session('a', { application_name: 'behave_a' });
    t.record({ session: 'a', startup: a.startupParams });
    const startup = Object.fromEntries(a.startupParams);
    expect(startup).to.include({ application_name: 'behave_a', client_encoding: 'UTF8', is_superuser: 'on', session_authorization: 'postgres' });
    expect(startup.server_version).to.match(/^18\./);
    const reported = async (sql: string): Promise<[string, string][]> => (await a.q(sql)).parameterStatus ?? [];
    expect(await reported("SET application_name = 'renamed'")).to.deep.equal([['application_name', 'renamed']]);
    expect(await reported("SET TimeZone = 'Europe/Paris'")).to.deep.equal([['TimeZone', 'Europe/Paris']]);
    expect(await reported("SET DateStyle = 'SQL, DMY'")).to.deep.equal([['DateStyle', 'SQL, DMY']]);
    expect(await reported("SET IntervalStyle = 'iso_8601'")).to.deep.equal([['IntervalStyle', 'iso_8601']]);
    expect(await reported('SET default_transaction_read_only = on')).to.deep.equal([['default_transaction_read_only', 'on']]);
    expect(await reported('SET work_mem = 12345')).to.deep.equal([]);
    await reported('SET search_path = public, pg_catalog');
    // Values go back at the end of the transaction, and the client hears it.
    await a.q('BEGIN');
    expect(await reported("SET LOCAL application_name = 'local'")).to.deep.equal([['application_name', 'local']]);
    expect(await reported('COMMIT')).to.deep.equal([['application_name', 'renamed']]);
    await a.q('BEGIN');
    expect(await reported("SET application_name = 'rolled_back'")).to.deep.equal([['application_name', 'rolled_back']]);
    expect(await reported('ROLLBACK')).to.deep.equal([['application_name', 'renamed']]);
    const auth = await reported(`SET SESSION AUTHORIZATION ${PLAIN_ROLE}`);
    expect(Object.fromEntries(auth)).to.deep.equal({ is_superuser: 'off', session_authorization: PLAIN_ROLE });
    expect(code(await a.q("SET TimeZone = 'Asia/Tokyo'"))).to.equal('ok');
    expect(Object.fromEntries(await reported('RESET SESSION AUTHORIZATION'))).to.deep.equal({ is_superuser: 'on', session_authorization: 'postgres' });
    const reset = Object.fromEntries(await reported('RESET ALL'));
    expect(reset).to.include({ application_name: 'behave_a', TimeZone: startup.TimeZone, DateStyle: startup.DateStyle, IntervalStyle: startup.IntervalStyle, default_transaction_read_only: 'off' });
    await reported(`SET ROLE ${PLAIN_ROLE}`);
    await reported('RESET ROLE');
    await a.q("SET application_name = 'left_behind'");
    await a.q(`SET SESSION AUTHORIZATION ${PLAIN_ROLE}`);
    await a.q("SET DateStyle = 'German'");
    expect(await reported("SET client_encoding = 'LATIN1'")).to.deep.equal([['client_encoding', 'LATIN1']]);
    await t.leave(a);
    // The next session with the same startup parameters hears exactly what a fresh one would.
    const a2 = await t.session('a2', { application_name: 'behave_a' });
    t.reuses(a2, a);
    t.record({ session: 'a2', startup: a2.startupParams });
    expect(a2.startupParams).to.deep.equal(a.startupParams);
    const other = await t.session('other', { application_name: 'behave_other' });
    t.record({ session: 'other', startup: other.startupParams });
    expect(Object.fromEntries(other.startupParams)).to.include({ application_name: 'behave_other' });
    // postgres.js keeps them in sql.parameters and calls onparameter for changes.
    const p = t.pgjs('p', { connection: { application_name: 'behave_pgjs' } });
    await p.q('SELECT 1', () => p.sql`SELECT 1 AS one`);
    expect(p.parameters()).to.include({ application_name: 'behave_pgjs', session_authorization: 'postgres' });
    const changed = await p.q("SET TimeZone = 'America/New_York'", () => p.sql`SET TimeZone = 'America/New_York'`);
    expect(changed.parameterStatus).to.deep.equal([['TimeZone', 'America/New_York']]);
    expect(p.parameters()).to.include({ TimeZone: 'America/New_York' });
  },
};

const tempTables: Scenario = {
  name: 'temporary tables belong to their session',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    const count = "SELECT count(*)::int AS n FROM pg_class WHERE relname = 'scratch' AND relpersistence = 't'";
    await a.q('CREATE TEMP TABLE scratch (id int PRIMARY KEY, note text)');
    await a.q("INSERT INTO scratch VALUES (1, 'a1'), (2, 'a2')");
    // A temporary table shadows a permanent one of the same name in its session only.
    await a.q('CREATE TEMP TABLE items (id int)');
    expect(rows(await a.q('SELECT count(*)::int AS n FROM items'))).to.deep.equal([{ n: 0 }]);
    expect(rows(await b.q('SELECT count(*)::int AS n FROM items'))).to.deep.equal([{ n: 10 }]);
    const missing = await b.q('SELECT * FROM scratch');
    expect(missing.error).to.include({ code: '42P01', message: 'relation "scratch" does not exist', position: '15' });
    await b.q('CREATE TEMP TABLE scratch (x text)');
    await b.q("INSERT INTO scratch VALUES ('b')");
    expect(rows(await a.q('SELECT id, note FROM scratch ORDER BY id'))).to.deep.equal([
      { id: 1, note: 'a1' },
      { id: 2, note: 'a2' },
    ]);
    expect(rows(await b.q('SELECT x FROM scratch'))).to.deep.equal([{ x: 'b' }]);
    expect(rows(await b.q(count))).to.deep.equal([{ n: 2 }]);
    // ON COMMIT DROP and ON COMMIT DELETE ROWS.
    await a.q('BEGIN');
    await a.q('CREATE TEMP TABLE tx_only (id int) ON COMMIT DROP');
    await a.q('CREATE TEMP TABLE emptied (id int) ON COMMIT DELETE ROWS');
    await a.q('INSERT INTO emptied VALUES (1)');
    expect(rows(await a.q('SELECT count(*)::int AS n FROM emptied'))).to.deep.equal([{ n: 1 }]);
    await a.q('COMMIT');
    expect(rows(await a.q("SELECT to_regclass('tx_only') AS t"))).to.deep.equal([{ t: null }]);
    expect(rows(await a.q('SELECT count(*)::int AS n FROM emptied'))).to.deep.equal([{ n: 0 }]);
    // Gone with the session that made them.
    await t.leave(a);
    expect(rows(await b.q(count))).to.deep.equal([{ n: 1 }]);
    const a2 = await t.session('a2');
    // It made temporary tables: its backend keeps a temporary schema, so the engine closed it.
    t.freshBackend(a2, a);
    expect(code(await a2.q('SELECT * FROM scratch'))).to.equal('42P01');
    expect(rows(await a2.q('SELECT count(*)::int AS n FROM items'))).to.deep.equal([{ n: 10 }]);
    expect(rows(await a2.q("SELECT to_regclass('emptied') AS t"))).to.deep.equal([{ t: null }]);
    await a2.q('CREATE TEMP TABLE scratch (y int)');
    expect(rows(await a2.q('SELECT count(*)::int AS n FROM scratch'))).to.deep.equal([{ n: 0 }]);
  },
};

const cursors: Scenario = {
  name: 'cursors WITH HOLD across transactions',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    await a.q('BEGIN');
    await a.q('DECLARE held CURSOR WITH HOLD FOR SELECT id, name FROM items ORDER BY id');
    await a.q('DECLARE plain CURSOR FOR SELECT id FROM items ORDER BY id');
    expect(rows(await a.q('FETCH 3 FROM held'))).to.deep.equal([
      { id: 1, name: 'item 1' },
      { id: 2, name: 'item 2' },
      { id: 3, name: 'item 3' },
    ]);
    expect(rows(await a.q('FETCH 1 FROM plain'))).to.deep.equal([{ id: 1 }]);
    await a.q('COMMIT');
    // The held cursor survives the commit (its rows materialised), the plain one does not.
    expect(code(await a.q('FETCH 1 FROM plain'))).to.equal('34000');
    await b.q("UPDATE items SET name = 'changed' WHERE id = 4");
    expect(rows(await a.q('FETCH 2 FROM held'))).to.deep.equal([
      { id: 4, name: 'item 4' },
      { id: 5, name: 'item 5' },
    ]);
    await a.q('BEGIN');
    expect(rows(await a.q('FETCH 1 FROM held'))).to.deep.equal([{ id: 6, name: 'item 6' }]);
    await a.q('ROLLBACK');
    expect(rows(await a.q('FETCH BACKWARD 1 FROM held'))).to.deep.equal([{ id: 5, name: 'item 5' }]);
    expect(rows(await a.q('MOVE FORWARD ALL IN held'))).to.deep.equal([]);
    expect(rows(await a.q('SELECT name, is_holdable FROM pg_cursors'))).to.deep.equal([{ name: 'held', is_holdable: true }]);
    // Cursors belong to their session.
    const elsewhere = await b.q('FETCH 1 FROM held');
    expect(elsewhere.error).to.include({ code: '34000', message: 'cursor "held" does not exist' });
    // A holdable cursor declared outside a block is one too.
    await a.q('DECLARE solo CURSOR WITH HOLD FOR SELECT g FROM generate_series(1, 5) g');
    expect(rows(await a.q('FETCH 2 FROM solo'))).to.deep.equal([{ g: 1 }, { g: 2 }]);
    expect(code(await a.q('DECLARE plain2 CURSOR FOR SELECT 1'))).to.equal('25P01');
    await a.q('CLOSE held');
    expect(rows(await a.q('SELECT name FROM pg_cursors ORDER BY name'))).to.deep.equal([{ name: 'solo' }]);
    // A protocol-level portal read in batches (pg-cursor), inside a transaction.
    await a.q('BEGIN');
    const cursor = a.client.query(new Cursor('SELECT g, repeat($1::text, g) AS s FROM generate_series(1, 7) g', ['x']));
    const batches: unknown[][] = [];
    for (;;) {
      const batch = await cursor.read(3);
      batches.push(batch);
      if (batch.length === 0) break;
    }
    await cursor.close();
    t.note('pg-cursor batches', batches);
    expect(batches.map((r) => r.length)).to.deep.equal([3, 3, 1, 0]);
    await a.q('COMMIT');
    // A session that leaves with an open cursor leaves none behind.
    await t.leave(a);
    const a2 = await t.session('a2');
    t.reuses(a2, a);
    expect(rows(await a2.q('SELECT name FROM pg_cursors'))).to.deep.equal([]);
    expect(code(await a2.q('FETCH 1 FROM solo'))).to.equal('34000');
  },
};

const preparedStatements: Scenario = {
  name: 'prepared statements invalidated by a schema change',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    const byId = { name: 'item_by_id', text: 'SELECT * FROM items WHERE id = $1', values: [1] };
    expect(rows(await a.q(byId))).to.deep.equal([{ id: 1, name: 'item 1', qty: 10 }]);
    // A change that keeps the result type: the statement is replanned quietly.
    await b.q('CREATE INDEX items_qty ON items (qty)');
    expect(rows(await a.q(byId))).to.deep.equal([{ id: 1, name: 'item 1', qty: 10 }]);
    // One that changes it: PostgreSQL refuses the cached plan.
    await b.q("ALTER TABLE items ADD COLUMN note text DEFAULT 'n'");
    const stale = await a.q(byId);
    expect(stale.error).to.include({ code: '0A000', message: 'cached plan must not change result type', routine: 'RevalidateCachedQuery' });
    // node-postgres keeps binding the statement it parsed; once deallocated, it is gone.
    expect(code(await a.q(byId))).to.equal('0A000');
    await a.q('DEALLOCATE item_by_id');
    const gone = await a.q(byId);
    expect(gone.error).to.include({ code: '26000', message: 'prepared statement "item_by_id" does not exist' });
    const byIdV2 = { ...byId, name: 'item_by_id_v2' };
    expect(rows(await a.q(byIdV2))).to.deep.equal([{ id: 1, name: 'item 1', qty: 10, note: 'n' }]);
    await b.q('ALTER TABLE items ALTER COLUMN qty TYPE bigint');
    expect(code(await a.q(byIdV2))).to.equal('0A000');
    // SQL-level PREPARE: the same rule, and the statement is the session's own.
    await a.q('PREPARE by_name (text) AS SELECT id, qty FROM items WHERE name = $1');
    expect(rows(await a.q("EXECUTE by_name('item 2')"))).to.deep.equal([{ id: 2, qty: '20' }]);
    expect(code(await b.q("EXECUTE by_name('item 2')"))).to.equal('26000');
    await b.q('ALTER TABLE items DROP COLUMN note, ALTER COLUMN qty TYPE int');
    expect(code(await a.q("EXECUTE by_name('item 2')"))).to.equal('0A000');
    expect(rows(await a.q('SELECT name, from_sql FROM pg_prepared_statements ORDER BY name'))).to.deep.equal([
      { name: 'by_name', from_sql: true },
      { name: 'item_by_id_v2', from_sql: false },
    ]);
    // postgres.js prepares too, and deals with the change itself.
    const p = t.pgjs('p');
    await p.q('items 3 (prepared)', () => p.sql`SELECT * FROM items WHERE id = ${3}`);
    await b.q("ALTER TABLE items ADD COLUMN flag bool DEFAULT true");
    await p.q('items 3 (prepared)', () => p.sql`SELECT * FROM items WHERE id = ${3}`);
    await p.q('items 3 (prepared)', () => p.sql`SELECT * FROM items WHERE id = ${3}`);
    // A session that leaves its statements behind: the next one starts without them.
    await t.leave(a);
    const a2 = await t.session('a2');
    t.reuses(a2, a);
    expect(rows(await a2.q('SELECT name FROM pg_prepared_statements'))).to.deep.equal([]);
    expect(rows(await a2.q(byId))).to.deep.equal([{ id: 1, name: 'item 1', qty: 10, flag: true }]);
    expect(rows(await a2.q('PREPARE by_name AS SELECT 1 AS one'))).to.deep.equal([]);
  },
};

const sequences: Scenario = {
  name: 'sequence state (currval, lastval) belongs to its session',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    await a.q('CREATE SEQUENCE ticket');
    expect(rows(await a.q("SELECT nextval('ticket')::int AS n"))).to.deep.equal([{ n: 1 }]);
    expect(rows(await b.q("SELECT nextval('ticket')::int AS n"))).to.deep.equal([{ n: 2 }]);
    expect(rows(await a.q("SELECT currval('ticket')::int AS c, lastval()::int AS l"))).to.deep.equal([{ c: 1, l: 1 }]);
    // Not rolled back with the transaction.
    await a.q('BEGIN');
    expect(rows(await a.q("SELECT nextval('ticket')::int AS n"))).to.deep.equal([{ n: 3 }]);
    await a.q('ROLLBACK');
    expect(rows(await a.q("SELECT currval('ticket')::int AS c"))).to.deep.equal([{ c: 3 }]);
    await t.leave(a);
    const a2 = await t.session('a2');
    t.reuses(a2, a);
    const undefinedHere = await a2.q("SELECT currval('ticket')");
    expect(undefinedHere.error).to.include({ code: '55000', message: 'currval of sequence "ticket" is not yet defined in this session' });
    expect(code(await a2.q('SELECT lastval()'))).to.equal('55000');
    expect(rows(await a2.q("SELECT nextval('ticket')::int AS n"))).to.deep.equal([{ n: 4 }]);
  },
};

describeScenarios('session state', [settings, parameterStatus, tempTables, cursors, preparedStatements, sequences]);
