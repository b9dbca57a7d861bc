// The trash: databases already dropped as far as anyone can tell (renamed to pgx_trash_<oid>, closed
// to connections, owned by the runtime, their records gone) whose DROP DATABASE has not run yet. A
// drop answers once its database is renamed away (dropper.ts); the DROP DATABASE itself (a buffer
// scan, a checkpoint request, a barrier over every backend, the files unlinked) runs here, in the
// background, one at a time on a connection of its own at the lowest CPU priority, and holds back
// while a mint copies a template or waits to (the warm pool's refill holds back only for waiting
// mints). Each trash database holds its disk until dropped, and a loop of mints and drops can outpace
// DROP DATABASE (the churn bench, 22 lifecycles a second on ext4, ran the disk down to the disk
// guard's reserve): once the bound waits (100 databases where files are copied, 1,000 where they are
// clones that share the template's blocks), drops stop holding back, and a drop call answers only when
// the backlog is under the bound again (room()), so callers go at the pace PostgreSQL drops. Trash
// survives restarts by its name: reconcile adds every pgx_trash_ database a superuser owns.

import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import { atLowestPriority, HOLD_MAX_MS, nextBackoffMs, Pause, YIELD_MS } from './background-work.js';
import { quoteIdent, type SqlClient } from '../postgres/sql-client.js';
import type { Counters } from './counters.js';
import { isTrashName } from './names.js';

export interface TrashOptions {
  /** The connection the DROP DATABASEs run on (its own: a drop must not hold up a rename). */
  connect: () => Promise<SqlClient>;
  /** True while a mint copies a template or waits to: drops hold back meanwhile. */
  mintsInFlight: () => boolean;
  /** False while the data filesystem is low on space (disk-guard.ts): drops then hold back for nobody. */
  hasRoom?: () => boolean;
  /** True where the data filesystem clones files: a trash database then holds little disk of its own. */
  clones: boolean;
  /** How long its connection stays after the trash is emptied (settings.ts, dropConnectionIdleMs). */
  idleCloseMs: number;
  /** Trash databases at most before drop calls wait (the default bound for `clones`; tests lower it). */
  backlogBound?: number;
  counters: Counters;
  clock: Clock;
  logger: Logger;
}

/**
 * From this backlog on, drops no longer hold back and drop calls wait for room: on a filesystem that
 * copies, 100 copies of the template; where files are clones, enough that a burst of drops (16
 * lifecycle loops at once, the lifecycles bench) never waits.
 */
const BACKLOG_BOUND = { copies: 100, clones: 1000 };

export class Trash {
  private readonly conn: AdminConnection;
  /** Trash names not dropped yet, the one being dropped included, oldest first. */
  private readonly pending = new Set<string>();
  private emptying: Promise<void> | null = null;
  /** Until start(), names are queued and nothing is dropped (the runtime's start-up still reads base/). */
  private started = false;
  private stopped = false;
  private backoffMs = 0;
  private readonly pause = new Pause();
  private readonly bound: number;
  /** Drop calls waiting for the backlog to fall under the bound. */
  private roomWaiters: (() => void)[] = [];

  constructor(private readonly opts: TrashOptions) {
    this.conn = new AdminConnection(async () => atLowestPriority(await opts.connect(), opts.logger, 'trash-priority-not-lowered'));
    this.bound = opts.backlogBound ?? (opts.clones ? BACKLOG_BOUND.clones : BACKLOG_BOUND.copies);
  }

  /** Resolves once the backlog is under the bound (at once if it is), or the trash stopped. */
  room(): Promise<void> {
    if (this.pending.size < this.bound || this.stopped) return Promise.resolve();
    return new Promise((resolve) => this.roomWaiters.push(resolve));
  }

  private wakeRoomWaiters(): void {
    if (this.pending.size >= this.bound && !this.stopped) return;
    const waiters = this.roomWaiters;
    this.roomWaiters = [];
    for (const wake of waiters) wake();
  }

  /** Trash databases not dropped yet (the runtime status's `databases.trash`). */
  get backlog(): number {
    return this.pending.size;
  }

  /** Queues trash `name` for its DROP DATABASE; false when it was queued already (or is no trash name). */
  add(name: string): boolean {
    if (!isTrashName(name) || this.pending.has(name)) return false;
    this.pending.add(name);
    this.kick();
    return true;
  }

  /** Begins dropping what is queued, and what is queued from now on. */
  start(): void {
    this.started = true;
    this.kick();
  }

  /** Resolves once the trash is empty, or the trash stopped (tests wait for the background with it). */
  async emptied(): Promise<void> {
    while (this.emptying !== null) await this.emptying;
  }

  /** Drops nothing more (the one in progress finishes); what is left is dropped after the next start. */
  async stop(): Promise<void> {
    this.stopped = true;
    this.pause.end();
    this.wakeRoomWaiters();
    await this.emptying;
    await this.conn.close();
  }

  private kick(): void {
    if (!this.started || this.stopped || this.emptying !== null) return;
    this.emptying = this.empty().finally(() => {
      this.emptying = null;
      // A name added after the loop found none, before this ran, found it still running.
      if (this.pending.size > 0) this.kick();
    });
  }

  private async empty(): Promise<void> {
    let heldSince: number | null = null;
    while (!this.stopped) {
      const name = this.pending.values().next().value;
      if (name === undefined) {
        this.conn.closeWhenIdle(this.opts.idleCloseMs);
        return;
      }
      if (this.holdsBack(heldSince)) {
        heldSince ??= this.opts.clock.monotonic();
        await this.pause.for(YIELD_MS);
        continue;
      }
      heldSince = null;
      try {
        const started = this.opts.clock.monotonic();
        await (await this.conn.get()).query(`DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`);
        this.pending.delete(name);
        this.wakeRoomWaiters();
        this.backoffMs = 0;
        this.opts.counters.add('trash.dropped');
        this.opts.logger.debug('trash-dropped', { database: name, ms: Math.round(this.opts.clock.monotonic() - started), backlog: this.pending.size });
      } catch (err) {
        // Still in pg_database, still named as trash: retried here, or by the next runtime's reconcile.
        this.backoffMs = nextBackoffMs(this.backoffMs);
        this.opts.logger.warn('trash-drop-failed', { database: name, err, retryInMs: this.backoffMs });
        await this.pause.for(this.backoffMs);
      }
    }
  }

  /** Whether the next drop waits: a mint is in flight, unless the disk is low, the backlog long, or it waited long enough. */
  private holdsBack(heldSince: number | null): boolean {
    if (!this.opts.mintsInFlight()) return false;
    if (this.opts.hasRoom?.() === false || this.pending.size >= this.bound) return false;
    return heldSince === null || this.opts.clock.monotonic() - heldSince < HOLD_MAX_MS;
  }
}
