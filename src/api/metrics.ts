// GET /metrics: a prom-client registry filled from the status document and engine.stats() at each
// scrape (and the warm pool's bounds, settings given at start). PGX's counters persist across restarts (pgx_control), so the *_total series count over the
// data directory's life.

import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';
import type { StatusBody } from './contract.js';
import type { EngineStats } from '../engine/listener.js';

/** The warm pool's settings (pgx start --pool-size, --pool-max): the bounds of each template's target. */
export interface PoolBounds {
  size: number;
  max: number;
}

export class ApiMetrics {
  readonly registry = new Registry();
  private readonly sessions: Gauge;
  private readonly sessionDatabases: Gauge;
  private readonly databases: Gauge<'kind'>;
  private readonly poolReady: Gauge<'template'>;
  private readonly poolSize: Gauge<'template'>;
  private readonly poolHeld: Gauge<'template' | 'reason'>;
  private readonly poolSizeMin: Gauge;
  private readonly poolSizeMax: Gauge;
  private readonly mints: Counter<'source'>;
  private readonly mintFailures: Counter;
  private readonly mintLatency: Gauge<'stat'>;
  private readonly mintDuration: Histogram<'source'>;
  private readonly janitorDrops: Counter;
  private readonly engineClients: Gauge;
  private readonly engineBackends: Gauge<'state'>;
  private readonly memoryPss: Gauge;
  private readonly memoryRss: Gauge;
  private readonly memoryCanceled: Counter<'limit'>;
  private readonly memoryLimit: Gauge<'limit'>;
  private readonly activeWaiting: Gauge;
  private readonly diskFree: Gauge;
  private readonly diskTotal: Gauge;
  private readonly diskMinFree: Gauge;
  private readonly diskState: Gauge<'state'>;
  private readonly diskReserve: Gauge;
  private readonly diskCanceled: Counter;
  private readonly diskRefusals: Counter;
  readonly requests: Counter<'method' | 'route' | 'status'>;
  /** Last totals seen, to turn persisted totals into counter increments. */
  private readonly seen = new Map<string, number>();

