// Two sessions contending for the same rows and locks, on direct PostgreSQL and through the engine:
// serialization failures, a deadlock, NOWAIT and SKIP LOCKED, advisory locks, transactional DDL, and a
// client that dies holding locks. Each scenario asserts PostgreSQL's semantics on both targets and
// that the two transcripts are identical.

import { expect } from 'chai';
import { code, rows, describeScenarios, type Scenario } from './harness.js';

const serializable: Scenario = {
  name: 'SERIALIZABLE write skew',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    await a.q('BEGIN ISOLATION LEVEL SERIALIZABLE');
    await b.q('BEGIN ISOLATION LEVEL SERIALIZABLE');
    expect(rows(await a.q('SHOW transaction_isolation'))).to.deep.equal([{ transaction_isolation: 'serializable' }]);
    expect(rows(await a.q('SELECT count(*)::int AS n FROM doctors WHERE on_call'))).to.deep.equal([{ n: 2 }]);
    expect(rows(await b.q('SELECT count(*)::int AS n FROM doctors WHERE on_call'))).to.deep.equal([{ n: 2 }]);
    expect(code(await a.q("UPDATE doctors SET on_call = false WHERE name = 'alice'"))).to.equal('ok');
    expect(code(await b.q("UPDATE doctors SET on_call = false WHERE name = 'bob'"))).to.equal('ok');
    expect(code(await a.q('COMMIT'))).to.equal('ok');
    const commit = await b.q('COMMIT');
    expect(commit.error).to.include({ code: '40001', message: 'could not serialize access due to read/write dependencies among transactions' });
    expect(rows(await b.q('SELECT name, on_call FROM doctors ORDER BY name'))).to.deep.equal([
      { name: 'alice', on_call: false },
      { name: 'bob', on_call: true },
    ]);
  },
};

const repeatableRead: Scenario = {
  name: 'REPEATABLE READ and READ COMMITTED under concurrent updates',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    // A snapshot taken at the first statement; a row changed since cannot be updated.
    await a.q('BEGIN ISOLATION LEVEL REPEATABLE READ');
    expect(rows(await a.q('SELECT qty FROM items WHERE id = 1'))).to.deep.equal([{ qty: 10 }]);
    await b.q('UPDATE items SET qty = qty + 1 WHERE id = 1');
    expect(rows(await a.q('SELECT qty FROM items WHERE id = 1'))).to.deep.equal([{ qty: 10 }]);
    const update = await a.q('UPDATE items SET qty = qty + 100 WHERE id = 1');
    expect(update.error).to.include({ code: '40001', message: 'could not serialize access due to concurrent update' });
    expect(code(await a.q('SELECT 1'))).to.equal('25P02');
    await a.q('ROLLBACK');
    // Blocked behind another transaction's update: released with 40001 when it commits.
    await a.q('BEGIN ISOLATION LEVEL REPEATABLE READ');
    await a.q('SELECT qty FROM items WHERE id = 2');
    await b.q('BEGIN');
    await b.q('UPDATE items SET qty = qty + 1 WHERE id = 2');
    const blocked = a.run('UPDATE items SET qty = qty + 100 WHERE id = 2');
    await t.waitUntilBlocked(a);
    await b.q('COMMIT');
    expect(code(await a.settle('UPDATE items SET qty = qty + 100 WHERE id = 2', blocked))).to.equal('40001');
    await a.q('ROLLBACK');
    // READ COMMITTED: each statement sees what committed before it; a blocked update re-reads the row.
    await a.q('BEGIN');
    expect(rows(await a.q('SELECT qty FROM items WHERE id = 1'))).to.deep.equal([{ qty: 11 }]);
    await b.q('UPDATE items SET qty = qty + 1 WHERE id = 1');
    expect(rows(await a.q('SELECT qty FROM items WHERE id = 1'))).to.deep.equal([{ qty: 12 }]);
    await b.q('BEGIN');
    await b.q('UPDATE items SET qty = qty + 1 WHERE id = 1');
    const waits = a.run('UPDATE items SET qty = qty * 2 WHERE id = 1 RETURNING qty');
    await t.waitUntilBlocked(a);
    await b.q('COMMIT');
    expect(rows(await a.settle('UPDATE items SET qty = qty * 2 WHERE id = 1 RETURNING qty', waits))).to.deep.equal([{ qty: 26 }]);
    await a.q('COMMIT');
    // The level can only be set before the transaction's first query.
    await a.q('BEGIN');
    await a.q('SELECT 1');
    expect(code(await a.q('SET TRANSACTION ISOLATION LEVEL SERIALIZABLE'))).to.equal('25001');
    await a.q('ROLLBACK');
    await a.q('SET default_transaction_isolation = serializable');
    await a.q('BEGIN');
    expect(rows(await a.q('SHOW transaction_isolation'))).to.deep.equal([{ transaction_isolation: 'serializable' }]);
    await a.q('COMMIT');
    // Not seen by the other session.
    expect(rows(await b.q('SHOW default_transaction_isolation'))).to.deep.equal([{ default_transaction_isolation: 'read committed' }]);
  },
};

