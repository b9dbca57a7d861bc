// The pool's backend states (prepared, connecting, active, idle, closing, replacing; closed: in no
// set) driven without PostgreSQL: a fake PostgreSQL on a Unix socket (helpers/fake-postgres.ts)
// answers logins and the login check with messages built by name. The stats are the sets' sizes.
// The real-PostgreSQL pool tests (lifecycle.test.ts, fresh-login.test.ts) stay.

import { expect } from 'chai';
import { waitFor } from '../helpers/commands.js';
import { BackendPool } from '../../src/engine/pool.js';
import { PgxError } from '../../src/errors.js';
import { systemClock } from '../../src/clock.js';
import { silentLogger } from '../../src/log.js';
import { FakePostgres } from '../helpers/fake-postgres.js';
import { backendMessages as be } from '../helpers/backend-messages.js';

const startup = { user: 'alice', database: 'app' };
const KEY = 'app\0alice';

describe('engine: the pool states, without PostgreSQL', function () {
  this.timeout(20_000);
  let pg: FakePostgres;
  let pool: BackendPool;

  function makePool(o: { maxBackends?: number; maxIdle?: number; waitTimeoutMs?: number } = {}): BackendPool {
    pool = new BackendPool({
      address: { socketDir: pg.socketDir, port: pg.port },
      maxBackends: o.maxBackends ?? 2,
      maxIdle: o.maxIdle ?? 5,
      idleTimeoutMs: 60_000,
      waitTimeoutMs: o.waitTimeoutMs ?? 10_000,
      clock: systemClock,
      logger: silentLogger,
    });
    return pool;
  }

  beforeEach(async () => {
    pg = await new FakePostgres().listen();
  });
  afterEach(async () => {
    pool?.close();
    await pg.close();
  });

  it('a new backend is active while held, idle once released, and active again for the next client after its login check', async () => {
    makePool();
    const conn = await pool.acquire(KEY, startup);
    expect(pool.stateOf(conn)).to.equal('active');
    expect(pg.byPid(conn.pid).startup?.get('user')).to.equal('alice');
    expect(pool.stats()).to.include({ total: 1, active: 1, idle: 0, connecting: 0 });
    // A prepared connection opened after it, outside the slots.
    await waitFor('a prepared connection', () => pool.stats().prepared === 1);

    pool.release(conn, true);
    expect(pool.stateOf(conn)).to.equal('idle');
    expect(pool.stats()).to.include({ total: 1, active: 0, idle: 1 });

    const again = await pool.acquire(KEY, startup);
    expect(again).to.equal(conn);
    expect(pool.stateOf(conn)).to.equal('active');
    expect(pool.stats()).to.include({ total: 1, active: 1, idle: 0 });
    // The reset went out with the login check; the snapshot is kept for the next, cheaper check.
    expect(pg.byPid(conn.pid).received.slice(1).map((r) => r.slice(0, 13))).to.deep.equal(['Q DISCARD ALL', 'Q SELECT CASE']);
  });

  it('prepares the next backends\' connections after a start, not beside it', async () => {
    makePool({ maxBackends: 4 });
    await pool.acquire(KEY, startup);
    // Forked beside the start, the replacement took CPU from it and from the client's first query.
    expect(pool.stats().prepared).to.equal(0);
    expect(pg.backends).to.have.length(1);
    await waitFor('two prepared connections', () => pool.stats().prepared === 2);
    const sockets = pg.backends.length;
    const second = await pool.acquire('other\0alice', { user: 'alice', database: 'other' });
    // Started on a prepared connection, and nothing opened while it started.
    expect(pg.byPid(second.pid).startup?.get('database')).to.equal('other');
    expect(pg.backends).to.have.length(sockets);
    expect(pool.stats().prepared).to.equal(1);
    await waitFor('the prepared connection replaced', () => pool.stats().prepared === 2);
    expect(pg.backends).to.have.length(sockets + 1);
  });

  it('a backend released unclean is closed at once, its slot going to the client that waits', async () => {
    makePool({ maxBackends: 1 });
    const first = await pool.acquire(KEY, startup);
    const waiting = pool.acquire(KEY, startup);
    expect(pool.stats()).to.include({ total: 1, waiting: 1 });
    pool.release(first, false);
    expect(pool.stateOf(first)).to.equal('closed');
    const second = await waiting;
    expect(second).not.to.equal(first);
    expect(pool.stateOf(second)).to.equal('active');
    expect(pool.stats()).to.include({ total: 1, active: 1, waiting: 0 });
  });

  it('a backend that fails its login check is replaced in the same slot once it has exited', async () => {
    makePool({ maxBackends: 1 });
    const old = await pool.acquire(KEY, startup);
    pool.release(old, true);
    pg.verdict = 'n';
    const fresh = await pool.acquire(KEY, startup);
    expect(fresh).not.to.equal(old);
    expect(pool.stateOf(old)).to.equal('closed');
    expect(pool.stateOf(fresh)).to.equal('active');
    expect(pg.byPid(old.pid).received, 'the old backend was ended with Terminate').to.include('X');
    expect(pool.stats()).to.include({ total: 1, active: 1, connecting: 0 });
  });

  it('an idle backend PostgreSQL ends leaves the pool and frees its slot', async () => {
    makePool();
    const conn = await pool.acquire(KEY, startup);
    pool.release(conn, true);
    expect(pool.stats().idle).to.equal(1);
    // As at a shutdown: a FATAL, then the connection closes.
    pg.byPid(conn.pid).socket.end(be.errorResponse({ S: 'FATAL', V: 'FATAL', C: '57P01', M: 'terminating connection due to administrator command' }));
    await waitFor('the backend out of the pool', () => pool.stateOf(conn) === 'closed');
    expect(pool.stats()).to.include({ total: 0, idle: 0, active: 0 });
  });

  it('a client that waits past the wait timeout gets 53300', async () => {
    makePool({ maxBackends: 1, waitTimeoutMs: 50 });
    await pool.acquire(KEY, startup);
    const err = await pool.acquire('other\0alice', { user: 'alice', database: 'other' }).then(
      () => null,
      (e: unknown) => e,
    );
    expect(err).to.be.instanceOf(PgxError);
    expect((err as PgxError).sqlstate).to.equal('53300');
    expect(pool.stats().waiting).to.equal(0);
  });

  it('idle backends past --pool-max-idle are closed, least recently used first', async () => {
    makePool({ maxBackends: 3, maxIdle: 1 });
    const a = await pool.acquire('a\0alice', { user: 'alice', database: 'a' });
    const b = await pool.acquire('b\0alice', { user: 'alice', database: 'b' });
    pool.release(a, true);
    pool.release(b, true);
    expect(pool.stateOf(a)).to.equal('closed');
    expect(pool.stateOf(b)).to.equal('idle');
    expect(pool.stats()).to.include({ total: 1, idle: 1 });
  });

  it('close() closes idle and prepared backends and refuses new clients', async () => {
    makePool();
    const conn = await pool.acquire(KEY, startup);
    pool.release(conn, true);
    pool.close();
    expect(pool.stateOf(conn)).to.equal('closed');
    expect(pool.stats()).to.include({ total: 0, prepared: 0 });
    const err = await pool.acquire(KEY, startup).then(
      () => null,
      (e: unknown) => e,
    );
    expect((err as PgxError).sqlstate).to.equal('57P03');
  });
});
