// The engine: listens on TCP and on a Unix socket, and gives every accepted connection a ClientSession.

import { randomBytes } from 'node:crypto';
import net from 'node:net';
import fs from 'node:fs';
import { PgxError } from '../errors.js';
import { CancelFailures, CancelKeys } from './cancel.js';
import { ClientSession, type ClientPeer, type ClientSocketSource } from './client.js';
import { AUTH_OK_HOLD_MS } from './client-login.js';
import { Deadlines } from './deadlines.js';
import type { EngineContext } from './context.js';
import { BackendPool, type PoolStats } from './pool.js';
import type { EngineOptions } from './ports.js';
import { SessionSlots } from './session-slots.js';
import { BackendShares } from './backend-shares.js';
import { MemoryWatchdog } from './memory-watchdog.js';
import { ActiveSlots } from './active-slots.js';
import { LoginFailures } from './login-failures.js';
import { acceptWithOnread } from './accept-onread.js';
import { errorResponse } from '../wire/error-response.js';
import { socketPath } from '../wire/socket-path.js';

/**
 * Idle pooled backends kept unless told otherwise: enough for an app's reconnects, not one per
 * database. Each costs about 3 MB of PSS (density benchmark: 20 of them put 1,000 queried databases
 * at 164 MB, over the 160 MB bar).
 */
const DEFAULT_MAX_IDLE_BACKENDS = 10;

/** Backends kept for the admin unless told otherwise, as PostgreSQL's superuser_reserved_connections. */
const DEFAULT_RESERVED_BACKENDS = 3;

/** The backends one role, or one database, may hold by default: this share of the unreserved ones. */
const DEFAULT_BACKEND_SHARE = 0.5;

/** Reserved backends, and each role's and database's share, from the options and their defaults. */
function backendShares(o: Pick<EngineOptions, 'maxBackends' | 'reservedBackends' | 'maxBackendsPerRole' | 'maxBackendsPerDatabase'>): {
  reserved: number;
  perRole: number;
  perDatabase: number;
} {
  const reserved = Math.min(o.reservedBackends ?? Math.min(DEFAULT_RESERVED_BACKENDS, Math.floor(o.maxBackends / 4)), o.maxBackends - 1);
  const share = Math.max(1, Math.floor((o.maxBackends - reserved) * DEFAULT_BACKEND_SHARE));
  return { reserved, perRole: o.maxBackendsPerRole ?? share, perDatabase: o.maxBackendsPerDatabase ?? share };
}

/** Failed logins per (source address, user) and minute before that pair's attempts take turns. */
const DEFAULT_LOGIN_FAILURE_LIMIT = 20;

/** Longest a throttled login is held for its turn before it is refused instead (half the login timeout at most). */
const MAX_LOGIN_TURN_WAIT_MS = 5_000;

/** How long a transaction may wait for an active slot on its database (--active-wait-timeout). */
const DEFAULT_ACTIVE_WAIT_MS = 30_000;

export interface EngineStats {
  clients: number;
  backends: PoolStats;
  memory: MemoryStats;
  /** Sessions waiting for an active slot on their database. */
  activeWaiting: number;
}

export interface MemoryStats {
  /** The largest sum of tenant backends' memory seen, MB. */
  peak_mb: number;
  /** Statements canceled for crossing a memory limit, per limit. */
  canceled: { session: number; database: number; runtime: number; cgroup: number };
  /** Sessions ended with FATAL 53200 for the memory they held between statements (runtime limit). */
  sessions_ended: number;
}

const UNIX_PEER: ClientPeer = { unix: true, address: undefined };

export class Engine {
  private readonly servers: net.Server[] = [];
  private readonly ctx: EngineContext;
  private unixPath: string | null = null;
  private readonly watchdog: MemoryWatchdog | null;

  constructor(readonly options: EngineOptions) {
    const shares = backendShares(options);
    this.ctx = {
      options,
      pool: new BackendPool({
        address: options.backend,
        maxBackends: options.maxBackends,
        reserved: shares.reserved,
        maxIdle: options.maxIdleBackends ?? DEFAULT_MAX_IDLE_BACKENDS,
        idleTimeoutMs: options.backendIdleTimeoutMs,
        waitTimeoutMs: options.backendWaitTimeoutMs,
        clock: options.clock,
        logger: options.logger,
      }),
      cancelKeys: new CancelKeys(),
      cancelFailures: new CancelFailures(options.clock),
      sessions: new Set(),
      slots: new SessionSlots(),
      loginFailures: new LoginFailures(
        options.loginFailureLimit === undefined ? DEFAULT_LOGIN_FAILURE_LIMIT : options.loginFailureLimit,
        options.clock,
        Math.min(MAX_LOGIN_TURN_WAIT_MS, options.loginTimeoutMs / 2),
      ),
      mockAuthSecret: options.mockAuthSecret ?? randomBytes(32),
      shares: new BackendShares({ perRole: shares.perRole, perDatabase: shares.perDatabase, maxBackends: options.maxBackends }),
      activeSlots: new ActiveSlots(options.maxActivePerDatabase ?? null, options.activeWaitTimeoutMs ?? DEFAULT_ACTIVE_WAIT_MS),
      loginDeadlines: new Deadlines(options.loginTimeoutMs, (login) => login.onLoginTimeout()),
      authHolds: new Deadlines(AUTH_OK_HOLD_MS, (login) => login.flushAuth()),
      logger: options.logger,
    };
    this.watchdog = options.memoryLimits ? new MemoryWatchdog(options.memoryLimits, () => this.ctx.sessions, options.logger) : null;
  }

  /** The TCP port actually bound (differs from options.port when that is 0). */
  port = 0;

