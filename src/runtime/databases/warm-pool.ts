// The warm pool: per sealed template, spare databases made ahead of time, so a mint is a rename
// instead of a copy. It keeps `size` spares (--pool-size), and more when mints outpace it (a burst,
// or one client's quick loop): a mint that finds no spare ready after a handout emptied the pool,
// or while others wait, raises the template's target to `size` plus the mints of it in flight, up
// to `max` (--pool-max; on a filesystem that cannot clone, also while the extra spares' copies stay
// under a tenth of the free space), so the next burst of that size is served from spares; after
// `idleMs` (--pool-idle) without a mint of the template the target falls back to `size` and the
// janitor drops the extra spares. A mint that finds none ready takes the spare a refill is making
// if it comes within a moment, rather than copy the template beside it. Refills run in the
// background on connections of their own: one spare at a time, two while a template is more than
// one spare short (handouts outpace a single refill: much of a copy is waiting for CREATE
// DATABASE's checkpoints, which two creates share). They wait while clients wait for mints, so they
// never take a worker from a client; their backend runs at the lowest CPU priority, so a copy made
// while clients connect takes only the CPU they leave. Spares are recorded, so they survive
// restarts; a spare of an older template generation (after an unseal or a reseal) is stale, never
// handed out, and dropped by the janitor.

