// Timeouts and cancellation, on direct PostgreSQL and through the engine: statement_timeout and a
// cancel request end the statement and leave the session usable; idle_in_transaction_session_timeout
// and transaction_timeout end the session with a FATAL the client must see, and its locks go with it.

import { expect } from 'chai';
import { waitFor } from '../helpers/commands.js';
import { code, rows, describeScenarios, type Scenario } from './harness.js';

const statementTimeout: Scenario = {
  name: 'statement_timeout and cancel requests',
  async run(t) {
    const a = await t.session('a');
    await a.q("SET statement_timeout = '100ms'");
    const slow = await a.q('SELECT pg_sleep(30)');
    expect(slow.error).to.include({ code: '57014', message: 'canceling statement due to statement timeout', severity: 'ERROR' });
    expect(rows(await a.q('SELECT 1 AS still_here'))).to.deep.equal([{ still_here: 1 }]);
    // In a transaction the timeout aborts it.
    await a.q('BEGIN');
    expect(code(await a.q('SELECT pg_sleep(30)'))).to.equal('57014');
    expect(code(await a.q('SELECT 1'))).to.equal('25P02');
    await a.q('ROLLBACK');
    // SET LOCAL: only for that transaction.
    await a.q('RESET statement_timeout');
    await a.q('BEGIN');
    await a.q("SET LOCAL statement_timeout = '50ms'");
    expect(code(await a.q('SELECT pg_sleep(30)'))).to.equal('57014');
    await a.q('ROLLBACK');
    expect(rows(await a.q('SHOW statement_timeout'))).to.deep.equal([{ statement_timeout: '0' }]);
    // Extended protocol too.
    await a.q("SET statement_timeout = '100ms'");
    expect(code(await a.q('SELECT pg_sleep($1)', [30]))).to.equal('57014');
    await a.q('RESET statement_timeout');
    // A cancel request from the client, sent with the key it was given (postgres.js).
    const p = t.pgjs('p', { connection: { application_name: 'behave_cancel' } });
    await p.q('SELECT 1', () => p.sql`SELECT 1 AS one`);
    const sleeping = p.sql`SELECT pg_sleep(30)`;
    const settled = p.q('SELECT pg_sleep(30), cancelled', () => sleeping);
    await waitFor('the postgres.js query to run', async () => {
      const r = await t.observe<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE application_name = 'behave_cancel' AND wait_event = 'PgSleep'");
      return r[0]?.n === 1;
    });
    sleeping.cancel();
    const cancelled = await settled;
    expect(cancelled.error).to.include({ code: '57014', message: 'canceling statement due to user request' });
    await p.q('SELECT 2', () => p.sql`SELECT 2 AS two`);
    // pg_cancel_backend() with the pid from the client's BackendKeyData reaches its backend.
    const b = await t.session('b');
    const keyPid = (a.client as unknown as { processID: number }).processID;
    const running = a.run('SELECT pg_sleep(30)');
    await waitFor('session a to sleep', async () => {
      const r = await t.observe<{ w: string | null }>('SELECT wait_event AS w FROM pg_stat_activity WHERE pid = $1', [a.pid()]);
      return r[0]?.w === 'PgSleep';
    });
    expect(rows(await b.q('SELECT pg_cancel_backend($1) AS sent', [keyPid]))).to.deep.equal([{ sent: true }]);
    const byPid = await a.settle('SELECT pg_sleep(30)', running);
    expect(byPid.error).to.include({ code: '57014', message: 'canceling statement due to user request' });
    // lock_timeout waits for a lock only so long.
    await b.q('BEGIN');
    await b.q('LOCK TABLE jobs IN ACCESS EXCLUSIVE MODE');
    await a.q("SET lock_timeout = '50ms'");
    const locked = await a.q('SELECT count(*) FROM jobs');
    expect(locked.error).to.include({ code: '55P03', message: 'canceling statement due to lock timeout' });
    await b.q('ROLLBACK');
    expect(rows(await a.q('SELECT count(*)::int AS n FROM jobs'))).to.deep.equal([{ n: 5 }]);
  },
};