const deadlock: Scenario = {
  name: 'a deadlock between two sessions',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    // Only b's check runs soon enough to matter, so b is the one PostgreSQL picks.
    await a.q("SET deadlock_timeout = '60s'");
    await b.q("SET deadlock_timeout = '20ms'");
    await a.q('BEGIN');
    await b.q('BEGIN');
    await a.q('UPDATE items SET qty = qty + 1 WHERE id = 1');
    await b.q('UPDATE items SET qty = qty + 1 WHERE id = 2');
    const aWaits = a.run('UPDATE items SET qty = qty + 1 WHERE id = 2');
    await t.waitUntilBlocked(a);
    const victim = await b.q('UPDATE items SET qty = qty + 1 WHERE id = 1');
    expect(victim.error).to.include({ code: '40P01', message: 'deadlock detected', severity: 'ERROR' });
    expect(victim.error?.detail).to.match(/^Process N waits for ShareLock on transaction N; blocked by process N\./);
    expect(code(await a.settle('UPDATE items SET qty = qty + 1 WHERE id = 2', aWaits))).to.equal('ok');
    expect(code(await b.q('COMMIT'))).to.equal('ok'); // COMMIT of a failed transaction rolls back
    await a.q('COMMIT');
    expect(rows(await b.q('SELECT id, qty FROM items WHERE id IN (1, 2) ORDER BY id'))).to.deep.equal([
      { id: 1, qty: 11 },
      { id: 2, qty: 21 },
    ]);
  },
};

const rowLocks: Scenario = {
  name: 'row locks with NOWAIT and SKIP LOCKED',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    await a.q('BEGIN');
    expect(rows(await a.q('SELECT id FROM jobs WHERE id IN (1, 2) ORDER BY id FOR UPDATE'))).to.deep.equal([{ id: 1 }, { id: 2 }]);
    const nowait = await b.q('SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT');
    expect(nowait.error).to.include({ code: '55P03', message: 'could not obtain lock on row in relation "jobs"' });
    await b.q('BEGIN');
    expect(rows(await b.q('SELECT id FROM jobs ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 2'))).to.deep.equal([{ id: 3 }, { id: 4 }]);
    // Its own locks are not skipped; a's are.
    expect(rows(await b.q('SELECT id FROM jobs ORDER BY id FOR SHARE SKIP LOCKED'))).to.deep.equal([{ id: 3 }, { id: 4 }, { id: 5 }]);
    expect(code(await a.q('SELECT id FROM jobs WHERE id = 3 FOR UPDATE NOWAIT'))).to.equal('55P03');
    await a.q('ROLLBACK');
    await a.q('BEGIN');
    await b.q("SET LOCAL lock_timeout = '50ms'");
    expect(rows(await a.q('SELECT id FROM jobs WHERE id = 1 FOR NO KEY UPDATE'))).to.deep.equal([{ id: 1 }]);
    // FOR KEY SHARE does not conflict with FOR NO KEY UPDATE; FOR SHARE does.
    expect(rows(await b.q('SELECT id FROM jobs WHERE id = 1 FOR KEY SHARE NOWAIT'))).to.deep.equal([{ id: 1 }]);
    const timeout = await b.q('SELECT id FROM jobs WHERE id = 1 FOR SHARE');
    expect(timeout.error).to.include({ code: '55P03', message: 'canceling statement due to lock timeout' });
    await b.q('ROLLBACK');
    // A queue worker: each session takes the next job no one else has locked (a still holds job 1).
    await b.q('BEGIN');
    const next = "UPDATE jobs SET state = 'running' WHERE id = (SELECT id FROM jobs WHERE state = 'queued' ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) RETURNING id";
    expect(rows(await b.q(next))).to.deep.equal([{ id: 2 }]);
    expect(rows(await a.q(next))).to.deep.equal([{ id: 1 }]);
    await a.q('COMMIT');
    await b.q('COMMIT');
    expect(rows(await b.q('SELECT id FROM jobs WHERE id = 1 FOR UPDATE NOWAIT'))).to.deep.equal([{ id: 1 }]);
    expect(rows(await a.q('SELECT id, state FROM jobs ORDER BY id'))).to.deep.equal([
      { id: 1, state: 'running' },
      { id: 2, state: 'running' },
      { id: 3, state: 'queued' },
      { id: 4, state: 'queued' },
      { id: 5, state: 'queued' },
    ]);
  },
};