  constructor(pool: PoolBounds) {
    const registers = [this.registry];
    this.sessions = new Gauge({ name: 'pgx_sessions', help: 'Client sessions open in the engine', registers });
    this.sessionDatabases = new Gauge({ name: 'pgx_session_databases', help: 'Databases with at least one open session', registers });
    this.databases = new Gauge({ name: 'pgx_databases', help: 'Databases by kind: ephemeral (minted), spare, pinned, template (sealed), cluster (pg_database), trash (dropped, DROP DATABASE still to run)', labelNames: ['kind'], registers });
    this.poolReady = new Gauge({ name: 'pgx_pool_ready', help: 'Warm spares ready per sealed template', labelNames: ['template'], registers });
    // The target moves (warm-pool.ts): a burst of mints raises it, --pool-idle without mints lowers it;
    // the bounds beside it say how far it has grown and how far it may.
    this.poolSize = new Gauge({ name: 'pgx_pool_size', help: 'Warm spares wanted now per sealed template: --pool-size, more after a burst of mints (up to --pool-max), back to --pool-size after --pool-idle without mints', labelNames: ['template'], registers });
    this.poolHeld = new Gauge({ name: 'pgx_pool_held', help: 'A pool short of pgx_pool_size that makes no spare now, by why (the status document\'s pool.<template>.held): disk-low (under --min-free-disk, every refill stopped) or disk-share (files are copied, and one more spare would take over a tenth of the free space); 1 while held, absent otherwise', labelNames: ['template', 'reason'], registers });
    this.poolSizeMin = new Gauge({ name: 'pgx_pool_size_min', help: 'Warm spares kept per sealed template when mints are idle (--pool-size, setting): the lower bound of pgx_pool_size', registers });
    this.poolSizeMax = new Gauge({ name: 'pgx_pool_size_max', help: 'Warm spares per sealed template at most after bursts (--pool-max, setting; --pool-size where that is larger, 0 when --pool-size is 0): the upper bound of pgx_pool_size', registers });
    this.poolSizeMin.set(pool.size);
    // As WarmPool.missed grows a target: never with --pool-size 0, never below --pool-size.
    this.poolSizeMax.set(pool.size === 0 ? 0 : Math.max(pool.size, pool.max));
    this.mints = new Counter({ name: 'pgx_mints_total', help: 'Databases minted, by source (warm: a spare claimed; cold: a template copied)', labelNames: ['source'], registers });
    this.mintFailures = new Counter({ name: 'pgx_mint_failures_total', help: 'Mints attempted that produced no database', registers });
    this.mintLatency = new Gauge({ name: 'pgx_mint_latency_ms', help: 'Mint latency over the recent mints, by stat (mean, p99)', labelNames: ['stat'], registers });
    this.mintDuration = new Histogram({
      name: 'pgx_mint_duration_seconds',
      help: 'Time from a mint request to its database being ready, by source (warm, cold); since the runtime started',
      labelNames: ['source'],
      // Warm mints take milliseconds, cold ones tens to hundreds; the tail shows a queue backing up.
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
      registers,
    });
    // Both sources from the start, at 0: a series that appears only with its first mint leaves
    // rate() and alerts on it empty until then (a runtime whose pool serves every mint never copies).
    for (const source of ['warm', 'cold'] as const) {
      this.mints.inc({ source }, 0);
      this.mintDuration.zero({ source });
    }
    this.janitorDrops = new Counter({ name: 'pgx_janitor_drops_total', help: 'Minted databases dropped by the janitor', registers });
    this.engineClients = new Gauge({ name: 'pgx_engine_clients', help: 'Client connections in the engine', registers });
    this.engineBackends = new Gauge({ name: 'pgx_engine_backends', help: 'PostgreSQL backends of the engine, by state', labelNames: ['state'], registers });
    this.memoryPss = new Gauge({ name: 'pgx_memory_pss_mb', help: 'Proportional set size of the runtime process tree (node, PostgreSQL), MB', registers });
    this.memoryRss = new Gauge({ name: 'pgx_memory_rss_mb', help: 'Resident set size summed over the runtime process tree, MB', registers });
    this.memoryCanceled = new Counter({ name: 'pgx_memory_limit_cancels_total', help: 'Statements canceled with 53200 for crossing a memory limit, by limit (session, database, runtime, cgroup)', labelNames: ['limit'], registers });
    this.memoryLimit = new Gauge({ name: 'pgx_memory_limit_mb', help: 'Memory limits in force (setting), MB, by limit; cgroup is the container limit read at start', labelNames: ['limit'], registers });
    this.activeWaiting = new Gauge({ name: 'pgx_active_wait_queue', help: 'Sessions waiting for an active slot on their database (--max-active-per-db)', registers });
    this.diskFree = new Gauge({ name: 'pgx_disk_free_mb', help: 'Free space on the data filesystem an unprivileged process can write (statfs f_bavail), MB', registers });
    this.diskTotal = new Gauge({ name: 'pgx_disk_total_mb', help: 'Size of the data filesystem, MB', registers });
    this.diskMinFree = new Gauge({ name: 'pgx_disk_min_free_mb', help: 'Free space kept (--min-free-disk, setting), MB: below it new work is refused with 53100', registers });
    this.diskState = new Gauge({ name: 'pgx_disk_state', help: '1 for the disk guard state now (ok, low: new work refused, critical: growing writes canceled), 0 for the others', labelNames: ['state'], registers });
    this.diskReserve = new Gauge({ name: 'pgx_disk_reserve_mb', help: 'Size of the WAL reserve file on the data filesystem now, MB (0 while released)', registers });
    this.diskCanceled = new Counter({ name: 'pgx_disk_writes_canceled_total', help: 'Statements canceled with 53100 for growing a database while the data filesystem was nearly full', registers });
    this.diskRefusals = new Counter({ name: 'pgx_disk_refusals_total', help: 'New work (mints, builds, snapshots, restores) refused with 53100 for lack of free space', registers });
    this.requests = new Counter({ name: 'pgx_api_requests_total', help: 'HTTP API requests by route and status', labelNames: ['method', 'route', 'status'], registers });
    // Event-loop lag sampled once a second, not every 10 ms (the default): on an idle runtime the
    // default sampling alone cost several times the CPU of everything else node does.
    collectDefaultMetrics({ register: this.registry, prefix: 'pgx_process_', eventLoopMonitoringPrecision: 1000 });
  }