const idleInTransaction: Scenario = {
  name: 'idle_in_transaction_session_timeout, transaction_timeout and idle_session_timeout end the session',
  async run(t) {
    const a = await t.session('a', { application_name: 'behave_idle' });
    const b = await t.session('b');
    await a.q("SET idle_in_transaction_session_timeout = '100ms'");
    // Idle outside a transaction: nothing happens (the session answers after it has been idle).
    await t.observe('SELECT pg_sleep(0.3)');
    expect(rows(await a.q('SELECT 1 AS alive'))).to.deep.equal([{ alive: 1 }]);
    await a.q('BEGIN');
    await a.q("UPDATE items SET qty = -1 WHERE id = 5");
    // The server ends the session: the client hears FATAL 25P03, then the connection closes.
    await a.waitEnded();
    const events = a.takeEvents();
    expect(events[0]).to.deep.equal({
      error: {
        severity: 'FATAL',
        code: '25P03',
        message: 'terminating connection due to idle-in-transaction timeout',
        routine: 'ProcessInterrupts',
      },
    });
    expect(events.at(-1)).to.deep.equal({ end: true });
    expect(code(await a.q('SELECT 1'))).to.match(/^client: /);
    // Its transaction rolled back and its lock went with it.
    await b.q("SET lock_timeout = '30s'");
    expect(rows(await b.q('SELECT qty FROM items WHERE id = 5 FOR UPDATE'))).to.deep.equal([{ qty: 50 }]);
    await t.waitUntilGone('behave_idle');
    // transaction_timeout ends a session whose transaction runs too long, busy or not.
    const c = await t.session('c', { application_name: 'behave_tx' });
    await c.q("SET transaction_timeout = '200ms'");
    await c.q('BEGIN');
    await c.q("UPDATE items SET qty = -2 WHERE id = 6");
    const ended = await c.q('SELECT pg_sleep(30)');
    expect(ended.error).to.include({ severity: 'FATAL', code: '25P04', message: 'terminating connection due to transaction timeout' });
    await c.waitEnded();
    c.takeEvents();
    expect(rows(await b.q('SELECT qty FROM items WHERE id = 6 FOR UPDATE'))).to.deep.equal([{ qty: 60 }]);
    await t.waitUntilGone('behave_tx');
    // idle_session_timeout ends a session idle outside a transaction.
    const d = await t.session('d', { application_name: 'behave_idle_session' });
    await d.q("SET idle_session_timeout = '100ms'");
    await d.waitEnded();
    const idleEvents = d.takeEvents();
    expect(idleEvents[0]).to.deep.equal({
      error: { severity: 'FATAL', code: '57P05', message: 'terminating connection due to idle-session timeout', routine: 'ProcessInterrupts' },
    });
    await t.waitUntilGone('behave_idle_session');
    // postgres.js in a transaction that sat idle too long.
    const p = t.pgjs('p', { connection: { application_name: 'behave_idle_pgjs' } });
    // sql.begin() fails when its connection closes; the callback just waits for that (a query sent
    // on the closing connection can crash postgres.js 3.4: nextWrite on a null socket).
    const failed = await p.q('a transaction left idle', async () => {
      await p.sql.begin(async (tx) => {
        await tx`SET LOCAL idle_in_transaction_session_timeout = '100ms'`;
        await tx`UPDATE items SET qty = -3 WHERE id = 7`;
        await new Promise<never>(() => {});
      });
      return [];
    });
    expect(failed.error).to.include({ client: true, code: 'CONNECTION_CLOSED' });
    expect(rows(await b.q('SELECT qty FROM items WHERE id = 7 FOR UPDATE'))).to.deep.equal([{ qty: 70 }]);
  },
};

const terminated: Scenario = {
  name: 'pg_terminate_backend ends another session',
  async run(t) {
    const a = await t.session('a', { application_name: 'behave_terminated' });
    const b = await t.session('b');
    await a.q('BEGIN');
    await a.q('UPDATE items SET qty = -4 WHERE id = 8');
    // By the pid the client was given in BackendKeyData, as an admin tool would take it.
    const keyPid = (a.client as unknown as { processID: number }).processID;
    expect(rows(await b.q('SELECT pg_terminate_backend($1) AS done', [keyPid]))).to.deep.equal([{ done: true }]);
    await a.waitEnded();
    const events = a.takeEvents();
    expect(events[0]).to.deep.equal({
      error: { severity: 'FATAL', code: '57P01', message: 'terminating connection due to administrator command', routine: 'ProcessInterrupts' },
    });
    expect(rows(await b.q('SELECT qty FROM items WHERE id = 8'))).to.deep.equal([{ qty: 80 }]);
    await t.waitUntilGone('behave_terminated');
    // A session busy in a statement hears it as the statement's error.
    const c = await t.session('c', { application_name: 'behave_terminated' });
    const running = c.run('SELECT pg_sleep(30)');
    await waitFor('session c to sleep', async () => {
      const r = await t.observe<{ w: string | null }>('SELECT wait_event AS w FROM pg_stat_activity WHERE pid = $1', [c.pid()]);
      return r[0]?.w === 'PgSleep';
    });
    await b.q('SELECT pg_terminate_backend($1) AS done', [c.pid()]);
    const ended = await c.settle('SELECT pg_sleep(30)', running);
    expect(ended.error).to.include({ severity: 'FATAL', code: '57P01' });
    await c.waitEnded();
    c.takeEvents();
  },
};

describeScenarios('timeouts and cancellation', [statementTimeout, idleInTransaction, terminated]);