const advisoryLocks: Scenario = {
  name: 'session and transaction advisory locks',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    const mine = "SELECT objid::int AS key, mode, granted FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid() ORDER BY objid, mode";
    expect(rows(await a.q('SELECT pg_advisory_lock(101)'))).to.have.length(1);
    expect(rows(await b.q('SELECT pg_try_advisory_lock(101) AS got'))).to.deep.equal([{ got: false }]);
    const unlock = await b.q('SELECT pg_advisory_unlock(101) AS released');
    expect(rows(unlock)).to.deep.equal([{ released: false }]);
    expect(unlock.notices).to.deep.equal([{ severity: 'WARNING', code: '01000', message: "you don't own a lock of type ExclusiveLock", routine: 'LockRelease' }]);
    // Shared locks share; an exclusive one waits for them.
    await a.q('SELECT pg_advisory_lock_shared(202)');
    expect(rows(await b.q('SELECT pg_try_advisory_lock_shared(202) AS got'))).to.deep.equal([{ got: true }]);
    expect(rows(await b.q('SELECT pg_try_advisory_lock(202) AS got'))).to.deep.equal([{ got: false }]);
    const waits = b.run('SELECT pg_advisory_lock(101)');
    await t.waitUntilBlocked(b);
    expect(rows(await a.q('SELECT pg_advisory_unlock(101) AS released'))).to.deep.equal([{ released: true }]);
    expect(code(await b.settle('SELECT pg_advisory_lock(101)', waits))).to.equal('ok');
    expect(rows(await b.q(mine))).to.deep.equal([
      { key: 101, mode: 'ExclusiveLock', granted: true },
      { key: 202, mode: 'ShareLock', granted: true },
    ]);
    // Transaction locks go at commit; session locks survive a rollback.
    await a.q('BEGIN');
    await a.q('SELECT pg_advisory_xact_lock(303)');
    await a.q('SELECT pg_advisory_lock(404)');
    expect(rows(await b.q('SELECT pg_try_advisory_xact_lock(303) AS got'))).to.deep.equal([{ got: false }]);
    await a.q('ROLLBACK');
    expect(rows(await b.q('SELECT pg_try_advisory_xact_lock(303) AS got'))).to.deep.equal([{ got: true }]);
    expect(rows(await b.q('SELECT pg_try_advisory_lock(404) AS got'))).to.deep.equal([{ got: false }]);
    expect(rows(await a.q(mine))).to.deep.equal([
      { key: 202, mode: 'ShareLock', granted: true },
      { key: 404, mode: 'ExclusiveLock', granted: true },
    ]);
    // A session's locks end with it (through the engine its backend is closed: a pooled backend is
    // reset only when handed out next, so a session that may hold an advisory lock is not pooled).
    await t.leave(a);
    await t.waitUntilAdvisoryFree(404);
    expect(rows(await b.q('SELECT pg_try_advisory_lock(404) AS got'))).to.deep.equal([{ got: true }]);
    expect(rows(await b.q('SELECT pg_advisory_unlock_all()'))).to.have.length(1);
    expect(rows(await b.q(mine))).to.deep.equal([]);
    // A new session starts with none, whichever backend serves it.
    const c = await t.session('c');
    t.freshBackend(c, a);
    expect(rows(await c.q(mine))).to.deep.equal([]);
    expect(rows(await c.q('SELECT pg_try_advisory_lock(202) AS got'))).to.deep.equal([{ got: true }]);
  },
};

const killedClient: Scenario = {
  name: 'a client killed or leaving mid-transaction',
  async run(t) {
    const victim = await t.session('victim', { application_name: 'behave_victim' });
    const b = await t.session('b');
    await victim.q('BEGIN');
    await victim.q('UPDATE items SET qty = 0 WHERE id = 3');
    await victim.q('SELECT pg_advisory_lock(505)');
    await victim.q('CREATE TABLE half_done (id int)');
    // A generous lock_timeout turns a lock that is never released into an error instead of a hang.
    await b.q("SET lock_timeout = '30s'");
    const waits = b.run('SELECT qty FROM items WHERE id = 3 FOR UPDATE');
    await t.waitUntilBlocked(b);
    victim.kill();
    expect(rows(await b.settle('SELECT qty FROM items WHERE id = 3 FOR UPDATE', waits))).to.deep.equal([{ qty: 30 }]);
    await victim.waitEnded();
    victim.takeEvents();
    await t.waitUntilAdvisoryFree(505);
    expect(rows(await b.q('SELECT pg_try_advisory_lock(505) AS got'))).to.deep.equal([{ got: true }]);
    // Not kept for reuse: a backend left inside a transaction is closed.
    await t.waitUntilGone('behave_victim');
    expect(rows(await b.q("SELECT to_regclass('half_done') AS t"))).to.deep.equal([{ t: null }]);
    expect(code(await victim.q('SELECT 1'))).to.match(/^client: /);
    // A client that says goodbye (Terminate) mid-transaction: rolled back, its locks released.
    const leaver = await t.session('leaver', { application_name: 'behave_leaver' });
    await leaver.q('BEGIN');
    await leaver.q('UPDATE items SET qty = 0 WHERE id = 4');
    await leaver.q("SET LOCAL work_mem = '9MB'");
    await leaver.end();
    expect(rows(await b.q('SELECT qty FROM items WHERE id = 4 FOR UPDATE'))).to.deep.equal([{ qty: 40 }]);
    await t.waitUntilGone('behave_leaver');
  },
};

