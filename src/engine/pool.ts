// The backend pool: PostgreSQL connections keyed by (database, user, startup parameters), reused
// across client sessions. A backend's state is the set it sits in (PgBouncer's change_server_state):
// prepared, connecting, active (held by a session, or being checked for the next one), idle (also in
// its key's list), closing or replacing (on its way out, its slot still taken), or in none once
// closed. Only setState() moves it, along the moves in MOVES; any other move is a bug. The stats are
// the sets' sizes. When every slot is taken, a client waits in a queue with a timeout; an idle
// backend of another key is closed to make room for it. Over 450 lines: every path moves backends
// through the one state machine here (the sets, MOVES, setState), which split would have two owners.
//
// A new backend starts from a prepared connection when one is at hand: a socket opened earlier, whose
// backend PostgreSQL has already forked and which waits for its startup packet. Taking one skips the
// fork (about 1.4 ms of a 5 ms connect on a 2-core machine), and one is prepared again in its place
// shortly after the start it served, not beside it (PREPARE_DELAY_MS).
// They are kept only while new backends are being opened: unused, they are closed after a while, so an
// idle runtime holds none.
//
// A backend handed to another client must be what a fresh login would give (login-check.ts): it is
// checked first, and one that fails the check is closed and a new one opened in its slot, so that
// PostgreSQL itself refuses the login or applies the new defaults.

