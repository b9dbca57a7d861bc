// Memory limits for tenants. PostgreSQL has no hard per-backend limit, and a backend the kernel's OOM
// killer picks makes the postmaster restart every session of every tenant. So the engine reads the
// anonymous memory (RssAnon in /proc/PID/status: heap and private mappings, not shared buffers) of each
// backend serving a client, every interval, and cancels the statement that crosses a limit. The client
// gets 53200 naming the limit and the amount instead of PostgreSQL's 57014, and its session goes on.
//
// Three limits, each optional: one backend (session), the sum over a database's backends (database,
// with per-database overrides), and the sum over every tenant backend (runtime). Over a database
// limit, the largest busy backend under it is cancelled: it is the likeliest runaway. Over the runtime
// limit the largest consumer pays, idle memory included: the database (tenant) whose backends hold the
// most, through its largest backend; a session holding that memory between statements is ended, as
// the memory goes back only when its backend exits. So one tenant's hoard never costs another's query.
// With the runtime limit derived from the cgroup's, the cgroup is watched too: memory it cannot reclaim
// (backends, node, shared buffers) past 90% of its limit is paid for the same way, before the kernel kills.
// While no tenant session has a backend, a pass reads no /proc file, and outside a cgroup nothing (see check()).

import { readFile } from 'node:fs/promises';
import { PgxError } from '../errors.js';
import { errorResponse } from '../wire/error-response.js';
import type { Logger } from '../log.js';
import type { EngineSession } from './session-types.js';
import type { MemoryLimits } from './ports.js';

type Scope = 'session' | 'database' | 'runtime' | 'cgroup';

/** Share of the cgroup's limit its unreclaimable memory may reach before the largest tenant pays. */
export const CGROUP_GUARD = 0.9;

/** A session the watchdog cancelled a statement of, and when: not cancelled again for a while. */
const RECANCEL_AFTER_MS = 1000;
/** Idle sessions do not grow: their last reading is reused for this many passes. */
const IDLE_REREAD_PASSES = 10;