  /** One mint, as the runtime reports it (DisposableDatabases.onMint). */
  observeMint(source: 'warm' | 'cold', ms: number): void {
    this.mintDuration.observe({ source }, ms / 1000);
  }

  async render(status: StatusBody, engine: EngineStats): Promise<string> {
    this.sessions.set(status.sessions.total);
    this.sessionDatabases.set(status.sessions.databases);
    const d = status.databases;
    this.databases.set({ kind: 'ephemeral' }, d.ephemeral);
    this.databases.set({ kind: 'spare' }, d.spares);
    this.databases.set({ kind: 'pinned' }, d.pinned);
    this.databases.set({ kind: 'template' }, d.templates);
    this.databases.set({ kind: 'cluster' }, d.total);
    this.databases.set({ kind: 'trash' }, d.trash);
    this.poolReady.reset();
    this.poolSize.reset();
    this.poolHeld.reset();
    for (const [template, p] of Object.entries(status.pool)) {
      this.poolReady.set({ template }, p.ready);
      this.poolSize.set({ template }, p.size);
      if (p.held) this.poolHeld.set({ template, reason: p.held }, 1);
    }
    this.advance('warm', status.mints.warm, (n) => this.mints.inc({ source: 'warm' }, n));
    this.advance('cold', status.mints.cold, (n) => this.mints.inc({ source: 'cold' }, n));
    this.advance('failures', status.mints.failures, (n) => this.mintFailures.inc(n));
    this.advance('drops', status.janitor.drops, (n) => this.janitorDrops.inc(n));
    this.mintLatency.set({ stat: 'mean' }, status.mints.latency_ms.mean);
    this.mintLatency.set({ stat: 'p99' }, status.mints.latency_ms.p99);
    this.memoryPss.set(status.memory.pss_mb);
    this.memoryRss.set(status.memory.rss_mb);
    const m = status.limits.memory;
    for (const limit of ['session', 'database', 'runtime', 'cgroup'] as const) {
      this.advance(`memory.${limit}`, m.canceled[limit], (n) => this.memoryCanceled.inc({ limit }, n));
    }
    for (const [limit, mb] of [['session', m.session_mb], ['database', m.database_mb], ['runtime', m.runtime_mb], ['cgroup', m.cgroup_mb]] as const) {
      if (mb === null) this.memoryLimit.remove({ limit });
      else this.memoryLimit.set({ limit }, mb);
    }
    const disk = status.limits.disk;
    if (disk.state !== null) {
      this.diskFree.set(disk.free_mb);
      this.diskTotal.set(disk.total_mb);
      this.diskMinFree.set(disk.min_free_mb);
      this.diskReserve.set(disk.reserve_mb);
      for (const state of ['ok', 'low', 'critical'] as const) this.diskState.set({ state }, disk.state === state ? 1 : 0);
      this.advance('disk.canceled', disk.writes_canceled, (n) => this.diskCanceled.inc(n));
      this.advance('disk.refusals', disk.refusals, (n) => this.diskRefusals.inc(n));
    }
    this.activeWaiting.set(engine.activeWaiting);
    this.engineClients.set(engine.clients);
    for (const [state, n] of Object.entries(engine.backends)) this.engineBackends.set({ state }, n);
    return this.registry.metrics();
  }

  get contentType(): string {
    return this.registry.contentType;
  }

  private advance(key: string, total: number, inc: (n: number) => void): void {
    const delta = total - (this.seen.get(key) ?? 0);
    if (delta > 0) inc(delta);
    this.seen.set(key, Math.max(total, this.seen.get(key) ?? 0));
  }
}