import { PgxError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { BackendConnection } from './server.js';
import { BackendUnreachable } from './backend-errors.js';
import type { BackendAddress } from './ports.js';

/** Prepared connections kept while new backends are being opened. */
const PREPARED = 2;
/**
 * A prepared connection unused for this long is closed (and the sweeper runs every 10 s at most), well
 * before PostgreSQL's authentication_timeout (60 s by default) would end it.
 */
const PREPARED_MAX_AGE_MS = 20_000;
/**
 * A start's replacement is prepared this long after it: forked at once, it took CPU from that start
 * and the client's first query (a warm mint's p50 0.4 ms longer on 2 cores, mint-ab, 2026-12-02).
 */
const PREPARE_DELAY_MS = 10;

interface Waiter {
  key: string;
  startup: Record<string, string>;
  /** Slots this waiter may fill: maxBackends for the admin, maxBackends - reserved for others. */
  limit: number;
  resolve(conn: BackendConnection): void;
  reject(err: Error): void;
  timer: NodeJS.Timeout;
}

export interface PoolOptions {
  address: BackendAddress;
  maxBackends: number;
  /**
   * Of maxBackends, kept for the admin's sessions (as PostgreSQL's superuser_reserved_connections):
   * tenants' sessions open backends only while more than this many slots are free.
   */
  reserved?: number;
  /** Idle backends kept at most (over all keys); the least recently used beyond it are closed. */
  maxIdle: number;
  idleTimeoutMs: number;
  waitTimeoutMs: number;
  clock: Clock;
  logger: Logger;
}

export interface PoolStats {
  total: number;
  active: number;
  idle: number;
  connecting: number;
  resetting: number;
  waiting: number;
  /** Prepared connections: forked backends awaiting a startup packet, outside `total`. */
  prepared: number;
}

/**
 * Where a backend stands in the pool; 'closed' is no set at all (the pool has let it go).
 *   prepared:   socket open, startup not sent (outside the slots)
 *   connecting: starting in a slot
 *   active:     held by a session, or being checked for the next one
 *   idle:       in its key's list, watched for PostgreSQL ending it
 *   closing:    found ended while idle; its slot is freed when its socket has closed
 *   replacing:  failed its login check; its slot passes to the backend opened once it has exited
 */
export type PoolState = 'prepared' | 'connecting' | 'active' | 'idle' | 'closing' | 'replacing';

/** The moves setState() makes; anything else is a bug in the pool. */
const MOVES: Record<PoolState | 'new', ReadonlyArray<PoolState | 'closed'>> = {
  new: ['prepared', 'connecting'],
  prepared: ['connecting', 'closed'],
  connecting: ['active', 'closed'],
  active: ['idle', 'replacing', 'closed'],
  idle: ['active', 'closing', 'closed'],
  closing: ['closed'],
  replacing: ['closed'],
};

export class BackendPool {
  /** The backends in each state: membership is the state. */
  private readonly in: Record<PoolState, Set<BackendConnection>> = {
    prepared: new Set(),
    connecting: new Set(),
    active: new Set(),
    idle: new Set(),
    closing: new Set(),
    replacing: new Set(),
  };
  /** Each backend's state, for setState() to know where it moves from. */
  private readonly states = new Map<BackendConnection, PoolState>();
  /** The idle set by key, oldest first: changed with it, in setState(). */
  private readonly idleByKey = new Map<string, BackendConnection[]>();
  private readonly waiters: Waiter[] = [];
  private readonly sweeper: NodeJS.Timeout;
  /** The prepared connections' top-up after a start; null when none is due. */
  private prepareTimer: NodeJS.Timeout | null = null;
  private closed = false;

  constructor(private readonly opts: PoolOptions) {
    this.sweeper = setInterval(() => this.closeExpired(), Math.max(1000, Math.min(opts.idleTimeoutMs / 2, 10_000)));
    this.sweeper.unref();
  }

  /** Where `conn` stands in this pool: the set it sits in, or 'closed' when in none. */
  stateOf(conn: BackendConnection): PoolState | 'closed' {
    return this.states.get(conn) ?? 'closed';
  }

  /**
   * The one place a backend changes state: out of its set, into the next one. Throws on a move that
   * is not in MOVES (a bug: the pool's counts would no longer be true).
   */
  private setState(conn: BackendConnection, next: PoolState | 'closed'): void {
    const from = this.states.get(conn) ?? 'new';
    if (!MOVES[from].includes(next)) throw new Error(`internal error: pooled backend moved from ${from} to ${next}`);
    if (from !== 'new') {
      this.in[from].delete(conn);
      if (from === 'idle') this.leaveIdleList(conn);
    }
    if (next === 'closed') {
      this.states.delete(conn);
      return;
    }
    this.states.set(conn, next);
    this.in[next].add(conn);
    if (next === 'idle') {
      conn.idleSince = this.opts.clock.monotonic();
      conn.watchIdle();
      let list = this.idleByKey.get(conn.key);
      if (!list) this.idleByKey.set(conn.key, (list = []));
      list.push(conn);
    }
  }

  private leaveIdleList(conn: BackendConnection): void {
    conn.unwatchIdle();
    const list = this.idleByKey.get(conn.key);
    if (!list) return;
    const i = list.lastIndexOf(conn);
    if (i >= 0) list.splice(i, 1);
    if (list.length === 0) this.idleByKey.delete(conn.key);
  }

  /**
   * A backend for this key: an idle one, a new one, or one freed later (up to the wait timeout).
   * `admin`: the session may use the reserved slots too. `loginBaseline`: for a new backend, its login
   * baseline read already (server.ts start).
   */
  acquire(key: string, startup: Record<string, string>, admin = false, loginBaseline?: Buffer): Promise<BackendConnection> {
    if (this.closed) return Promise.reject(new PgxError('CANNOT_CONNECT_NOW', 'the database system is shutting down'));
    const reused = this.takeIdle(key);
    if (reused) return this.checked(reused, startup);
    const limit = admin ? this.opts.maxBackends : this.opts.maxBackends - (this.opts.reserved ?? 0);
    // Closing one idle backend helps only if it brings the slots taken under this client's limit.
    if (this.total === limit) this.evictIdleOf(key);
    if (this.total < limit) return this.openNew(key, startup, loginBaseline);
    return new Promise((resolve, reject) => {
      const waiter: Waiter = {
        key,
        startup,
        limit,
        resolve,
        reject,
        timer: setTimeout(() => {
          const i = this.waiters.indexOf(waiter);
          if (i >= 0) this.waiters.splice(i, 1);
          reject(
            new PgxError('TOO_MANY_CONNECTIONS', 'sorry, too many clients already', {
              detail: `All ${limit} PostgreSQL backends ${admin ? '' : 'open to tenants '}stayed busy for ${this.opts.waitTimeoutMs} ms.`,
              hint: 'Raise --max-backends, or shorten sessions; the wait is --backend-wait-timeout.',
            }),
          );
        }, this.opts.waitTimeoutMs),
      };
      this.waiters.push(waiter);
    });
  }

  /**
   * Takes back a backend a session held. `clean` means the session ended idle outside a transaction
   * with nothing in flight, so the backend can be reset and reused; otherwise it is closed.
   */
  release(conn: BackendConnection, clean: boolean): void {
    // Clients waiting for other databases (a burst of new ones) are served sooner by this slot closed
    // now than after a reset that would only end in makeIdle closing it.
    const wantedElsewhere = this.waiters.length > 0 && !this.waiters.some((w) => w.key === conn.key);
    if (!clean || conn.closed || this.closed || wantedElsewhere || !conn.poolable) {
      this.drop(conn);
      this.serveWaiters();
      return;
    }
    // The reset goes out with the next hand-out's login check, in one write (server.ts, checkLogin): a
    // reuse then costs one round trip to PostgreSQL, not two. Session state that others could see
    // until then (a session-level advisory lock) made the session not reusable (residue.ts).
    conn.dirty = true;
    this.makeIdle(conn);
  }

  /**
   * Hands out a backend taken from the idle list once it passes the login check; otherwise it is
   * closed and, once PostgreSQL has let its process go (connection limits count it until then), a new
   * one is opened in the same slot.
   */
  private checked(conn: BackendConnection, startup: Record<string, string>): Promise<BackendConnection> {
    return new Promise((resolve, reject) =>
      conn.checkLogin((ok) => {
        if (ok && !conn.closed && !this.closed) resolve(conn);
        // Not inside the backend's read callback (the verdict's), and a throw becomes the rejection.
        else Promise.resolve().then(() => this.replace(conn, startup)).then(resolve, reject);
      }),
    );
  }

  /** A backend that failed its login check: closed, and a new one opened in its slot once it has gone. */
  private replace(conn: BackendConnection, startup: Record<string, string>): Promise<BackendConnection> {
    // The slot stays taken while the old backend exits and the new one starts (unless its socket
    // closed during the check, which freed the slot already).
    const replacing = this.states.get(conn) === 'active';
    if (replacing) this.setState(conn, 'replacing');
    return conn.closeAndWait().then(() => {
      if (replacing) this.setState(conn, 'closed');
      if (this.closed) {
        this.serveWaiters();
        throw new PgxError('ADMIN_SHUTDOWN', 'terminating connection due to administrator command');
      }
      return this.openNew(conn.key, startup);
    });
  }

  /** Slots taken: every backend in a state but prepared. */
  private get total(): number {
    const s = this.in;
    return s.connecting.size + s.active.size + s.idle.size + s.closing.size + s.replacing.size;
  }

  stats(): PoolStats {
    const s = this.in;
    return {
      total: this.total,
      // Counted as before the states had sets: one on its way out is still active, a replacement connecting.
      active: s.active.size + s.closing.size,
      idle: s.idle.size,
      connecting: s.connecting.size + s.replacing.size,
      // Kept for the status document: the reset now goes out with the next hand-out's login check.
      resetting: 0,
      waiting: this.waiters.length,
      prepared: s.prepared.size,
    };
  }

  /** Closes every idle backend and refuses new acquires; active ones close as their sessions end. */
  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    if (this.prepareTimer !== null) clearTimeout(this.prepareTimer);
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new PgxError('ADMIN_SHUTDOWN', 'terminating connection due to administrator command'));
    }
    for (const c of [...this.in.idle]) this.drop(c);
    for (const c of [...this.in.prepared]) this.drop(c);
  }

  private openNew(key: string, startup: Record<string, string>, loginBaseline?: Buffer): Promise<BackendConnection> {
    const prepared = this.takePrepared();
    let conn = prepared ?? this.fresh();
    this.setState(conn, 'connecting');
    // A pool that keeps no idle backend never hands one to a second client: no login baseline needed.
    const baseline = this.opts.maxIdle > 0 && (loginBaseline ?? true);
    let started = conn.start(startup, key, baseline);
    if (prepared) {
      started = started.catch((err: unknown) => {
        // PostgreSQL ended the waiting backend (its authentication_timeout, a restart): a fresh one
        // takes its slot.
        if (!(err instanceof BackendUnreachable)) throw err;
        this.setState(conn, 'closed');
        conn = this.fresh();
        this.setState(conn, 'connecting');
        return conn.start(startup, key, baseline);
      });
    }
    return started.then(
      () => {
        this.setState(conn, 'active');
        conn.socket.once('close', () => this.onClosed(conn));
        this.prepareSoon();
        return conn;
      },
      (err: unknown) => {
        this.setState(conn, 'closed');
        this.serveWaiters();
        throw err;
      },
    );
  }

  private fresh(): BackendConnection {
    return BackendConnection.prepare(this.opts.address, this.opts.clock.monotonic());
  }

  /** A prepared connection young enough to start; older or closed ones found on the way are closed. */
  private takePrepared(): BackendConnection | undefined {
    const oldest = this.opts.clock.monotonic() - PREPARED_MAX_AGE_MS;
    for (const conn of this.in.prepared) {
      if (!conn.closed && conn.openedAt > oldest) return conn;
      this.drop(conn);
    }
    return undefined;
  }

  /** Tops the prepared connections up PREPARE_DELAY_MS from now, while slots are free for them to start in. */
  private prepareSoon(): void {
    if (this.prepareTimer !== null || this.closed) return;
    this.prepareTimer = setTimeout(() => {
      this.prepareTimer = null;
      const prepared = this.in.prepared;
      while (!this.closed && prepared.size < PREPARED && this.total + prepared.size < this.opts.maxBackends) {
        this.setState(this.fresh(), 'prepared');
      }
    }, PREPARE_DELAY_MS).unref();
  }

  /** Closes the idle backends on `database` (it is about to be dropped); returns how many. */
  closeIdleOf(database: string): number {
    const prefix = `${database}\0`;
    let n = 0;
    for (const [key, list] of [...this.idleByKey]) {
      if (!key.startsWith(prefix)) continue;
      for (const conn of [...list]) {
        this.drop(conn);
        n++;
      }
    }
    return n;
  }

  /**
   * The most recently used idle backend of `key`, now active: it is warm, and the oldest ones age
   * out. One PostgreSQL has just ended (the idle watcher destroyed it) is skipped: its slot is freed
   * when its socket has closed.
   */
  private takeIdle(key: string): BackendConnection | undefined {
    const list = this.idleByKey.get(key);
    if (!list) return undefined;
    let conn: BackendConnection | undefined;
    while ((conn = list[list.length - 1]) !== undefined) {
      if (!conn.closed) {
        this.setState(conn, 'active');
        return conn;
      }
      this.setState(conn, 'closing');
    }
    return undefined;
  }

  /** A released backend: to a client waiting for its key, else idle, else closed for another key's waiter. */
  private makeIdle(conn: BackendConnection): void {
    if (conn.closed) return;
    // A reset that finishes after close() must not park the backend in a pool nobody will sweep.
    if (this.closed) return this.drop(conn);
    const waiterIndex = this.waiters.findIndex((w) => w.key === conn.key);
    if (waiterIndex >= 0) {
      const [w] = this.waiters.splice(waiterIndex, 1);
      clearTimeout(w!.timer);
      this.checked(conn, w!.startup).then(w!.resolve, w!.reject);
      return;
    }
    if (this.waiters.length > 0) {
      // Someone waits for another key: this slot serves them better closed and reopened.
      this.drop(conn);
      this.serveWaiters();
      return;
    }
    this.setState(conn, 'idle');
    // Each idle backend holds a couple of MB: a thousand databases queried once must not keep a
    // backend each until the idle timeout.
    if (this.in.idle.size > this.opts.maxIdle) this.evictIdleOf(null);
  }

  /** Closes the least recently used idle backend of a key other than `key` (null: of any key). */
  private evictIdleOf(key: string | null): void {
    let victim: BackendConnection | undefined;
    for (const [k, list] of this.idleByKey) {
      if (k === key || list.length === 0) continue;
      const oldest = list[0]!;
      if (!victim || oldest.idleSince < victim.idleSince) victim = oldest;
    }
    if (victim) this.drop(victim);
  }

  /**
   * Closes a backend and frees its slot at once. PostgreSQL's max_connections keeps headroom over
   * --max-backends, so a new backend may start before the old process has quite exited.
   */
  private drop(conn: BackendConnection): void {
    conn.destroy();
    if (this.states.has(conn)) this.setState(conn, 'closed');
  }

  /** Its socket closed: the slot is free, unless a replacement takes it over (checked). */
  private onClosed(conn: BackendConnection): void {
    const state = this.states.get(conn);
    if (state === undefined || state === 'replacing') return;
    this.setState(conn, 'closed');
    this.serveWaiters();
  }

  /**
   * Gives free slots to waiting clients, in arrival order; one that cannot have a slot (a tenant when
   * only reserved ones are free) does not hold up the admin behind it.
   */
  private serveWaiters(): void {
    for (let i = 0; i < this.waiters.length; ) {
      const w = this.waiters[i]!;
      const reused = this.takeIdle(w.key);
      if (!reused) {
        if (this.total === w.limit) this.evictIdleOf(w.key);
        if (this.total >= w.limit) {
          if (this.total >= this.opts.maxBackends) return;
          i++;
          continue;
        }
      }
      this.waiters.splice(i, 1);
      clearTimeout(w.timer);
      if (reused) this.checked(reused, w.startup).then(w.resolve, w.reject);
      else this.openNew(w.key, w.startup).then(w.resolve, w.reject);
    }
  }

  private closeExpired(): void {
    const now = this.opts.clock.monotonic();
    for (const conn of [...this.in.prepared]) {
      if (conn.closed || conn.openedAt <= now - PREPARED_MAX_AGE_MS) this.drop(conn);
    }
    const cutoff = now - this.opts.idleTimeoutMs;
    for (const conn of [...this.in.idle]) if (conn.idleSince <= cutoff) this.drop(conn);
  }
}