const transactionalDdl: Scenario = {
  name: 'transactional DDL',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    const columns = "SELECT column_name FROM information_schema.columns WHERE table_name = 'items' ORDER BY ordinal_position";
    await a.q('BEGIN');
    await a.q('CREATE TABLE ddl_new (id int PRIMARY KEY, note text)');
    await a.q("INSERT INTO ddl_new VALUES (1, 'one')");
    await a.q('ALTER TABLE items ADD COLUMN extra int DEFAULT 7');
    await a.q('CREATE INDEX items_name ON items (name)');
    expect(rows(await a.q(columns))).to.deep.equal([{ column_name: 'id' }, { column_name: 'name' }, { column_name: 'qty' }, { column_name: 'extra' }]);
    // Not visible to the other session, and the altered table is locked until the end.
    expect(rows(await b.q("SELECT to_regclass('ddl_new') AS t"))).to.deep.equal([{ t: null }]);
    await b.q("SET lock_timeout = '50ms'");
    expect(code(await b.q('SELECT count(*) FROM items'))).to.equal('55P03');
    await a.q('ROLLBACK');
    expect(rows(await b.q("SELECT to_regclass('ddl_new') AS t"))).to.deep.equal([{ t: null }]);
    expect(rows(await b.q(columns))).to.deep.equal([{ column_name: 'id' }, { column_name: 'name' }, { column_name: 'qty' }]);
    expect(rows(await b.q("SELECT indexname FROM pg_indexes WHERE tablename = 'items' ORDER BY 1"))).to.deep.equal([{ indexname: 'items_pkey' }]);
    // Savepoints: the dropped table comes back, the created one stays.
    await a.q('BEGIN');
    await a.q('CREATE TABLE kept (id int)');
    await a.q('SAVEPOINT s1');
    await a.q('DROP TABLE items');
    expect(code(await a.q('SELECT count(*) FROM items'))).to.equal('42P01');
    await a.q('ROLLBACK TO SAVEPOINT s1');
    expect(rows(await a.q('SELECT count(*)::int AS n FROM items'))).to.deep.equal([{ n: 10 }]);
    await a.q('COMMIT');
    expect(rows(await b.q("SELECT to_regclass('kept')::text AS t"))).to.deep.equal([{ t: 'kept' }]);
    // An error aborts the block; later statements are refused; COMMIT rolls it back.
    await a.q('BEGIN');
    await a.q('CREATE TABLE doomed (id int)');
    expect(code(await a.q('CREATE TABLE kept (id int)'))).to.equal('42P07');
    const refused = await a.q('SELECT 1');
    expect(refused.error).to.include({ code: '25P02', message: 'current transaction is aborted, commands ignored until end of transaction block' });
    expect(rows(await a.q('COMMIT'))).to.deep.equal([]);
    expect(rows(await a.q("SELECT to_regclass('doomed') AS t"))).to.deep.equal([{ t: null }]);
    // Statements PostgreSQL refuses inside a block.
    await a.q('BEGIN');
    const create = await a.q('CREATE DATABASE behave_never');
    expect(create.error).to.include({ code: '25001', message: 'CREATE DATABASE cannot run inside a transaction block' });
    await a.q('ROLLBACK');
    expect(code(await a.q('VACUUM items'))).to.equal('ok');
    // Multi-statement simple queries are one implicit transaction.
    expect(code(await a.q('CREATE TABLE implicit_t (id int); INSERT INTO implicit_t VALUES (1); SELECT 1/0'))).to.equal('22012');
    expect(rows(await a.q("SELECT to_regclass('implicit_t') AS t"))).to.deep.equal([{ t: null }]);
  },
};

describeScenarios('transactions and locks', [serializable, repeatableRead, deadlock, rowLocks, advisoryLocks, killedClient, transactionalDdl]);