/** RssAnon of a process in kB, or null when it has gone. */
async function anonymousMemoryKb(pid: number): Promise<number | null> {
  try {
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    const m = /^RssAnon:\s+(\d+) kB/m.exec(status);
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

interface Target {
  session: EngineSession;
  pid: number;
  busy: boolean;
  /** The last reading (kB), when it may stand for this pass's. */
  cached: number | null;
}

interface Reading {
  session: EngineSession;
  database: string;
  mb: number;
}

/** Over the runtime limit: the database whose backends hold the most, and its largest backend. */
interface Hog {
  database: string;
  mb: number;
  largest: Reading;
}

/** Why a backend was chosen, as logged (`rule`). */
const RULES: Record<Scope, string> = {
  session: 'backend over the session limit',
  database: "largest running statement of the database over its limit",
  runtime: 'largest backend of the database holding the most (idle sessions included)',
  cgroup: 'largest backend of the database holding the most (idle sessions included), the cgroup near its limit',
};

export class MemoryWatchdog {
  private timer: NodeJS.Timeout | null = null;
  private measuring = false;
  /** Sessions whose statement was cancelled, with the time (interval ticks) it happened. */
  private readonly cancelled = new Map<EngineSession, number>();
  private ticks = 0;
  /** Last reading of each session (kB), the pass it was taken in, and whether it was busy then. */
  private readonly lastRead = new WeakMap<EngineSession, { kb: number; tick: number; busy: boolean }>();
  /** Peak of the runtime-wide sum seen, in MB (status and benchmarks). */
  peakMb = 0;
  /** Statements cancelled, per scope. */
  readonly cancels: Record<Scope, number> = { session: 0, database: 0, runtime: 0, cgroup: 0 };
  /** Memory of sessions just ended (MB, pass): on its way back, but maybe still charged to the cgroup. */
  private readonly released: Array<{ mb: number; tick: number }> = [];
  /** The cgroup's unreclaimable MB at the last pass, for its growth rate; null before the first. */
  private lastCgroupMb: number | null = null;
  /** No cgroup-memory-high warning before this pass (one per 10 s). */
  private quietUntil = 0;
  /** Sessions ended (FATAL 53200) for holding memory between statements over the runtime limit. */
  sessionsEnded = 0;
  /** Passes that found no tenant backend to watch, and so read nothing. */
  idlePasses = 0;

  constructor(
    private readonly limits: MemoryLimits,
    private readonly sessions: () => Iterable<EngineSession>,
    private readonly logger: Logger,
    private readonly measure: (pid: number) => Promise<number | null> = anonymousMemoryKb,
  ) {}

  /** Some limit applies to every session (not only to databases with their own). */
  private get limitsAll(): boolean {
    const l = this.limits;
    return l.sessionMb !== null || l.databaseMb !== null || l.runtimeMb !== null || l.cgroup !== undefined;
  }

  start(): void {
    if ((!this.limitsAll && this.limits.databaseOverride === undefined) || this.timer) return;
    this.timer = setInterval(() => void this.check(), this.limits.intervalMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /**
   * One measurement and enforcement pass; public for tests. With no tenant backend to watch it reads
   * no /proc file (no backend can be measured, canceled or ended), and outside a cgroup nothing at
   * all, so an idle runtime on a laptop or in CI does no file reads through libuv's threadpool ten
   * times a second. In a cgroup it reads the cgroup's usage only, to keep the guard's growth rate.
   */
  async check(): Promise<void> {
    if (this.measuring) return; // the previous pass is still reading /proc
    this.ticks++;
    const targets = this.targets();
    this.measuring = true;
    try {
      if (targets.length === 0) {
        this.idlePasses++;
        // The cgroup is still read when there is one: the guard's growth rate must span the moment
        // tenants start, or the first pass with backends sees none and four sorts reach the kernel's
        // limit before the next (test/runtime/cgroup.test.ts failed 1 run in 3 without it).
        if (this.limits.cgroup) this.lastCgroupMb = (await this.limits.cgroup.usedMb()) ?? this.lastCgroupMb;
        return;
      }
      const [readings, cgroupMb] = await Promise.all([this.read(targets), this.limits.cgroup?.usedMb() ?? null]);
      this.enforce(readings, cgroupMb);
    } catch (err) {
      this.logger.error('memory watchdog pass failed', { err });
    } finally {
      this.measuring = false;
    }
  }

  /** The backends under some limit now, each with its last reading when that can be reused. */
  private targets(): Target[] {
    const all = this.limitsAll;
    const targets: Target[] = [];
    for (const session of this.sessions()) {
      const pid = session.backendPid;
      if (pid === null) continue;
      if (!all && this.limits.databaseOverride?.(session.database) === undefined) continue;
      const last = this.lastRead.get(session);
      // Idle since the last reading: nothing grew. A statement that ended since may have freed a lot.
      const fresh = last !== undefined && !last.busy && !session.busy && this.ticks - last.tick < IDLE_REREAD_PASSES;
      targets.push({ session, pid, busy: session.busy, cached: fresh ? last.kb : null });
    }
    for (const s of this.cancelled.keys()) if (!s.busy || s.backendPid === null) this.cancelled.delete(s);
    return targets;
  }

  private async read(targets: Target[]): Promise<Reading[]> {
    const kbs = await Promise.all(targets.map((t) => (t.cached !== null ? t.cached : this.measure(t.pid))));
    const readings: Reading[] = [];
    targets.forEach((t, i) => {
      const kb = kbs[i];
      if (kb === null || kb === undefined) return;
      if (t.cached === null) this.lastRead.set(t.session, { kb, tick: this.ticks, busy: t.busy });
      readings.push({ session: t.session, database: t.session.database, mb: kb / 1024 });
    });
    return readings;
  }

  private enforce(readings: Reading[], cgroupMb: number | null): void {
    const { sessionMb, runtimeMb } = this.limits;
    while (this.released.length > 0 && (this.ticks - this.released[0]!.tick) * this.limits.intervalMs >= RECANCEL_AFTER_MS) this.released.shift();
    let total = 0;
    const perDatabase = new Map<string, Reading[]>();
    for (const r of readings) {
      total += r.mb;
      const list = perDatabase.get(r.database);
      if (list) list.push(r);
      else perDatabase.set(r.database, [r]);
      if (sessionMb !== null && r.mb > sessionMb) this.cancel(r, 'session', r.mb, sessionMb);
    }
    this.peakMb = Math.max(this.peakMb, total);
    for (const [database, list] of perDatabase) {
      const limit = this.databaseLimit(database);
      if (limit !== null) this.enforceSum(list, 'database', limit);
    }
    if (runtimeMb !== null) this.enforceRuntime(readings, runtimeMb);
    // The cgroup guard runs in the same pass even when the runtime limit just made one tenant pay:
    // that tenant counts as leaving, and when the cgroup is the tighter bound (shared buffers hold
    // much of it) the guard pays whatever else its excess needs now; waiting a pass let four sorts
    // reach the kernel's limit first.
    const cgroup = this.limits.cgroup;
    if (cgroup && cgroupMb !== null) this.enforceCgroup(readings, cgroupMb, cgroup.limitMb);
  }

  /**
   * Over the runtime limit, the largest consumer pays first: the database holding the most, idle
   * backends included, through its largest backend. A running statement there is canceled (ERROR
   * 53200); a backend holding the memory between statements (a cursor, a held result, temporary data,
   * a large setting) has its session ended (FATAL 53200) and is closed, not pooled. Backends just
   * canceled do not count, as in enforceSum.
   */
  private enforceRuntime(readings: Reading[], limitMb: number): void {
    const { sum, hog } = this.largestTenant(readings);
    if (sum > limitMb && hog !== null) this.pay(hog, 'runtime', sum, limitMb);
  }

  /**
   * The cgroup's unreclaimable memory past CGROUP_GUARD of its limit: the largest tenant pays as over
   * the runtime limit. What a backend just canceled or a session just ended holds is on its way back:
   * it is not counted, so one pass's payment is not followed by another before the memory shows.
   */
  private enforceCgroup(readings: Reading[], usedMb: number, limitMb: number): void {
    const guardMb = Math.floor(limitMb * CGROUP_GUARD);
    // Several runaways at once grow the cgroup faster than one pass pays for one of them: the kernel
    // saw 512 MB between two passes 100 ms apart. So the guard acts on where the cgroup will be two
    // passes on at the rate it grew since the last, and pays as many tenants as that excess needs.
    const grown = this.lastCgroupMb === null ? 0 : Math.max(0, usedMb - this.lastCgroupMb);
    this.lastCgroupMb = usedMb;
    let leaving = 0;
    for (const r of readings) if (this.cancelled.has(r.session)) leaving += r.mb;
    for (const e of this.released) leaving += e.mb;
    const excessNow = usedMb - leaving - guardMb;
    let excess = excessNow + 2 * grown;
    const paid = new Set<EngineSession>();
    for (;;) {
      const { sum, hog } = this.largestTenant(readings, paid);
      if (excess <= 0 || hog === null) return;
      // The runtime's own only when every tenant gone now would still leave the cgroup over the line:
      // an excess that is growth yet to come is the tenants' (weighed against the forecast, a fast
      // climb was taken for the runtime's own, and nobody paid before the kernel acted).
      if (sum < excessNow && paid.size === 0) {
        this.runtimeOwnMemory(usedMb, guardMb, sum);
        return;
      }
      this.pay(hog, 'cgroup', usedMb, guardMb);
      paid.add(hog.largest.session);
      excess -= hog.largest.mb;
    }
  }

  /** The cgroup is high but tenants hold less than the excess: logged, once per 10 s, and nobody pays. */
  private runtimeOwnMemory(usedMb: number, guardMb: number, sum: number): void {
    // It is the runtime's own (node, shared buffers, pooled backends): ending every session would not
    // bring the cgroup back under.
    if (this.ticks < this.quietUntil) return;
    this.quietUntil = this.ticks + Math.ceil(10_000 / this.limits.intervalMs);
    this.logger.warn('cgroup-memory-high', { usedMb: Math.ceil(usedMb), guardMb, tenantsMb: Math.round(sum), hint: 'The memory is not in tenant sessions: lower shared_buffers or --max-idle-backends, or give the container more memory.' });
  }


  /** The sum over backends not just canceled, and the database holding the most with its largest backend. */
  private largestTenant(readings: Reading[], paid?: Set<EngineSession>): { sum: number; hog: Hog | null } {
    let sum = 0;
    const perDatabase = new Map<string, Hog>();
    for (const r of readings) {
      if (this.cancelled.has(r.session) || paid?.has(r.session)) continue;
      sum += r.mb;
      const t = perDatabase.get(r.database);
      if (!t) perDatabase.set(r.database, { database: r.database, mb: r.mb, largest: r });
      else {
        t.mb += r.mb;
        if (r.mb > t.largest.mb) t.largest = r;
      }
    }
    let hog: Hog | null = null;
    for (const t of perDatabase.values()) if (hog === null || t.mb > hog.mb) hog = t;
    return { sum, hog };
  }

  /** The largest tenant's largest backend pays: its statement canceled, or, idle, its session ended. */
  private pay(hog: Hog, scope: 'runtime' | 'cgroup', usedMb: number, limitMb: number): void {
    if (hog.largest.session.busy) this.cancel(hog.largest, scope, usedMb, limitMb, hog);
    else this.endSession(hog, scope, usedMb, limitMb);
  }

  /** Ends an idle session whose backend holds its database's largest share of the runtime's memory. */
  private endSession(hog: Hog, scope: 'runtime' | 'cgroup', usedMb: number, limitMb: number): void {
    const r = hog.largest;
    const session = r.session;
    this.sessionsEnded++;
    this.released.push({ mb: r.mb, tick: this.ticks });
    const used = Math.ceil(usedMb); // over a limit: never shown as equal to it
    this.logger.warn('memory-limit', {
      scope, action: 'end-session', rule: RULES[scope], database: r.database, user: session.user, pid: session.backendPid,
      backendMb: Math.round(r.mb), databaseMb: Math.round(hog.mb), usedMb: used, limitMb,
    });
    session.endClosingBackend(
      new PgxError('OUT_OF_MEMORY', `terminating connection due to memory limit: ${overWhat(scope, used, limitMb, this.limits.cgroup?.limitMb)}`, {
        detail: `Database "${r.database}" held the most of any database (${Math.round(hog.mb)} MB); this session's backend held ${Math.round(r.mb)} MB between statements (a cursor, a held result, temporary data or a large setting), which goes back only when the backend exits.`,
        hint: scope === 'runtime'
          ? 'Close cursors and end sessions that hold data while idle, or raise --runtime-memory-limit (and the memory of its container).'
          : 'Close cursors and end sessions that hold data while idle, or give the container more memory.',
      }),
    );
  }

  /**
   * Over a limit on a sum, cancels the largest busy backend. A backend whose statement was just
   * canceled is about to free its memory: it does not count, so one runaway costs one cancel, not a
   * cascade through its neighbours before the freed memory shows.
   */
  private enforceSum(readings: Reading[], scope: Scope, limitMb: number): void {
    let sum = 0;
    let largest: Reading | null = null;
    for (const r of readings) {
      if (this.cancelled.has(r.session)) continue;
      sum += r.mb;
      if (r.session.busy && (largest === null || r.mb > largest.mb)) largest = r;
    }
    if (sum > limitMb && largest !== null) this.cancel(largest, scope, sum, limitMb);
  }

  private databaseLimit(database: string): number | null {
    const own = this.limits.databaseOverride?.(database);
    return own === undefined ? this.limits.databaseMb : own;
  }

  private cancel(r: Reading, scope: Scope, usedMb: number, limitMb: number, hog?: Hog): void {
    const session = r.session;
    if (!session.busy) return; // between statements: nothing to cancel, and idle memory is not growing
    const at = this.cancelled.get(session);
    if (at !== undefined && (this.ticks - at) * this.limits.intervalMs < RECANCEL_AFTER_MS) return;
    this.cancelled.set(session, this.ticks);
    this.cancels[scope]++;
    const used = Math.ceil(usedMb); // over a limit: never shown as equal to it
    this.logger.warn('memory-limit', {
      scope, action: 'cancel', rule: RULES[scope], database: r.database, user: session.user, pid: session.backendPid,
      backendMb: Math.round(r.mb), ...(hog ? { databaseMb: Math.round(hog.mb) } : {}), usedMb: used, limitMb,
    });
    session.cancelStatement(errorResponse({ severity: 'ERROR', code: '53200', ...limitMessage(scope, r, used, limitMb, hog, this.limits.cgroup?.limitMb) }));
  }
}

/** What a sum over a limit crossed, as the messages say it. */
function overWhat(scope: 'runtime' | 'cgroup', usedMb: number, limitMb: number, cgroupLimitMb: number | undefined): string {
  return scope === 'runtime'
    ? `the runtime's sessions used ${usedMb} MB, over the runtime limit of ${limitMb} MB`
    : `the runtime's cgroup held ${usedMb} MB it cannot reclaim, over ${limitMb} MB (${CGROUP_GUARD * 100}% of its limit of ${cgroupLimitMb} MB)`;
}

function limitMessage(scope: Scope, r: Reading, usedMb: number, limitMb: number, hog?: Hog, cgroupLimitMb?: number): { message: string; detail: string; hint: string } {
  const backend = `The statement's backend held ${Math.round(r.mb)} MB when it was canceled.`;
  switch (scope) {
    case 'session':
      return {
        message: `canceling statement due to memory limit: the session used ${usedMb} MB, over its limit of ${limitMb} MB`,
        detail: backend,
        hint: 'Make the statement need less memory (a lower work_mem, a smaller sort, aggregate or array), or raise --session-memory-limit.',
      };
    case 'database':
      return {
        message: `canceling statement due to memory limit: database "${r.database}" used ${usedMb} MB, over its limit of ${limitMb} MB`,
        detail: backend,
        hint: "Run fewer memory-hungry statements at once on this database, or raise its limit (--database-memory-limit, or the database's memory_limit_mb in the API).",
      };
    case 'runtime':
      return {
        message: `canceling statement due to memory limit: ${overWhat(scope, usedMb, limitMb, cgroupLimitMb)}`,
        detail: hog ? `Database "${r.database}" held the most of any database (${Math.round(hog.mb)} MB). ${backend}` : backend,
        hint: 'The runtime as a whole is short of memory; retry later, or raise --runtime-memory-limit (and the memory of its container).',
      };
    case 'cgroup':
      return {
        message: `canceling statement due to memory limit: ${overWhat(scope, usedMb, limitMb, cgroupLimitMb)}`,
        detail: hog ? `Database "${r.database}" held the most of any database (${Math.round(hog.mb)} MB). ${backend}` : backend,
        hint: 'The container as a whole is short of memory (backends, shared buffers and the runtime together); retry later, or give the container more memory.',
      };
  }
}