  async start(): Promise<void> {
    // Each connection gets one socket, made by the session around its read buffer (acceptWithOnread).
    // Sockets net.Server makes itself (if this Node's server cannot be hooked) come paused.
    const tcp = net.createServer({ noDelay: true, pauseOnConnect: true }, (socket) => this.accept(socket, { unix: false, address: socket.remoteAddress }));
    await listen(tcp, { host: this.options.host, port: this.options.port });
    acceptWithOnread(tcp, true, (source, address) => this.accept(source, { unix: false, address }));
    this.servers.push(tcp);
    this.watchdog?.start();
    const address = tcp.address();
    this.port = typeof address === 'object' && address ? address.port : this.options.port;
    if (this.options.socketDir !== null) {
      fs.mkdirSync(this.options.socketDir, { recursive: true });
      const unixPath = socketPath(this.options.socketDir, this.port);
      await removeStaleSocket(unixPath);
      const unix = net.createServer({ pauseOnConnect: true }, (socket) => this.accept(socket, UNIX_PEER));
      await listen(unix, { path: unixPath });
      acceptWithOnread(unix, false, (source) => this.accept(source, UNIX_PEER));
      fs.chmodSync(unixPath, 0o777);
      this.unixPath = unixPath;
      this.servers.push(unix);
    }
  }

  stats(): EngineStats {
    const w = this.watchdog;
    return {
      clients: this.ctx.sessions.size,
      backends: this.ctx.pool.stats(),
      activeWaiting: this.ctx.activeSlots.waiting,
      memory: { peak_mb: Math.round(w?.peakMb ?? 0), canceled: { ...(w?.cancels ?? { session: 0, database: 0, runtime: 0, cgroup: 0 }) }, sessions_ended: w?.sessionsEnded ?? 0 },
    };
  }

  /** Ends every session on a database with FATAL 57P01 (a dropped, expired or restored database). */
  terminateSessions(database: string, message: string, hint?: string): number {
    let n = 0;
    for (const session of [...this.ctx.sessions]) {
      if (session.database === database && session.state !== 'closed') {
        session.terminate(message, hint);
        n++;
      }
    }
    return n;
  }

  /**
   * Cancels the statement in progress on the sessions these backends serve; each client reads an
   * ERROR with SQLSTATE 53100 (disk_full) and `error`'s text instead of 57014, and its session goes
   * on. The runtime's disk guard stops a tenant filling the data filesystem this way. Returns how many.
   */
  cancelDiskWriters(pids: ReadonlySet<number>, error: { message: string; detail: string; hint: string }): number {
    let n = 0;
    for (const session of this.ctx.sessions) {
      const pid = session.backendPid;
      if (pid === null || !pids.has(pid) || !session.busy) continue;
      session.cancelStatement(errorResponse({ severity: 'ERROR', code: '53100', ...error }));
      n++;
    }
    return n;
  }

  /** Closes the idle pooled backends on a database about to be dropped; returns how many. */
  closeIdleBackends(database: string): number {
    return this.ctx.pool.closeIdleOf(database);
  }

  /** Client sessions per database, counting only those past authentication. */
  sessionsPerDatabase(): Map<string, number> {
    const counts = new Map<string, number>();
    for (const s of this.ctx.sessions) if (s.state === 'active') counts.set(s.database, (counts.get(s.database) ?? 0) + 1);
    return counts;
  }

  /** Stops listening, ends every session with 57P01 and closes every backend. */
  async stop(): Promise<void> {
    // close() resolves only once every accepted connection is gone, so end the sessions meanwhile.
    this.watchdog?.stop();
    const closed = Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
    this.servers.length = 0;
    for (const session of [...this.ctx.sessions]) session.terminate('terminating connection due to administrator command');
    this.ctx.pool.close();
    this.ctx.loginDeadlines.clear();
    this.ctx.authHolds.clear();
    await closed;
    if (this.unixPath) fs.rmSync(this.unixPath, { force: true });
  }

  private accept(source: ClientSocketSource, peer: ClientPeer): void {
    const session = new ClientSession(source, this.ctx, peer);
    this.ctx.sessions.add(session);
  }
}

function listen(server: net.Server, opts: net.ListenOptions): Promise<void> {
  return new Promise((resolve, reject) => {
    const onError = (err: NodeJS.ErrnoException): void => {
      const where = opts.path ?? `${opts.host}:${opts.port}`;
      reject(
        new PgxError('CONFIG_INVALID', `could not listen on ${where}: ${err.message}`, {
          hint: err.code === 'EADDRINUSE' ? 'Another server uses that address; pick another with --port or --socket-dir.' : undefined,
          cause: err,
        }),
      );
    };
    server.once('error', onError);
    server.listen({ ...opts, backlog: 4096 }, () => {
      server.off('error', onError);
      resolve();
    });
  });
}

/** A socket file left by a killed runtime blocks listen(); remove it if nobody answers on it. */
/**
 * A socket file a killed runtime left behind is removed; one a live server answers on is not (a
 * PostgreSQL listening only on its socket in the same directory holds no TCP port that listen()
 * above would have found taken): removing it would take that server's clients.
 */
async function removeStaleSocket(p: string): Promise<void> {
  if (!fs.existsSync(p)) return;
  const live = await new Promise<boolean>((resolve) => {
    const probe = net.connect({ path: p });
    probe.once('connect', () => (probe.destroy(), resolve(true)));
    probe.once('error', () => resolve(false));
  });
  if (live) {
    throw new PgxError('CONFIG_INVALID', `another server listens on ${p}`, { hint: 'Stop it, or choose another --port or --socket-dir.' });
  }
  fs.rmSync(p, { force: true });
}
