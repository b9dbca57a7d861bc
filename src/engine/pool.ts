// The backend pool: PostgreSQL connections keyed by (database, user, startup parameters), reused
// across client sessions. A backend is in exactly one place: connecting, active (held by a session,
// or being checked for the next one), or idle (in its key's list). When every slot is taken, a client waits in a queue with a
// timeout; an idle backend of another key is closed to make room for it.
//
// A new backend starts from a prepared connection when one is at hand: a socket opened earlier, whose
// backend PostgreSQL has already forked and which waits for its startup packet. Taking one skips the
// fork (about 1.4 ms of a 5 ms connect on a 2-core machine), and one is prepared again in its place.
// They are kept only while new backends are being opened: unused, they are closed after a while, so an
// idle runtime holds none.
//
// A backend handed to another client must be what a fresh login would give (login-check.ts): it is
// checked first, and one that fails the check is closed and a new one opened in its slot, so that
// PostgreSQL itself refuses the login or applies the new defaults.

import { PgxError } from '../errors.js';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { BackendConnection, BackendUnreachable } from './server.js';
import type { BackendAddress } from './ports.js';

/** Prepared connections kept while new backends are being opened. */
const PREPARED = 2;
/**
 * A prepared connection unused for this long is closed (and the sweeper runs every 10 s at most), well
 * before PostgreSQL's authentication_timeout (60 s by default) would end it.
 */
const PREPARED_MAX_AGE_MS = 20_000;

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