import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import { atLowestPriority, HOLD_MAX_MS, nextBackoffMs, Pause, YIELD_MS } from './background-work.js';
import type { Counters } from './counters.js';
import { closeToPublicSql, createDatabase, createSpareSql } from './create-database.js';
import type { MetadataStore } from './metadata.js';
import { spareName } from './names.js';
import { newDatabaseRecord, type DatabaseRecord, type TemplateRecord } from './records.js';
import type { LoginTriggers } from './login-triggers.js';
import type { Registry } from './registry.js';
import { SpareRoom, type PoolHold } from './spare-room.js';
import { Tally } from './tally.js';
import { quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

export interface WarmPoolOptions {
  /** Spares kept per sealed template (--pool-size); 0 disables the pool (and its growth). */
  size: number;
  /** Spares per template at most after bursts (--pool-max); at or below `size`, the pool never grows. */
  max: number;
  /** A template's target falls back to `size` this long after its last mint (--pool-idle). */
  idleMs: number;
  /** True where the data filesystem clones files: a spare then costs almost no disk. */
  clones: boolean;
  /** Bytes free on the data filesystem, or null if not known: extra spares' copies stay under a share of it. */
  freeBytes?: () => number | null;
  /** The connection that creates spares (file_copy_method set where clones work). */
  connect: () => Promise<SqlClient>;
  /** How long a mint that found no spare ready waits for one being made (spareSoon()). */
  spareWaitMs: number;
  /** A superuser connection inside the named database, search_path empty (to warm a new spare up). */
  connectTo: (database: string) => Promise<SqlClient>;
  registry: Registry;
  metadata: MetadataStore;
  counters: Counters;
  /** True while clients wait for a mint worker: refills hold back meanwhile. */
  mintsWaiting: () => boolean;
  /** False while the data filesystem is low on space (disk-guard.ts): refills stop until it calls kick(). */
  hasRoom?: () => boolean;
  /** Called when every template's spares are made (catalog-prefetch.ts). */
  atRest?: () => void;
  /** Read again by each refill (login-triggers.ts). */
  loginTriggers?: LoginTriggers;
  clock: Clock;
  logger: Logger;
}

export interface WarmPoolStats {
  /** Spares wanted now: --pool-size, more after a burst (up to --pool-max). */
  size: number;
  ready: number;
  handouts: number;
  refills: number;
  /** Why the pool, short of `size`, makes no spare now (spare-room.ts); null while it is full or filling. */
  held: PoolHold | null;
}

/**
 * A refill waits this long after a handout while the template still has a spare ready: the client
 * that claimed is starting its first backend and queries, and a create (a copy of the whole template)
 * beside it would slow it down on a small machine. A burst of claims holds refills back until it
 * pauses, for at most HOLD_MAX_MS in a row. The last spare gone, a refill starts at once: a client
 * that found none would make the same copy on its own path.
 */
const SETTLE_MS = 100;
/** Refills at once while a template is behind (see behind()); one otherwise. */
const REFILLS_BEHIND = 2;

export class WarmPool {
  /** Per refill loop: its connection, its run (null when stopped) and its pause. */
  private readonly refills: { conn: AdminConnection; running: Promise<void> | null; pause: Pause }[];
  /** Spares being created (not yet recorded) or claimed (out of the registry, not yet renamed). */
  private readonly busy = new Set<string>();
  /** Spares being created per template: counted with the ready ones so two refills do not overshoot. */
  private readonly creating = new Tally();
  private stopped = false;
  private backoffMs = 0;
  private lastHandout = -Infinity;
  private heldSince: number | null = null;
  /** Spares wanted per template above `size`, raised by mints that found none ready. */
  private readonly targets = new Map<string, number>();
  /** clock.monotonic() of each template's last mint (warm or cold). */
  private readonly lastMint = new Map<string, number>();
  private shrinkTimer: NodeJS.Timeout | undefined;
  /** Templates that handed out a spare since their pool was last full (see missed()). */
  private readonly drained = new Set<string>();
  private readonly room: SpareRoom;
  /** Per template, mints waiting for a spare being made (spareSoon()), first come first served. */
  private readonly waiting = new Map<string, ((made: boolean) => void)[]>();

  constructor(private readonly opts: WarmPoolOptions) {
    const open = async () => atLowestPriority(await opts.connect(), opts.logger, 'refill-priority-not-lowered');
    this.room = new SpareRoom(opts);
    this.refills = Array.from({ length: REFILLS_BEHIND }, () => ({ conn: new AdminConnection(open), running: null, pause: new Pause() }));
  }

  get size(): number {
    return this.opts.size;
  }

  /** A spare of `template` is ready to be claimed. */
  hasReady(template: TemplateRecord): boolean {
    return this.opts.registry.freshSpares(template.name).length > 0;
  }

  /**
   * Waits up to spareWaitMs for a spare of `template` that a refill is making now; true once one is
   * ready (another mint may still take it first). A mint that found none ready takes that spare rather
   * than copy the template beside it: on a busy machine the two copies share the CPU, so the client's
   * own copy would take longer than the wait, and the refill's spare would go to nobody. Only as many
   * mints wait as spares are being made; for the others it answers null at once, without a promise,
   * so a burst's mints reach the mint queue in the same turn as they missed (missed() counts the
   * queue to tell a burst).
   */
  spareSoon(template: TemplateRecord): Promise<boolean> | null {
    const queue = this.waiting.get(template.name) ?? [];
    if (this.stopped || queue.length >= this.creating.of(template.name)) return null;
    this.waiting.set(template.name, queue);
    return new Promise((resolve) => {
      const wake = (made: boolean): void => {
        clearTimeout(timer);
        this.leave(template.name, wake);
        resolve(made);
      };
      const timer = setTimeout(() => wake(false), this.opts.spareWaitMs);
      queue.push(wake);
    });
  }

  /** A waiting mint goes on (woken, or its wait over): it leaves the template's queue. */
  private leave(template: string, wake: (made: boolean) => void): void {
    const queue = this.waiting.get(template);
    if (!queue) return;
    const at = queue.indexOf(wake);
    if (at >= 0) queue.splice(at, 1);
    if (queue.length === 0) this.waiting.delete(template);
  }

  /** A spare of `template` was made (or failed to be): the first mint waiting for one goes on. */
  private wakeWaiting(template: string, made: boolean): void {
    this.waiting.get(template)?.[0]?.(made);
  }

  /** Takes a ready spare of the template's current generation, or null; refilling starts behind it. */
  take(template: TemplateRecord): DatabaseRecord | null {
    const spare = this.opts.registry.freshSpares(template.name)[0];
    if (!spare) return null;
    // Out of the registry at once: nobody else can take it while the claim runs.
    this.opts.registry.forget(spare.name);
    this.busy.add(spare.name);
    return spare;
  }

  /** The claim of `spare` succeeded. */
  handedOut(spare: DatabaseRecord): void {
    this.busy.delete(spare.name);
    this.opts.counters.add(`pool.${spare.template}.handouts`);
    this.lastHandout = this.opts.clock.monotonic();
    this.drained.add(spare.template);
    this.minted(spare.template);
    this.kick();
  }

  /**
   * A mint of `template` found no spare ready and copies it instead; `inFlight` mints of the template
   * are under way, this one included. While other mints wait, or after a handout emptied the pool
   * before its refills caught up, mints come faster than the pool refills (a burst, or one client's
   * quick loop): the pool wants a spare for each of them on top of `size` (up to --pool-max), so the
   * next burst of that size is served warm. The demand at once, not the count of misses: a long loop
   * of creates two at a time wants a few spares, not --pool-max. The extra spares go again after
   * --pool-idle without mints.
   */
  missed(template: TemplateRecord, inFlight: number): void {
    const { size, max } = this.opts;
    if (size === 0 || this.stopped) return;
    // A pool still filling for the first time (just sealed, just started) was not outpaced.
    if (!this.opts.mintsWaiting() && !this.drained.has(template.name)) return;
    this.targets.set(template.name, Math.min(Math.max(size, max), Math.max(this.target(template.name), size + inFlight)));
    this.minted(template.name);
  }

  /** Spares wanted now for the template. */
  target(template: string): number {
    return this.targets.get(template) ?? this.opts.size;
  }

  private minted(template: string): void {
    this.lastMint.set(template, this.opts.clock.monotonic());
    if (this.targets.has(template) && this.shrinkTimer === undefined) this.armShrink(this.opts.idleMs);
  }

  private armShrink(ms: number): void {
    this.shrinkTimer = setTimeout(() => this.shrinkIdle(), ms);
    this.shrinkTimer.unref();
  }

  /**
   * Templates not minted from for --pool-idle go back to --pool-size: the spares beyond it are marked
   * stale, and the janitor drops them as it drops a resealed template's.
   */
  private shrinkIdle(): void {
    this.shrinkTimer = undefined;
    if (this.stopped) return;
    const { registry, idleMs, size, clock, logger } = this.opts;
    const now = clock.monotonic();
    let next = Infinity;
    for (const template of [...this.targets.keys()]) {
      const idleFor = now - (this.lastMint.get(template) ?? -Infinity);
      if (idleFor < idleMs) {
        next = Math.min(next, idleMs - idleFor);
        continue;
      }
      this.targets.delete(template);
      const extra = registry.freshSpares(template).slice(size);
      this.markStale(extra);
      logger.info('pool-shrunk', { template, size, dropping: extra.length, idleSeconds: Math.round(idleFor / 1000) });
    }
    if (next < Infinity) this.armShrink(next);
  }

  /** The claim failed before renaming (the transaction rolled back): the spare is as it was. */
  giveBack(spare: DatabaseRecord): void {
    this.busy.delete(spare.name);
    this.opts.registry.put(spare);
  }

  /** The claim failed in a way that leaves the spare suspect: the janitor drops it, a fresh one replaces it. */
  discard(spare: DatabaseRecord): void {
    this.busy.delete(spare.name);
    this.markStale([spare]);
    this.kick();
  }

  /**
   * Spares the janitor is to drop, never handed out. Recorded too: after a restart a suspect spare
   * must not be handed out, nor a shrunk pool's extra spares kept for good.
   */
  private markStale(spares: DatabaseRecord[]): void {
    for (const spare of spares) {
      const stale = { ...spare, generation: -1 };
      this.opts.registry.put(stale);
      this.opts.metadata.saveDatabaseLater(stale).catch((err: unknown) => this.opts.logger.warn('spare-stale-not-recorded', { spare: spare.name, err }));
    }
  }

  /** A spare being created or claimed right now: it may be missing from the registry, yet no orphan. */
  isBusy(name: string): boolean {
    return this.busy.has(name);
  }

  stats(template: string): WarmPoolStats {
    const ready = this.opts.registry.freshSpares(template).length;
    const size = this.target(template);
    const record = this.opts.registry.templates.get(template);
    return {
      size,
      ready,
      handouts: this.opts.counters.get(`pool.${template}.handouts`),
      refills: this.opts.counters.get(`pool.${template}.refills`),
      held: record ? this.room.held(generationKey(record), ready + this.creating.of(template), size) : null,
    };
  }

  /**
   * Starts the pool on the loaded records. A template with more spares than --pool-size grew before a
   * restart: its target stays there and falls back after --pool-idle, as if it had just been minted.
   */
  start(): void {
    for (const template of this.opts.registry.templates.keys()) {
      const ready = this.opts.registry.freshSpares(template).length;
      if (this.opts.size === 0 || ready <= this.opts.size) continue;
      this.targets.set(template, Math.min(ready, Math.max(this.opts.size, this.opts.max)));
      this.minted(template);
    }
    this.kick();
  }

  /**
   * Starts refilling if any sealed template is short of spares: one refill loop, and the second too
   * while a template is behind. A no-op for the loops already running.
   */
  kick(): void {
    if (this.stopped || this.opts.size === 0) return;
    const template = this.neediest();
    const loops = template && this.behind(template) ? REFILLS_BEHIND : 1;
    for (const loop of this.refills.slice(0, loops)) {
      loop.running ??= this.refill(loop).finally(() => {
        loop.running = null;
      });
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.shrinkTimer);
    for (const loop of this.refills) loop.pause.end();
    await Promise.all(this.refills.map((loop) => loop.running));
    await Promise.all(this.refills.map((loop) => loop.conn.close()));
  }

  private async refill(loop: WarmPool['refills'][number]): Promise<void> {
    const extra = loop !== this.refills[0];
    while (!this.stopped) {
      const template = this.neediest();
      if (!template) {
        // Every pool full: an idle runtime keeps one refill backend, as the mint queue keeps one worker.
        for (const other of this.refills.slice(1)) if (other === loop || other.running === null) void other.conn.close();
        this.opts.atRest?.();
        return;
      }
      // The second loop helps only while its template is behind.
      if (extra && !this.behind(template)) return;
      if (!this.room.hasRoom()) return;
      if (this.opts.mintsWaiting()) {
        await loop.pause.for(YIELD_MS);
        continue;
      }
      // With no spare of the template left, or more than one missing, the next client's mint would copy
      // it on its own path, at full priority: this copy, at the lowest, is the cheaper one, so it does
      // not wait for the last client to settle.
      const settle = this.hasReady(template) && !this.behind(template) ? this.settleMs() : 0;
      if (settle > 0) {
        await loop.pause.for(settle);
        continue;
      }
      try {
        await this.createSpare(template, loop.conn);
        this.backoffMs = 0;
        // After the spare is out: on this backend at the lowest priority, it delays only the next refill.
        await this.opts.loginTriggers?.read(await loop.conn.get());
      } catch (err) {
        this.backoffMs = nextBackoffMs(this.backoffMs);
        this.opts.logger.warn('spare-create-failed', { template: template.name, err, retryInMs: this.backoffMs });
        await loop.pause.for(this.backoffMs);
      }
    }
  }

  /** The sealed template with the fewest spares (ready or being made) among those short of their target. */
  private neediest(): TemplateRecord | undefined {
    let best: TemplateRecord | undefined;
    let fewest = Infinity;
    for (const t of this.opts.registry.templates.values()) {
      // Snapshots are restored from, seldom minted from: they get no spares.
      if (!t.sealed || t.snapshotOf !== null) continue;
      const ready = this.opts.registry.freshSpares(t.name).length + this.creating.of(t.name);
      if (ready < fewest && ready < this.target(t.name) && this.room.fits(generationKey(t), ready)) {
        best = t;
        fewest = ready;
      }
    }
    return best;
  }

  private async createSpare(template: TemplateRecord, via: AdminConnection): Promise<void> {
    const { metadata, registry, clock } = this.opts;
    // Read before any await: a reseal meanwhile must leave this spare marked with the older generation.
    const generation = template.generation;
    this.creating.add(template.name);
    let name: string | undefined;
    let made = false;
    const started = clock.monotonic();
    try {
      name = spareName(await metadata.nextSpareNumber());
      this.busy.add(name);
      const conn = await via.get();
      await createDatabase(conn, createSpareSql(name, template.name));
      await this.warmUp(conn, name);
      const key = generationKey({ name: template.name, generation });
      if (this.room.wantsSize(key)) {
        const { rows } = await conn.query(`SELECT pg_catalog.pg_database_size(${quoteLiteral(name)})`);
        this.room.recordSize(key, Number(rows[0]?.[0] ?? 0));
      }
      // The runtime's role owns a spare (owner '') until a claim gives it to the client's role.
      const spare = newDatabaseRecord({ name, kind: 'spare', template: template.name, generation, owner: '', createdAt: clock.now() });
      await metadata.saveDatabase(spare);
      registry.put(spare);
      made = true;
      if (registry.freshSpares(template.name).length >= this.target(template.name)) this.drained.delete(template.name);
      this.opts.counters.add(`pool.${template.name}.refills`);
      this.opts.logger.debug('spare-created', { spare: name, template: template.name, ms: Math.round(clock.monotonic() - started) });
    } finally {
      if (name !== undefined) this.busy.delete(name);
      this.creating.remove(template.name);
      this.wakeWaiting(template.name, made);
    }
  }

  /**
   * Connects to the new spare once. A database's first backend builds its relation cache from the
   * catalogs and writes it to pg_internal.init; every later backend reads that file. Done here, the
   * client that claims the spare starts as fast as on a database connected to before (measured: a
   * first connect took about twice a later one).
   */
  private async warmUp(conn: SqlClient, name: string): Promise<void> {
    // Closed to PUBLIC in the same round trip: the claim's ALTER OWNER hands the owner's CONNECT on.
    await conn.query(`${closeToPublicSql(name)}; ALTER DATABASE ${quoteIdent(name)} ALLOW_CONNECTIONS true`);
    try {
      const spare = await this.opts.connectTo(name);
      await spare.close();
    } finally {
      await conn.query(`ALTER DATABASE ${quoteIdent(name)} ALLOW_CONNECTIONS false`);
    }
  }

  /** More than one spare short: handouts came faster than refills (a quick loop, a burst); no settling. */
  private behind(template: TemplateRecord): boolean {
    return this.opts.registry.freshSpares(template.name).length < this.target(template.name) - 1;
  }

  /** How long to wait for the last handout's client to settle; 0 once it has, or after HOLD_MAX_MS held. */
  private settleMs(): number {
    const now = this.opts.clock.monotonic();
    const left = this.lastHandout + SETTLE_MS - now;
    if (left <= 0) {
      this.heldSince = null;
      return 0;
    }
    this.heldSince ??= now;
    if (now - this.heldSince >= HOLD_MAX_MS) {
      this.heldSince = null;
      return 0;
    }
    return left;
  }
}

/** A template generation's key, for what is measured once per generation (a spare's size). */
function generationKey(template: Pick<TemplateRecord, 'name' | 'generation'>): string {
  return `${template.name}/${template.generation}`;
}
