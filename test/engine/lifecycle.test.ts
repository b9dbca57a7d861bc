// Session lifecycle through the engine: a pooled backend handed to the next client carries nothing of
// the previous one, and one PostgreSQL has ended is never handed out; a client that vanishes
// mid-transaction leaves no transaction or lock behind; a PostgreSQL crash is answered with 57P03
// until the supervisor has it back; a thousand clients at once are each served or refused with 53300;
// and `pgx start` survives a kill -9 (the next start stops the orphaned postmaster) and stops cleanly
// on Ctrl-C.

import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import type net from 'node:net';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { serialize } from 'pg-protocol';
import { systemClock } from '../../src/clock.js';
import { BackendPool } from '../../src/engine/pool.js';
import type { BackendConnection } from '../../src/engine/server.js';
import { silentLogger } from '../../src/log.js';
import {
  backendAddress,
  directConnection,
  freePort,
  postgresProcessesIn,
  postmastersIn,
  processAlive,
  raiseOpenFileLimit,
  waitFor,
} from '../helpers/commands.js';
import { copySeed, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

/** The checkout: compiled tests run from dist/test/engine/. */
const PROJECT_ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

async function connect(config: pg.ClientConfig): Promise<pg.Client> {
  const client = new pg.Client(config);
  client.on('error', () => {});
  await client.connect();
  return client;
}

/** A backend pool of its own on the runtime's PostgreSQL, to drive the pool directly. */
function testPool(rt: TestRuntime, maxBackends: number): BackendPool {
  return new BackendPool({
    address: backendAddress(rt),
    maxBackends,
    maxIdle: 5,
    idleTimeoutMs: 60_000,
    waitTimeoutMs: 5_000,
    clock: systemClock,
    logger: silentLogger,
  });
}

/**
 * PostgreSQL's forked backends still waiting for their startup packet: they carry the postmaster's
 * command line, where a started one shows "postgres: user database ...".
 */
async function waitingBackends(rt: TestRuntime): Promise<number[]> {
  const [postmaster] = await postmastersIn(rt.dataDir);
  const waiting: number[] = [];
  for (const p of await postgresProcessesIn(rt.dataDir)) {
    if (p.ppid !== postmaster?.pid) continue;
    const cmdline = await fs.promises.readFile(`/proc/${p.pid}/cmdline`, 'utf8').catch(() => 'postgres: gone');
    if (!cmdline.startsWith('postgres:')) waiting.push(p.pid);
  }
  return waiting;
}

async function one<T>(client: pg.Client, text: string, values: unknown[] = []): Promise<T> {
  const r = await client.query(text, values);
  return r.rows[0] as T;
}

describe('engine: session lifecycle', function () {
  this.timeout(60_000);

  describe('a pooled backend passed to the next client', function () {
    let rt: TestRuntime;

    before(async function () {
      rt = await startTestRuntime();
    });

    after(async function () {
      await rt?.stop();
    });

    it('carries no session state of the previous client', async function () {
      const setup = await connect(rt.connection());
      await setup.query('DROP SEQUENCE IF EXISTS reuse_seq; CREATE SEQUENCE reuse_seq');
      await setup.end();
      await waitFor('the setup backend to return to the pool', () => rt.runtime.engine.stats().backends.idle >= 1);

      // The first client dirties everything a session can hold.
      const a = await connect(rt.connection());
      const before = await one<{ pid: number; app: string; path: string; timeout: string; datestyle: string }>(
        a,
        "SELECT pg_backend_pid() AS pid, current_setting('application_name') AS app, current_setting('search_path') AS path, current_setting('statement_timeout') AS timeout, current_setting('DateStyle') AS datestyle",
      );
      await a.query("SET application_name = 'dirty_app'");
      await a.query("SET search_path = 'nowhere'");
      await a.query("SET statement_timeout = '1234s'");
      await a.query("SET DateStyle = 'SQL, DMY'");
      // (A temporary table would make the engine close this backend instead: see test/behaviour/pooled-state.)
      await a.query('PREPARE leftover_sql AS SELECT 1');
      await a.query({ name: 'leftover_protocol', text: 'SELECT $1::int AS v', values: [1] });
      await a.query('LISTEN leftover_chan');
      // (An advisory lock would too, since the reset waits for the next hand-out: residue.ts.)
      await a.query('BEGIN; DECLARE leftover_cursor CURSOR WITH HOLD FOR SELECT 1; COMMIT');
      await a.query("SELECT nextval('public.reuse_seq')");
      const dirty = await one<{ n: number; app: string }>(
        a,
        "SELECT (SELECT count(*)::int FROM pg_prepared_statements) AS n, current_setting('application_name') AS app",
      );
      expect(dirty).to.deep.equal({ n: 2, app: 'dirty_app' });
      await a.end();
      await waitFor('the backend to be reset and idle', () => rt.runtime.engine.stats().backends.idle >= 1 && rt.runtime.engine.stats().backends.resetting === 0);

      // The next client on the same (database, user) gets the same PostgreSQL backend, reset.
      const reported = new Map<string, string>();
      const b = new pg.Client(rt.connection());
      b.on('error', () => {});
      (b as unknown as { connection: NodeJS.EventEmitter }).connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) =>
        reported.set(m.parameterName, m.parameterValue),
      );
      await b.connect();
      try {
        const after = await one<{
          pid: number;
          app: string;
          path: string;
          timeout: string;
          datestyle: string;
          temp: string | null;
          prepared: number;
          channels: number;
          cursors: number;
          advisory: number;
        }>(
          b,
          `SELECT pg_backend_pid() AS pid, current_setting('application_name') AS app, current_setting('search_path') AS path,
                  current_setting('statement_timeout') AS timeout, current_setting('DateStyle') AS datestyle,
                  to_regclass('pg_temp.leftover')::text AS temp,
                  (SELECT count(*)::int FROM pg_prepared_statements) AS prepared,
                  (SELECT count(*)::int FROM pg_listening_channels()) AS channels,
                  (SELECT count(*)::int FROM pg_cursors) AS cursors,
                  (SELECT count(*)::int FROM pg_locks WHERE locktype = 'advisory' AND pid = pg_backend_pid()) AS advisory`,
        );
        expect(after.pid, 'the pool should have handed over the same backend').to.equal(before.pid);
        expect(after).to.deep.equal({
          pid: before.pid,
          app: before.app,
          path: before.path,
          timeout: before.timeout,
          datestyle: before.datestyle,
          temp: null,
          prepared: 0,
          channels: 0,
          cursors: 0,
          advisory: 0,
        });
        // What the client was told at connect matches the backend's real settings.
        expect(reported.get('application_name')).to.equal(before.app);
        expect(reported.get('DateStyle')).to.equal(before.datestyle);
        // Sequence state (currval) went with DISCARD ALL.
        const currval = await b.query("SELECT currval('public.reuse_seq')").then(
          () => null,
          (err: { code?: string }) => err.code,
        );
        expect(currval).to.equal('55000');
        // The protocol-level statement name is free again.
        const again = await b.query({ name: 'leftover_protocol', text: 'SELECT $1::int + 1 AS v', values: [1] });
        expect(again.rows[0].v).to.equal(2);
      } finally {
        await b.end();
      }

      // The advisory lock is really released: a third session, straight to PostgreSQL, can take it.
      const direct = await connect(directConnection(rt));
      try {
        expect((await one<{ got: boolean }>(direct, 'SELECT pg_try_advisory_lock(4242) AS got')).got).to.equal(true);
        await direct.query('SELECT pg_advisory_unlock_all()');
      } finally {
        await direct.end();
      }
    });

    it('an idle backend that PostgreSQL ends is never handed to a client, nor one reset after the pool closed', async function () {
      // Through the engine: terminate the pooled backend; the next client is served by a new one.
      const first = await connect(rt.connection());
      const { pid } = await one<{ pid: number }>(first, 'SELECT pg_backend_pid() AS pid');
      await first.end();
      await waitFor('the backend to be idle in the pool', () => rt.runtime.engine.stats().backends.idle >= 1 && rt.runtime.engine.stats().backends.resetting === 0);
      const direct = await connect(directConnection(rt));
      await direct.query('SELECT pg_terminate_backend($1)', [pid]);
      await direct.end();
      const next = await connect(rt.connection());
      expect((await one<{ pid: number }>(next, 'SELECT pg_backend_pid() AS pid')).pid).not.to.equal(pid);
      await next.end();

      // The pool itself, at the worst moment: PostgreSQL's FATAL has been read (the idle watcher
      // destroyed the backend) but the socket's close event, which frees the slot, has not run yet.
      const pool = testPool(rt, 5);
      try {
        const startup = { user: 'postgres', database: 'postgres' };
        const b = await pool.acquire('k', startup);
        pool.release(b, true);
        await waitFor('the backend to be idle', () => pool.stats().idle === 1);
        // Acquire at the moment the idle watcher destroys the backend on PostgreSQL's FATAL.
        const handedOut = new Promise<BackendConnection>((resolve, reject) => {
          const destroy = b.destroy.bind(b);
          b.destroy = () => {
            destroy();
            pool.acquire('k', startup).then(resolve, reject);
          };
        });
        const killer = await connect(directConnection(rt));
        await killer.query('SELECT pg_terminate_backend($1)', [b.pid]);
        await killer.end();
        const c = await handedOut;
        expect(c, 'the pool handed out the backend PostgreSQL had just ended').not.to.equal(b);

        // A session ending cleanly just as the engine stops: its reset is still in flight when the
        // pool closes, and the backend must be closed when the reset completes, not parked idle.
        pool.release(c, true);
        pool.close();
        await waitFor('the reset backend to be closed after pool.close()', () => c.socket.destroyed, 5_000);
        expect(pool.stats()).to.include({ total: 0, idle: 0 });
      } finally {
        pool.close();
      }
    });

    it('starts new backends on prepared connections forked in advance, and on a fresh one when PostgreSQL has ended those', async function () {
      const pool = testPool(rt, 5);
      const startup = { user: 'postgres', database: 'postgres' };
      const before = await waitingBackends(rt);
      const ours = async (): Promise<number[]> => (await waitingBackends(rt)).filter((pid) => !before.includes(pid));
      try {
        await pool.acquire('a', startup);
        // Prepared once the start is done (pool.ts, PREPARE_DELAY_MS), not beside it.
        await waitFor('two prepared connections', () => pool.stats().prepared === 2);
        let prepared: number[] = [];
        await waitFor('two backends forked and waiting for their startup packet', async () => (prepared = await ours()).length === 2);

        const b = await pool.acquire('b', { ...startup, application_name: 'b' });
        expect(prepared, 'the next new backend should be one forked before it was asked for').to.include(b.pid);
        await waitFor('the prepared connection it took replaced', () => pool.stats().prepared === 2);
        expect(pool.stats().total).to.equal(2);
        await waitFor('the replacement forked', async () => (await ours()).length === 2);

        // PostgreSQL ends the waiting ones (as its authentication_timeout would), and the pool does
        // not know yet when the next backend is asked for: that one is opened afresh, no error.
        const waiting = await ours();
        expect(waiting).to.have.length(2);
        for (const pid of waiting) process.kill(pid, 'SIGTERM');
        const c = await pool.acquire('c', { ...startup, application_name: 'c' });
        expect(waiting).not.to.include(c.pid);
        expect(pool.stateOf(c)).to.equal('active');
      } finally {
        pool.close();
      }
      expect(pool.stats().prepared).to.equal(0);
      await waitFor('the prepared backends to exit after pool.close()', async () => (await ours()).length === 0);
    });

    it('a backend released while others wait for other databases is closed at once, not reset first', async function () {
      const pool = testPool(rt, 1);
      try {
        const a = await pool.acquire('a', { user: 'postgres', database: 'postgres' });
        const waiting = pool.acquire('b', { user: 'postgres', database: 'template1' });
        expect(pool.stats().waiting).to.equal(1);
        pool.release(a, true);
        // No DISCARD ALL round trip first: the slot goes to the waiter in the same turn.
        expect(pool.stateOf(a)).to.equal('closed');
        const b = await waiting;
        expect(b.key).to.equal('b');
        // With a waiter for the same database, a clean backend is reset and handed over instead.
        const again = pool.acquire('b', { user: 'postgres', database: 'template1' });
        pool.release(b, true);
        expect(pool.stateOf(b)).not.to.equal('closed');
        expect(await again).to.equal(b);
      } finally {
        pool.close();
      }
    });

    it('a client that vanishes mid-transaction leaves no transaction and no lock behind', async function () {
      const setup = await connect(rt.connection());
      await setup.query("DROP TABLE IF EXISTS vanish; CREATE TABLE vanish (id int PRIMARY KEY, v text); INSERT INTO vanish VALUES (1, 'orig')");

      for (const how of ['idle in transaction', 'failed transaction', 'unsynced extended protocol'] as const) {
        const a = await connect(rt.connection());
        const { pid } = await one<{ pid: number }>(a, 'SELECT pg_backend_pid() AS pid');
        await a.query('BEGIN');
        await a.query(`INSERT INTO vanish VALUES (2, 'uncommitted')`);
        await a.query("UPDATE vanish SET v = 'locked by a' WHERE id = 1");
        if (how === 'failed transaction') await a.query('SELECT 1 / 0').catch(() => undefined);
        const stream = (a as unknown as { connection: { stream: net.Socket } }).connection.stream;
        if (how === 'unsynced extended protocol') {
          // Parse + Bind + Execute without Sync: the statement has not even been told to finish.
          stream.write(Buffer.concat([serialize.parse({ text: 'SELECT 1' }), serialize.bind(), serialize.execute()]));
          await new Promise((r) => setTimeout(r, 100));
        }
        // The socket dies without a Terminate message.
        stream.destroy();

        // Another session updates the locked row; a generous lock_timeout is the upper bound.
        const started = performance.now();
        await setup.query("SET lock_timeout = '10s'");
        const upd = await setup.query("UPDATE vanish SET v = 'after' WHERE id = 1");
        expect(upd.rowCount, how).to.equal(1);
        expect(performance.now() - started, `${how}: waited too long for the row lock`).to.be.below(10_000);
        const rows = await setup.query('SELECT id, v FROM vanish ORDER BY id');
        expect(rows.rows, how).to.deep.equal([{ id: 1, v: 'after' }]);
        await waitFor(`${how}: backend ${pid} to end`, async () => {
          const r = await setup.query('SELECT count(*)::int AS n FROM pg_stat_activity WHERE pid = $1', [pid]);
          return r.rows[0].n === 0;
        });
        const open = await one<{ n: number }>(setup, "SELECT count(*)::int AS n FROM pg_stat_activity WHERE state LIKE 'idle in transaction%'");
        expect(open.n, how).to.equal(0);
        await setup.query("UPDATE vanish SET v = 'orig' WHERE id = 1");
      }
      await setup.query('DROP TABLE vanish');
      await setup.end();
    });
  });

  describe('idle backends over many databases', function () {
    it('keeps at most --max-idle-backends idle, closing the least recently used', async function () {
      const rt = await startTestRuntime({ maxIdleBackends: 2 });
      try {
        const admin = await connect(rt.connection());
        for (let i = 0; i < 5; i++) await admin.query(`CREATE DATABASE idle_${i}`);
        await admin.end();
        const pids: number[] = [];
        for (let i = 0; i < 5; i++) {
          const c = await connect(rt.connection(`idle_${i}`));
          pids.push((await one<{ pid: number }>(c, 'SELECT pg_backend_pid() AS pid')).pid);
          await c.end();
          await waitFor('the backend to be reset', () => rt.runtime.engine.stats().backends.resetting === 0);
        }
        expect(rt.runtime.engine.stats().backends.idle).to.equal(2);
        // The two most recent databases kept theirs: a client there gets the same backend.
        const again = await connect(rt.connection('idle_4'));
        expect((await one<{ pid: number }>(again, 'SELECT pg_backend_pid() AS pid')).pid).to.equal(pids[4]);
        await again.end();
        const direct = await connect(directConnection(rt));
        const { rows } = await direct.query<{ n: number }>("SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname LIKE 'idle\\_%'");
        await direct.end();
        expect(rows[0]!.n).to.be.at.most(2);
      } finally {
        await rt.stop();
      }
    });
  });

  describe('PostgreSQL dying under the engine', function () {
    it('open sessions end, new ones get 57P03 while it restarts, then are served again', async function () {
      const rt = await startTestRuntime();
      try {
        // One backend idle in the pool, one held by a session.
        const idle = await connect(rt.connection());
        await idle.query('SELECT 1');
        const held = new pg.Client(rt.connection());
        const heldError = new Promise<Error & { code?: string }>((resolve) => held.on('error', resolve));
        await held.connect();
        await idle.end();
        await waitFor('a pooled idle backend', () => rt.runtime.engine.stats().backends.idle >= 1);
        await held.query('SELECT 1');

        const postmaster = rt.runtime.supervisor.pid!;
        process.kill(postmaster, 'SIGKILL');
        const ended = await heldError;
        expect(ended.code ?? 'closed', 'how the held session ended').to.be.oneOf(['57P01', 'closed']);
        // A client that connects in the instant before the supervisor notices can still be handed the
        // idle backend while its own FATAL 57P01 is in flight, exactly like a client that connected to
        // PostgreSQL directly a moment before the crash. From the moment the supervisor knows, the
        // engine refuses new sessions itself.
        await waitFor('the supervisor to notice', () => rt.runtime.supervisor.state !== 'ready');

        const refusals = new Set<string>();
        let served = false;
        const deadline = performance.now() + 30_000;
        while (!served && performance.now() < deadline) {
          const c = new pg.Client(rt.connection());
          c.on('error', () => {});
          try {
            await c.connect();
            served = (await c.query('SELECT 1 AS ok')).rows[0].ok === 1;
          } catch (err) {
            refusals.add((err as { code?: string }).code ?? String(err));
          } finally {
            await c.end().catch(() => undefined);
          }
          if (!served) await new Promise((r) => setTimeout(r, 100));
        }
        expect(served, `never served again; refusals: ${[...refusals].join(', ')}`).to.equal(true);
        expect([...refusals].filter((code) => code !== '57P03'), 'refusals other than 57P03').to.deep.equal([]);
        expect(rt.runtime.supervisor.pid).not.to.equal(postmaster);
      } finally {
        await rt.stop();
      }
    });
  });

  describe('a thousand clients at once', function () {
    const CLIENTS = 1000;

    before(function () {
      // Clients and the engine share this process: two sockets per client, plus the backends.
      const needed = 2 * CLIENTS + 1000;
      const limit = raiseOpenFileLimit(needed);
      if (limit < needed) {
        throw new Error(`this test needs ${needed} open files but the limit is ${limit}: raise it (ulimit -n ${needed}) or run as root`);
      }
    });

    /** Served, refused with 53300, or anything else (which fails the test). */
    function tally(results: PromiseSettledResult<void>[]): { served: number; refused: number; other: string[] } {
      let served = 0;
      let refused = 0;
      const other: string[] = [];
      for (const r of results) {
        if (r.status === 'fulfilled') served++;
        else if ((r.reason as { code?: string }).code === '53300') refused++;
        else other.push(String((r.reason as Error).message ?? r.reason));
      }
      return { served, refused, other };
    }

    it('each runs SELECT 1: every one is served or refused with 53300', async function () {
      const rt = await startTestRuntime();
      try {
        const results = await Promise.allSettled(
          Array.from({ length: CLIENTS }, async (_, i) => {
            const c = new pg.Client({ ...rt.connection(), connectionTimeoutMillis: 45_000 });
            c.on('error', () => {});
            try {
              await c.connect();
              const r = await c.query('SELECT $1::int AS i', [i]);
              if (r.rows[0].i !== i) throw new Error(`client ${i} got ${JSON.stringify(r.rows)}`);
            } finally {
              await c.end().catch(() => undefined);
            }
          }),
        );
        const t = tally(results);
        expect(t.other, `unexpected errors: ${[...new Set(t.other)].join('; ')}`).to.deep.equal([]);
        expect(t.served + t.refused).to.equal(CLIENTS);
        expect(t.served).to.be.greaterThan(0);
        const after = await connect(rt.connection());
        expect((await one<{ ok: number }>(after, 'SELECT 1 AS ok')).ok).to.equal(1);
        await after.end();
      } finally {
        await rt.stop();
      }
    });

    it('holding their sessions past the limits: the excess is refused with 53300, the rest served', async function () {
      // 200 client sessions at most, 100 backends, and a short wait for a backend: of 1000 clients that
      // all hold on, some are served and the rest get 53300 either at once or after the wait.
      const rt = await startTestRuntime({ maxClients: 200, maxBackends: 100, backendWaitTimeout: 2 });
      try {
        const clients = Array.from({ length: CLIENTS }, () => {
          const c = new pg.Client({ ...rt.connection(), connectionTimeoutMillis: 45_000 });
          c.on('error', () => {});
          return c;
        });
        const connected = await Promise.allSettled(clients.map((c) => c.connect()));
        const queried = await Promise.allSettled(
          connected.map(async (r, i) => {
            if (r.status === 'rejected') throw r.reason;
            const q = await clients[i]!.query('SELECT 1 AS ok');
            if (q.rows[0].ok !== 1) throw new Error('bad answer');
          }),
        );
        await Promise.allSettled(clients.map((c) => c.end()));
        const t = tally(queried);
        expect(t.other, `unexpected errors: ${[...new Set(t.other)].join('; ')}`).to.deep.equal([]);
        expect(t.served + t.refused).to.equal(CLIENTS);
        expect(t.served).to.be.greaterThan(0);
        expect(t.served).to.be.at.most(100);
        expect(t.refused).to.be.at.least(CLIENTS - 100);
        await waitFor('every session to close', () => rt.runtime.engine.stats().clients === 0);
        const after = await connect(rt.connection());
        expect((await one<{ ok: number }>(after, 'SELECT 1 AS ok')).ok).to.equal(1);
        await after.end();
      } finally {
        await rt.stop();
      }
    });
  });

  describe('pgx start as a process', function () {
    const children = new Set<ChildProcess>();
    let base: string;
    let dataDir: string;
    let socketDir: string;
    let privateSocketDir: string | undefined;

    before(function () {
      base = scratchDir('pgx-life-');
      dataDir = path.join(base, 'data');
      socketDir = path.join(base, 'sock');
      copySeed(dataDir);
    });

    after(async function () {
      for (const child of children) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      // Postmasters our children started and left behind.
      if (dataDir && fs.existsSync(dataDir)) {
        for (const p of await postmastersIn(dataDir)) process.kill(p.pid, 'SIGQUIT');
        await waitFor('postgres to exit', async () => (await postgresProcessesIn(dataDir)).length === 0, 10_000).catch(() => undefined);
      }
      if (base) fs.rmSync(base, { recursive: true, force: true });
      if (privateSocketDir) fs.rmSync(privateSocketDir, { recursive: true, force: true });
    });

    interface Started {
      child: ChildProcess;
      readyLine: string;
      exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
      stderr: () => string;
    }

    async function pgxStart(port: number): Promise<Started> {
      const child = spawn(
        process.execPath,
        ['bin/pgx.js', 'start', '--data-dir', dataDir, '--port', String(port), '--socket-dir', socketDir, '--log-format', 'json', '--max-backends', '10'],
        { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PGX_CONTAINER: '' } },
      );
      children.add(child);
      const errChunks: Buffer[] = [];
      child.stderr!.on('data', (b: Buffer) => errChunks.push(b));
      const stderr = (): string => Buffer.concat(errChunks).toString('utf8');
      const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
        child.once('exit', (code, signal) => resolve({ code, signal })),
      );
      const lines = createInterface({ input: child.stdout! });
      const readyLine = await new Promise<string>((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`pgx start printed no ready line in 40 s:\n${stderr()}`)), 40_000);
        lines.on('line', (line) => {
          if (line.startsWith('PGX ready')) {
            clearTimeout(timer);
            resolve(line);
          }
        });
        void exited.then(({ code, signal }) => {
          clearTimeout(timer);
          reject(new Error(`pgx start exited (${code ?? signal}) before it was ready:\n${stderr()}`));
        });
      });
      return { child, readyLine, exited, stderr };
    }

    function postmasterPid(): number {
      return Number(fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[0]);
    }

    it('comes back after kill -9 (stopping the orphaned postmaster), then stops cleanly on SIGINT', async function () {
      const port = await freePort();
      const first = await pgxStart(port);
      expect(first.readyLine).to.contain(`postgresql://postgres@127.0.0.1:${port}/postgres`);
      privateSocketDir = fs.readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[4];

      const c1 = await connect({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
      await c1.query("DROP TABLE IF EXISTS survives; CREATE TABLE survives (v text); INSERT INTO survives VALUES ('still here')");
      // Through the engine's Unix socket too.
      const viaSocket = await connect({ host: socketDir, port, user: 'postgres', database: 'postgres' });
      expect((await one<{ n: number }>(viaSocket, 'SELECT count(*)::int AS n FROM survives')).n).to.equal(1);
      await viaSocket.end();
      const orphan = postmasterPid();
      expect(await processAlive(orphan)).to.equal(true);

      // kill -9: node dies at once; PostgreSQL, in its own process group, lives on as an orphan.
      first.child.kill('SIGKILL');
      expect((await first.exited).signal).to.equal('SIGKILL');
      await c1.end().catch(() => undefined);
      expect(await processAlive(orphan), 'the postmaster should outlive a kill -9 of pgx').to.equal(true);

      const second = await pgxStart(port);
      expect(await processAlive(orphan), 'the orphaned postmaster should have been stopped').to.equal(false);
      const postmasters = await postmastersIn(dataDir);
      expect(postmasters.map((p) => p.pid), 'postmasters for this data dir').to.deep.equal([postmasterPid()]);
      expect(postmasters[0]!.ppid, "the new postmaster is the new pgx's child").to.equal(second.child.pid);

      const c2 = await connect({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
      expect((await c2.query('SELECT v FROM survives')).rows).to.deep.equal([{ v: 'still here' }]);
      await c2.end();

      // Ctrl-C with a session idle and one inside a transaction: both are told 57P01 (as PostgreSQL
      // tells its own sessions on a fast shutdown), pgx exits 0, and no postgres process is left.
      const sessionErrors: string[] = [];
      const open: pg.Client[] = [];
      for (const inTx of [false, true]) {
        const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
        c.on('error', (err: Error & { code?: string }) => void sessionErrors.push(err.code ?? 'closed'));
        await c.connect();
        if (inTx) await c.query("BEGIN; INSERT INTO survives VALUES ('rolled back')");
        open.push(c);
      }
      second.child.kill('SIGINT');
      const exit = await second.exited;
      await Promise.allSettled(open.map((c) => c.end()));
      expect(sessionErrors.filter((code) => code === '57P01'), `session errors: ${sessionErrors.join(', ')}`).to.have.length(2);
      expect(exit, second.stderr()).to.deep.equal({ code: 0, signal: null });
      expect(await postgresProcessesIn(dataDir)).to.deep.equal([]);
      expect(fs.existsSync(path.join(dataDir, 'postmaster.pid')), 'postmaster.pid after a clean stop').to.equal(false);
    });

    it('a second Ctrl-C exits at once and still leaves no PostgreSQL running', async function () {
      const started = await pgxStart(await freePort());
      started.child.kill('SIGINT');
      await waitFor('the stop to begin', () => started.stderr().includes('"message":"stopping"'));
      started.child.kill('SIGINT');
      const exit = await started.exited;
      // With nothing to wind down, the first stop can end (in ~30 ms) before the second signal comes:
      // node is then on its way out and the signal ends it. Either way no PostgreSQL may be left.
      if (started.stderr().includes('"message":"stopped"')) {
        expect(exit, started.stderr()).to.satisfy((e: { code: number | null }) => e.code === 0 || e.code === null);
      } else {
        expect(exit, started.stderr()).to.deep.equal({ code: 1, signal: null });
        expect(started.stderr()).to.contain('PostgreSQL was asked for a fast shutdown');
      }
      await waitFor('PostgreSQL to finish its shutdown', async () => (await postgresProcessesIn(dataDir)).length === 0, 15_000);
    });
  });
});