export class BackendPool {
  private readonly idle = new Map<string, BackendConnection[]>();
  private idleCount = 0;
  /** Backends that occupy a slot once connected (active or idle); a dropped one leaves at once. */
  private readonly members = new Set<BackendConnection>();
  private connecting = 0;
  private readonly waiters: Waiter[] = [];
  private readonly prepared: BackendConnection[] = [];
  private readonly sweeper: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly opts: PoolOptions) {
    this.sweeper = setInterval(() => this.closeExpired(), Math.max(1000, Math.min(opts.idleTimeoutMs / 2, 10_000)));
    this.sweeper.unref();
  }

  /**
   * A backend for this key: an idle one, a new one, or one freed later (up to the wait timeout).
   * `admin`: the session may use the reserved slots too.
   */
  acquire(key: string, startup: Record<string, string>, admin = false): Promise<BackendConnection> {
    if (this.closed) return Promise.reject(new PgxError('CANNOT_CONNECT_NOW', 'the database system is shutting down'));
    const reused = this.takeIdle(key);
    if (reused) return this.checked(reused, startup);
    const limit = admin ? this.opts.maxBackends : this.opts.maxBackends - (this.opts.reserved ?? 0);
    // Closing one idle backend helps only if it brings the slots taken under this client's limit.
    if (this.total === limit) this.evictIdleOf(key);
    if (this.total < limit) return this.openNew(key, startup);
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
    if (!clean || conn.state === 'closed' || this.closed || wantedElsewhere || !conn.poolable) {
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
    return conn.checkLogin().then((ok) => {
      if (ok && conn.state !== 'closed' && !this.closed) return conn;
      this.members.delete(conn);
      // The slot stays taken while the old backend exits and the new one starts.
      this.connecting++;
      return conn.closeAndWait().then(() => {
        this.connecting--;
        if (this.closed) {
          this.serveWaiters();
          throw new PgxError('ADMIN_SHUTDOWN', 'terminating connection due to administrator command');
        }
        return this.openNew(conn.key, startup);
      });
    });
  }

  /** Slots taken: connected members plus connections being opened. */
  private get total(): number {
    return this.members.size + this.connecting;
  }

  stats(): PoolStats {
    return {
      total: this.total,
      active: this.total - this.idleCount - this.connecting,
      idle: this.idleCount,
      connecting: this.connecting,
      // Kept for the status document: the reset now goes out with the next hand-out's login check.
      resetting: 0,
      waiting: this.waiters.length,
      prepared: this.prepared.length,
    };
  }

  /** Closes every idle backend and refuses new acquires; active ones close as their sessions end. */
  close(): void {
    this.closed = true;
    clearInterval(this.sweeper);
    for (const w of this.waiters.splice(0)) {
      clearTimeout(w.timer);
      w.reject(new PgxError('ADMIN_SHUTDOWN', 'terminating connection due to administrator command'));
    }
    for (const list of [...this.idle.values()]) for (const c of [...list]) this.removeIdle(c), this.drop(c);
    for (const c of this.prepared.splice(0)) c.destroy();
  }

  private openNew(key: string, startup: Record<string, string>): Promise<BackendConnection> {
    this.connecting++;
    const prepared = this.takePrepared();
    this.prepare();
    // A pool that keeps no idle backend never hands one to a second client: no login baseline needed.
    const baseline = this.opts.maxIdle > 0;
    const started = prepared
      ? prepared.start(startup, key, baseline).catch((err: unknown) => {
          // PostgreSQL ended the waiting backend (its authentication_timeout, a restart): a fresh one.
          if (!(err instanceof BackendUnreachable)) throw err;
          return this.fresh().start(startup, key, baseline);
        })
      : this.fresh().start(startup, key, baseline);
    return started.then(
      (conn) => {
        this.connecting--;
        this.members.add(conn);
        conn.socket.once('close', () => this.onClosed(conn));
        return conn;
      },
      (err: unknown) => {
        this.connecting--;
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
    let conn: BackendConnection | undefined;
    while ((conn = this.prepared.shift()) !== undefined) {
      if (conn.state !== 'closed' && conn.openedAt > oldest) return conn;
      conn.destroy();
    }
    return undefined;
  }

  /** Tops the prepared connections up, while a slot is free for them to start in. */
  private prepare(): void {
    while (!this.closed && this.prepared.length < PREPARED && this.total + this.prepared.length < this.opts.maxBackends) {
      this.prepared.push(this.fresh());
    }
  }

  /** Closes the idle backends on `database` (it is about to be dropped); returns how many. */
  closeIdleOf(database: string): number {
    const prefix = `${database}\0`;
    let n = 0;
    for (const [key, list] of [...this.idle]) {
      if (!key.startsWith(prefix)) continue;
      for (const conn of [...list]) {
        this.removeIdle(conn);
        this.drop(conn);
        n++;
      }
    }
    return n;
  }

  private takeIdle(key: string): BackendConnection | undefined {
    const list = this.idle.get(key);
    if (!list) return undefined;
    // Most recently used first: it is warm, and the oldest ones age out. Skip one PostgreSQL has just
    // ended (the idle watcher destroyed it; its close event, which frees the slot, is still to come).
    let conn: BackendConnection | undefined;
    while ((conn = list.pop()) !== undefined) {
      this.idleCount--;
      conn.unwatchIdle();
      if (conn.state !== 'closed') break;
    }
    if (list.length === 0) this.idle.delete(key);
    if (!conn) return undefined;
    conn.state = 'active';
    return conn;
  }

  private makeIdle(conn: BackendConnection): void {
    if (conn.state === 'closed') return;
    // A reset that finishes after close() must not park the backend in a pool nobody will sweep.
    if (this.closed) return this.drop(conn);
    const waiterIndex = this.waiters.findIndex((w) => w.key === conn.key);
    if (waiterIndex >= 0) {
      const [w] = this.waiters.splice(waiterIndex, 1);
      clearTimeout(w!.timer);
      conn.state = 'active';
      this.checked(conn, w!.startup).then(w!.resolve, w!.reject);
      return;
    }
    if (this.waiters.length > 0) {
      // Someone waits for another key: this slot serves them better closed and reopened.
      this.drop(conn);
      this.serveWaiters();
      return;
    }
    conn.state = 'idle';
    conn.idleSince = this.opts.clock.monotonic();
    conn.watchIdle();
    let list = this.idle.get(conn.key);
    if (!list) this.idle.set(conn.key, (list = []));
    list.push(conn);
    this.idleCount++;
    // Each idle backend holds a couple of MB: a thousand databases queried once must not keep a
    // backend each until the idle timeout.
    if (this.idleCount > this.opts.maxIdle) this.evictIdleOf(null);
  }

  /** Closes the least recently used idle backend of a key other than `key` (null: of any key). */
  private evictIdleOf(key: string | null): void {
    let victim: BackendConnection | undefined;
    for (const [k, list] of this.idle) {
      if (k === key || list.length === 0) continue;
      const oldest = list[0]!;
      if (!victim || oldest.idleSince < victim.idleSince) victim = oldest;
    }
    if (victim) {
      this.removeIdle(victim);
      this.drop(victim);
    }
  }

  private removeIdle(conn: BackendConnection): void {
    const list = this.idle.get(conn.key);
    if (!list) return;
    const i = list.indexOf(conn);
    if (i < 0) return;
    list.splice(i, 1);
    if (list.length === 0) this.idle.delete(conn.key);
    this.idleCount--;
    conn.unwatchIdle();
  }

  /**
   * Closes a backend and frees its slot at once. PostgreSQL's max_connections keeps headroom over
   * --max-backends, so a new backend may start before the old process has quite exited.
   */
  private drop(conn: BackendConnection): void {
    conn.destroy();
    this.members.delete(conn);
  }

  private onClosed(conn: BackendConnection): void {
    this.removeIdle(conn);
    conn.state = 'closed';
    if (this.members.delete(conn)) this.serveWaiters();
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
    const stale = this.prepared.filter((c) => c.state === 'closed' || c.openedAt <= now - PREPARED_MAX_AGE_MS);
    for (const conn of stale) {
      this.prepared.splice(this.prepared.indexOf(conn), 1);
      conn.destroy();
    }
    const cutoff = now - this.opts.idleTimeoutMs;
    for (const list of [...this.idle.values()]) {
      for (const conn of [...list]) {
        if (conn.idleSince <= cutoff) {
          this.removeIdle(conn);
          this.drop(conn);
        }
      }
    }
  }
}
