// The isolation benchmark (issue 5): how well one tenant is kept from hurting another.
//
// Part 1, a noisy neighbour. A victim database runs point SELECTs by primary key (pgbench, one
// connection, a fixed arrival rate, per-transaction log) while a neighbour database in the same
// runtime runs a 50-connection "migration mix": per transaction CREATE TABLE, a bulk INSERT ... SELECT
// generate_series, CREATE INDEX, ALTER TABLE ADD COLUMN with a default, an UPDATE of every row, COMMIT,
// then DROP TABLE. Configurations, each once per round, the order rotating and reversing across rounds:
//   alone     the victim with no neighbour (runtime without a cap)
//   uncapped  with the neighbour, runtime without --max-active-per-db
//   cap1/2/5  with the neighbour, runtimes started with --max-active-per-db 1, 2, 5
// The cap is per database, so it applies to the victim too; its one connection never waits on it.
// Four runtimes run side by side (one per cap), only one of them busy at a time. Reported: the
// victim's p50/p99 (medians over rounds), p99 against the same round's "alone", the neighbour's
// migrations per second, and the CPU the runtime and the whole machine used in the window.
//
// Part 2, a runaway query. A runtime with --session-memory-limit runs a statement that sorts 20M rows
// with work_mem = 4GB; this process reads the backend's RssAnon from /proc every ~5 ms, finds when it
// crossed the limit (interpolated between the two readings around it) and takes the time the 53200
// arrives at the client. The same for --runtime-memory-limit with several sessions at once (the sum
// of their RssAnon, which is what the engine's watchdog limits). Reported: crossing -> 53200, the
// backend's peak against the limit, and the peak PSS of the runtime's whole process tree.

import { chmodSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { processTree } from '../src/runtime/postgres/memory.js';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { treeCpuMs } from './lib/cpu.js';
import { runCommand } from './lib/exec.js';
import { errorKey, newClient, timeFirstQuery, USER, type Endpoint } from './lib/pg-connect.js';
import { readPgbenchLogs } from './lib/pgbench-log.js';
import { startRuntimeProcess, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { median, percentile } from './lib/stats.js';
import { formatTable, markdownTable } from './lib/table.js';
import { SMALL_TEMPLATE, buildTemplate } from './lib/templates.js';

const HELP = `Usage: npm run bench -- isolation [options]

A victim database's point-query latency beside a 50-connection migration neighbour, with no cap and
with --max-active-per-db 1, 2 and 5; and the time from a memory limit being crossed to the 53200.

Options:
  --rounds N           rounds (every configuration once per round, order alternating)   [5]
  --window S           measured seconds per configuration                               [15]
  --ramp S             seconds the neighbour (and victim) run before the window           [5]
  --rate N             victim transactions per second (pgbench -R, one connection)        [200]
  --neighbours N       neighbour connections                                              [50]
  --rows N             rows per migration (INSERT, CREATE INDEX, UPDATE)                  [10000]
  --trials N           runaway statements against the session limit                       [8]
  --session-limit MB   --session-memory-limit of the runaway runtime                      [200]
  --runtime-trials N   runaway rounds against the runtime limit (0: skip)                 [4]
  --runtime-limit MB   --runtime-memory-limit of that runtime                             [400]
  --runtime-sessions N sessions running a runaway at once in those rounds                 [3]
  --quick              smoke run: 1 round of 4 s windows, 2 + 1 runaway trials; docs untouched
  --report FILE        redraw the tables and docs section from a results JSON
  -h, --help           this help
`;

const CAPS = [1, 2, 5] as const;
const CONFIGS = ['alone', 'uncapped', 'cap1', 'cap2', 'cap5'] as const;
type Config = (typeof CONFIGS)[number];
type RuntimeKey = 'none' | `cap${(typeof CAPS)[number]}`;
const LABELS: Record<Config, string> = {
  alone: 'victim alone (no neighbour, no cap)',
  uncapped: 'neighbour, no cap',
  cap1: 'neighbour, --max-active-per-db 1',
  cap2: 'neighbour, --max-active-per-db 2',
  cap5: 'neighbour, --max-active-per-db 5',
};

const TEMPLATE = 'tpl_iso';
const VICTIM_DB = `tdb_${TEMPLATE}__victim`;
const NEIGHBOUR_DB = `tdb_${TEMPLATE}__neighbour`;
const VICTIM_ROWS = 100_000;
/** pgbench_accounts' shape (pgbench -i -s 1), so the victim's query is pgbench -S's. */
const TEMPLATE_SQL = `CREATE TABLE accounts (aid int PRIMARY KEY, bid int NOT NULL, abalance int NOT NULL, filler char(84));
INSERT INTO accounts SELECT g, 1, 0, '' FROM generate_series(1, ${VICTIM_ROWS}) g;`;
const VICTIM_SCRIPT = `\\set aid random(1, ${VICTIM_ROWS})\nSELECT abalance FROM accounts WHERE aid = :aid;\n`;
/** Neighbour sessions wait in the cap's queue up to this long (the default 30 s would end some at cap 1). */
const ACTIVE_WAIT_TIMEOUT_S = 600;
/** Minted databases must outlive the rounds they are idle in. */
const GRACE_S = 86_400;

const RUNAWAY_ROWS = 20_000_000;
const RUNAWAY_SQL = `SELECT count(*) FROM (SELECT g, repeat('x', 20) FROM generate_series(1, ${RUNAWAY_ROWS}) g ORDER BY g DESC) s`;
/** How often this process reads the backends' RssAnon, and the tree's PSS. */
const SAMPLE_MS = 5;
const TREE_SAMPLE_MS = 25;
/** The bar for crossing -> 53200. */
const DETECT_BAR_MS = 250;
/** The bar for the victim's p99 at cap 2, against its p99 alone. */
const P99_BAR = 2;

interface Options {
  rounds: number;
  windowS: number;
  rampS: number;
  rate: number;
  neighbours: number;
  rows: number;
  trials: number;
  sessionLimitMb: number;
  runtimeTrials: number;
  runtimeLimitMb: number;
  runtimeSessions: number;
}

/** The victim's queries in the window: latency from pgbench sending the query to its answer. */
interface Latency {
  count: number;
  /** Completed per second (the schedule asks for --rate). */
  tps: number;
  p50: number;
  p99: number;
  max: number;
  /** pgbench -R: how late queries were sent against their Poisson schedule (not in the latency above). */
  lagP99: number;
}

interface NeighbourResult {
  /** Migrations committed in the window, per second. */
  perSecond: number;
  committed: number;
  /** Each migration's wall time (queueing for a slot included), ms. */
  migrationP50: number;
  migrationMax: number;
  errors: Record<string, number>;
}

interface IsolationSample {
  round: number;
  position: number;
  config: Config;
  victim: Latency;
  victimFailure: string | null;
  neighbour: NeighbourResult | null;
  /** CPU used in the window: the runtime's process tree, and the whole machine, in cores (of nproc). */
  runtimeCores: number;
  machineCores: number;
  loadAverage: number;
  /**
   * Where the time went, from /proc/PID/schedstat over the window: the victim database's backends' time
   * on a CPU and waiting for one (run queue), per victim query; and the engine's (node's main thread)
   * run-queue wait, ms per second of window.
   */
  victimBackendCpuMsPerQuery: number;
  victimBackendRunWaitMsPerQuery: number;
  engineRunWaitMsPerS: number;
}

interface RunawayTrial {
  scope: 'session' | 'runtime';
  trial: number;
  limitMb: number;
  sessions: number;
  /** Each session's outcome: a SQLSTATE, or 'completed'. */
  outcomes: string[];
  /** The first 53200's message. */
  message: string | null;
  /** ms from the statements' start: the (summed) RssAnon crossing the limit, and the first 53200. */
  crossedMs: number | null;
  firstErrorMs: number | null;
  /** Crossing -> first 53200; null when either is missing. */
  detectMs: number | null;
  /** Readings before and after the crossing were this far apart. */
  crossingGapMs: number | null;
  /** MB: RssAnon before the statement (summed), the summed peak, the largest single backend's peak. */
  baselineMb: number;
  peakMb: number;
  backendPeakMb: number;
  /** RssAnon (summed) at the reading closest after the first 53200 arrived. */
  atErrorMb: number | null;
  /** Peak PSS of the runtime's whole process tree (node, postmaster, every backend) in the trial. */
  treePeakPssMb: number;
  treeBaselinePssMb: number;
  samples: number;
  medianSampleGapMs: number;
}

interface RunawayPart {
  flags: string[];
  trials: RunawayTrial[];
  /** The runtime's own view at the end (status limits.memory). */
  watchdogPeakMb: number;
  canceled: { session: number; database: number; runtime: number };
}

interface Body {
  options: Options;
  postgresVersion: string;
  pgbenchVersion: string;
  runtimes: Record<RuntimeKey, string[]>;
  samples: IsolationSample[];
  sessionLimit: RunawayPart;
  runtimeLimit: RunawayPart | null;
}

// ---- helpers -------------------------------------------------------------------------------------

function pgEnv(ep: Endpoint, database: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG')) env[k] = v;
  return { ...env, PGHOST: ep.host, PGPORT: String(ep.port), PGUSER: USER, PGDATABASE: database, PGCONNECT_TIMEOUT: '30' };
}

/** Busy and total CPU ticks of the machine so far (/proc/stat's first line). */
function machineTicks(): { busy: number; total: number } {
  const f = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!.trim().split(/\s+/).slice(1).map(Number);
  const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
  return { busy: total - (f[3] ?? 0) - (f[4] ?? 0), total };
}

/** Nanoseconds a task has run on a CPU and waited on a run queue (/proc/PID/schedstat); zeros if gone. */
function schedstat(pid: number): { cpuNs: number; waitNs: number } {
  try {
    const [cpu, wait] = readFileSync(`/proc/${pid}/schedstat`, 'utf8').trim().split(/\s+/).map(Number);
    return { cpuNs: cpu ?? 0, waitNs: wait ?? 0 };
  } catch {
    return { cpuNs: 0, waitNs: 0 };
  }
}

function schedSum(pids: number[]): { cpuNs: number; waitNs: number } {
  return pids.map(schedstat).reduce((a, b) => ({ cpuNs: a.cpuNs + b.cpuNs, waitNs: a.waitNs + b.waitNs }), { cpuNs: 0, waitNs: 0 });
}

/** RssAnon of a process in kB (synchronous: the sampler must not queue behind other I/O), null if gone. */
function rssAnonKb(pid: number): number | null {
  try {
    const m = /^RssAnon:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : null;
  } catch {
    return null;
  }
}

async function pssKb(pid: number): Promise<number> {
  try {
    const m = /^Pss:\s+(\d+) kB/m.exec(await readFile(`/proc/${pid}/smaps_rollup`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

const round1 = (v: number): number => Math.round(v * 10) / 10;

/** Round r's order: a rotation of the configurations, reversed every other round. */
function order(round: number): Config[] {
  const k = round % CONFIGS.length;
  const rotated = [...CONFIGS.slice(k), ...CONFIGS.slice(0, k)];
  return round % 2 === 0 ? rotated : rotated.reverse();
}

function runtimeFor(config: Config): RuntimeKey {
  return config === 'alone' || config === 'uncapped' ? 'none' : config;
}

// ---- part 1: the neighbour -------------------------------------------------------------------------

class Neighbour {
  private stopping = false;
  private loops: Promise<void>[] = [];
  readonly commits: { endMs: number; ms: number }[] = [];
  readonly errors: Record<string, number> = {};

  private constructor(
    private readonly clients: pg.Client[],
    private readonly rows: number,
    /** Table names are unique per window: a session terminated between COMMIT and DROP leaves its table. */
    private readonly tag: string,
  ) {}

  static async connect(ep: Endpoint, n: number, rows: number, tag: string): Promise<Neighbour> {
    const clients = Array.from({ length: n }, () => newClient(ep, NEIGHBOUR_DB));
    for (const c of clients) c.on('error', () => undefined);
    await Promise.all(clients.map((c) => c.connect()));
    return new Neighbour(clients, rows, tag);
  }

  start(): void {
    this.loops = this.clients.map((c, i) => this.loop(c, i));
  }

  private async loop(c: pg.Client, i: number): Promise<void> {
    for (let n = 0; !this.stopping; n++) {
      const t = `mig_${this.tag}_${i}_${n}`;
      const started = Date.now();
      try {
        await c.query('BEGIN');
        await c.query(`CREATE TABLE ${t} (id int PRIMARY KEY, body text NOT NULL)`);
        await c.query(`INSERT INTO ${t} SELECT g, md5(g::text) FROM generate_series(1, ${this.rows}) g`);
        await c.query(`CREATE INDEX ON ${t} (body)`);
        await c.query(`ALTER TABLE ${t} ADD COLUMN flag int NOT NULL DEFAULT 0`);
        await c.query(`UPDATE ${t} SET flag = id % 7`);
        await c.query('COMMIT');
        const endMs = Date.now();
        this.commits.push({ endMs, ms: endMs - started });
        await c.query(`DROP TABLE ${t}`);
      } catch (err) {
        if (this.stopping) return;
        const key = errorKey(err);
        this.errors[key] = (this.errors[key] ?? 0) + 1;
        try {
          await c.query('ROLLBACK');
        } catch {
          return; // the session is gone
        }
      }
    }
  }

  /** Stops the loops: a moment to finish, then the neighbour's backends are terminated. */
  async stop(admin: pg.Client): Promise<void> {
    this.stopping = true;
    const all = Promise.all(this.loops);
    await Promise.race([all, sleep(1500)]);
    await admin.query('SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1', [NEIGHBOUR_DB]);
    await Promise.race([all, sleep(30_000)]);
    await Promise.all(this.clients.map((c) => c.end().catch(() => undefined)));
  }
}

interface Runtime {
  rt: RuntimeProcess;
  admin: pg.Client;
}

async function startIsolationRuntime(workDir: string, key: RuntimeKey, cleanup: Cleanup): Promise<Runtime> {
  const dir = path.join(workDir, key);
  mkdirSync(dir);
  chmodSync(dir, 0o755);
  const cap = key === 'none' ? [] : ['--max-active-per-db', key.slice('cap'.length)];
  const rt = await startRuntimeProcess({ workDir: dir, flags: ['--grace', String(GRACE_S), '--active-wait-timeout', String(ACTIVE_WAIT_TIMEOUT_S), ...cap] }, cleanup);
  await rt.api.buildTemplate({ name: TEMPLATE, sql: TEMPLATE_SQL, seal: true });
  for (const name of [VICTIM_DB, NEIGHBOUR_DB]) await rt.api.createDatabase({ template: TEMPLATE, name, pinned: true });
  await timeFirstQuery(rt.engine, VICTIM_DB);
  await waitForPool(rt);
  const admin = newClient(rt.postgres, 'postgres');
  admin.on('error', () => undefined);
  await admin.connect();
  cleanup.add(`admin session of ${key}`, () => admin.end());
  return { rt, admin };
}

function latency(values: number[], lags: number[], seconds: number): Latency {
  return { count: values.length, tps: values.length / seconds, p50: median(values), p99: percentile(values, 99), max: Math.max(...values), lagP99: percentile(lags, 99) };
}

async function isolationSample(
  config: Config,
  { rt, admin }: Runtime,
  opts: Options,
  logDir: string,
  tag: string,
): Promise<Omit<IsolationSample, 'round' | 'position'>> {
  const neighbour = config === 'alone' ? null : await Neighbour.connect(rt.engine, opts.neighbours, opts.rows, tag.replace(/\W/g, '_'));
  const script = path.join(logDir, 'victim.sql');
  const prefix = path.join(logDir, `victim-${tag}`);
  const args = ['-n', '-f', script, '-c', '1', '-j', '1', '-R', String(opts.rate), '-T', String(opts.rampS + opts.windowS), '-l', `--log-prefix=${prefix}`];
  const started = Date.now();
  neighbour?.start();
  const victim = runCommand('pgbench', args, { env: pgEnv(rt.engine, VICTIM_DB) });
  // CPU over the window only.
  const windowStart = started + opts.rampS * 1000;
  const windowEnd = windowStart + opts.windowS * 1000;
  await sleep(windowStart - Date.now());
  const victimPids = (
    await admin.query<{ pid: number }>("SELECT pid FROM pg_stat_activity WHERE datname = $1 AND backend_type = 'client backend'", [VICTIM_DB])
  ).rows.map((row) => row.pid);
  const v0 = schedSum(victimPids);
  const e0 = schedstat(rt.pid);
  const cpu0 = await treeCpuMs(rt.pid);
  const m0 = machineTicks();
  await sleep(Math.max(0, windowEnd - Date.now()));
  const cpu1 = await treeCpuMs(rt.pid);
  const m1 = machineTicks();
  const v1 = schedSum(victimPids);
  const e1 = schedstat(rt.pid);
  const measuredS = (Date.now() - windowStart) / 1000;
  const result = await victim;
  if (neighbour) {
    await neighbour.stop(admin);
    // The migrations' dirty pages are not the next configuration's problem.
    await admin.query('CHECKPOINT');
  }
  const nproc = os.availableParallelism();
  // In the window by when the query was sent: a victim far behind its schedule runs, in the window,
  // queries scheduled during the ramp.
  const txs = readPgbenchLogs(prefix).filter((t) => {
    const sentMs = t.startMs + (t.lagMs ?? 0);
    return sentMs >= windowStart && sentMs < windowEnd;
  });
  let nb: NeighbourResult | null = null;
  if (neighbour) {
    const inWindow = neighbour.commits.filter((c) => c.endMs >= windowStart && c.endMs < windowEnd);
    const ms = inWindow.map((c) => c.ms);
    nb = {
      committed: inWindow.length,
      perSecond: inWindow.length / opts.windowS,
      migrationP50: median(ms),
      migrationMax: ms.length > 0 ? Math.max(...ms) : NaN,
      errors: neighbour.errors,
    };
  }
  return {
    config,
    // pgbench -R logs the time from the schedule; less the lag, it is the query's own round trip.
    victim: latency(
      txs.map((t) => t.latencyMs - (t.lagMs ?? 0)),
      txs.map((t) => t.lagMs ?? 0),
      opts.windowS,
    ),
    victimFailure: result.code === 0 ? null : `pgbench exit ${result.code}: ${result.stderr.trim().slice(-300)}`,
    neighbour: nb,
    runtimeCores: (cpu1 - cpu0) / 1000 / measuredS,
    machineCores: ((m1.busy - m0.busy) / Math.max(1, m1.total - m0.total)) * nproc,
    loadAverage: os.loadavg()[0]!,
    victimBackendCpuMsPerQuery: (v1.cpuNs - v0.cpuNs) / 1e6 / Math.max(1, txs.length),
    victimBackendRunWaitMsPerQuery: (v1.waitNs - v0.waitNs) / 1e6 / Math.max(1, txs.length),
    engineRunWaitMsPerS: (e1.waitNs - e0.waitNs) / 1e6 / measuredS,
  };
}

// ---- part 2: runaway statements ----------------------------------------------------------------------

async function runawayTrial(rt: RuntimeProcess, admin: pg.Client, scope: 'session' | 'runtime', trial: number, sessions: number, limitMb: number): Promise<RunawayTrial> {
  const clients = Array.from({ length: sessions }, () => newClient(rt.engine, SMALL_DB));
  for (const c of clients) c.on('error', () => undefined);
  try {
    await Promise.all(clients.map((c) => c.connect()));
    const pids: number[] = [];
    for (const c of clients) {
      // A safety net: a statement the watchdog misses ends anyway (57014, counted as a failure).
      await c.query("SET work_mem = '4GB'; SET statement_timeout = '60s'");
      pids.push((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
    }
    const treePids = await processTree(rt.pid);
    const sumPss = async (): Promise<number> => (await Promise.all(treePids.map(pssKb))).reduce((a, b) => a + b, 0) / 1024;
    const treeBaselinePssMb = await sumPss();
    const read = (): { t: number; kb: number; max: number } => {
      let kb = 0;
      let max = 0;
      for (const pid of pids) {
        const v = rssAnonKb(pid) ?? 0;
        kb += v;
        max = Math.max(max, v);
      }
      return { t: performance.now(), kb, max };
    };
    const baseline = read();
    const readings = [baseline];
    let running = true;
    const sampler = setInterval(() => readings.push(read()), SAMPLE_MS);
    let treePeak = treeBaselinePssMb;
    const treeLoop = (async () => {
      while (running) {
        treePeak = Math.max(treePeak, await sumPss());
        await sleep(TREE_SAMPLE_MS);
      }
    })();
    const t0 = performance.now();
    const ends = await Promise.all(
      clients.map((c) =>
        c.query(RUNAWAY_SQL).then(
          () => ({ at: performance.now(), code: 'completed', message: null as string | null }),
          (err: unknown) => ({ at: performance.now(), code: errorKey(err), message: String((err as Error).message) }),
        ),
      ),
    );
    await sleep(50);
    running = false;
    clearInterval(sampler);
    await treeLoop;

    const limitKb = limitMb * 1024;
    const i = readings.findIndex((r) => r.kb > limitKb);
    let crossedAt: number | null = null;
    let gap: number | null = null;
    if (i > 0) {
      const a = readings[i - 1]!;
      const b = readings[i]!;
      crossedAt = a.t + ((limitKb - a.kb) / (b.kb - a.kb)) * (b.t - a.t);
      gap = b.t - a.t;
    }
    const oom = ends.filter((e) => e.code === '53200').sort((a, b) => a.at - b.at);
    const first = oom[0] ?? null;
    const atError = first ? readings.find((r) => r.t >= first.at) : undefined;
    const gaps = readings.slice(1).map((r, k) => r.t - readings[k]!.t);
    return {
      scope,
      trial,
      limitMb,
      sessions,
      outcomes: ends.map((e) => e.code),
      message: first?.message ?? null,
      crossedMs: crossedAt === null ? null : crossedAt - t0,
      firstErrorMs: first ? first.at - t0 : null,
      detectMs: crossedAt !== null && first ? first.at - crossedAt : null,
      crossingGapMs: gap,
      baselineMb: round1(baseline.kb / 1024),
      peakMb: round1(Math.max(...readings.map((r) => r.kb)) / 1024),
      backendPeakMb: round1(Math.max(...readings.map((r) => r.max)) / 1024),
      atErrorMb: atError ? round1(atError.kb / 1024) : null,
      treePeakPssMb: round1(treePeak),
      treeBaselinePssMb: round1(treeBaselinePssMb),
      samples: readings.length,
      medianSampleGapMs: median(gaps),
    };
  } finally {
    await Promise.all(clients.map((c) => c.end().catch(() => undefined)));
    // The next trial starts on fresh backends, not on one whose heap a runaway has just grown.
    await admin.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = $1`, [SMALL_DB]);
    await sleep(1000);
  }
}

const SMALL_DB = `tdb_${SMALL_TEMPLATE}__runaway`;

async function runawayPart(workDir: string, cleanup: Cleanup, scope: 'session' | 'runtime', trials: number, sessions: number, limitMb: number): Promise<RunawayPart> {
  const dir = path.join(workDir, `runaway-${scope}`);
  mkdirSync(dir);
  chmodSync(dir, 0o755);
  const flags = ['--grace', String(GRACE_S), scope === 'session' ? '--session-memory-limit' : '--runtime-memory-limit', String(limitMb)];
  progress(`runaway (${scope} limit): starting a runtime with ${flags.slice(2).join(' ')}`);
  const rt = await startRuntimeProcess({ workDir: dir, flags }, cleanup);
  await buildTemplate(rt, 'small');
  await rt.api.createDatabase({ template: SMALL_TEMPLATE, name: SMALL_DB, pinned: true });
  await waitForPool(rt);
  const admin = newClient(rt.postgres, 'postgres');
  admin.on('error', () => undefined);
  await admin.connect();
  const out: RunawayTrial[] = [];
  try {
    for (let t = 0; t < trials; t++) {
      const r = await runawayTrial(rt, admin, scope, t, sessions, limitMb);
      out.push(r);
      const f = (v: number | null): string => (v === null ? '-' : `${v.toFixed(0)} ms`);
      progress(
        `  trial ${t + 1}/${trials}: ${r.outcomes.join(',')}; crossed ${limitMb} MB at ${f(r.crossedMs)}, 53200 at ${f(r.firstErrorMs)}: ` +
          `${f(r.detectMs)} later; peak ${r.peakMb} MB (backend ${r.backendPeakMb} MB), tree PSS peak ${r.treePeakPssMb} MB`,
      );
    }
    const m = (await rt.api.status()).limits.memory;
    return { flags: rt.flags.slice(rt.flags.indexOf('--grace')), trials: out, watchdogPeakMb: m.peak_mb, canceled: m.canceled };
  } finally {
    await admin.end().catch(() => undefined);
    await rt.stop();
  }
}

// ---- measure -----------------------------------------------------------------------------------------

async function measure(opts: Options, { cleanup, workDir }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  const logDir = path.join(workDir, 'logs');
  mkdirSync(logDir);
  writeFileSync(path.join(logDir, 'victim.sql'), VICTIM_SCRIPT);
  const pgbenchVersion = (await runCommand('pgbench', ['--version'], { env: process.env })).stdout.trim();

  const keys: RuntimeKey[] = ['none', ...CAPS.map((c) => `cap${c}` as const)];
  const runtimes = {} as Record<RuntimeKey, Runtime>;
  for (const key of keys) {
    progress(`starting runtime ${key === 'none' ? 'without a cap' : `with --max-active-per-db ${key.slice(3)}`}; template ${TEMPLATE} (${VICTIM_ROWS} accounts), victim and neighbour databases`);
    runtimes[key] = await startIsolationRuntime(workDir, key, cleanup);
  }
  const postgresVersion = (await runtimes.none.rt.api.status()).runtime.postgres_version;

  const samples: IsolationSample[] = [];
  for (let round = 0; round < opts.rounds; round++) {
    for (const [position, config] of order(round).entries()) {
      const s = await isolationSample(config, runtimes[runtimeFor(config)], opts, logDir, `${config}-${round}`);
      samples.push({ round, position, ...s });
      const nb = s.neighbour ? `; neighbour ${s.neighbour.perSecond.toFixed(2)} migrations/s (p50 ${(s.neighbour.migrationP50 / 1000).toFixed(1)} s)` : '';
      progress(
        `round ${round + 1}/${opts.rounds} ${config}: victim p50 ${s.victim.p50.toFixed(2)} ms p99 ${s.victim.p99.toFixed(2)} ms (${s.victim.count} tx)${nb}; ` +
          `runtime ${s.runtimeCores.toFixed(2)} cores, machine ${s.machineCores.toFixed(2)} of ${os.availableParallelism()}${s.victimFailure ? `; ${s.victimFailure}` : ''}`,
      );
      await sleep(1000);
    }
  }
  const runtimeFlags = {} as Record<RuntimeKey, string[]>;
  for (const key of keys) {
    runtimeFlags[key] = runtimes[key].rt.flags.slice(runtimes[key].rt.flags.indexOf('--grace'));
    await runtimes[key].admin.end().catch(() => undefined);
    await runtimes[key].rt.stop();
  }

  const sessionLimit = await runawayPart(workDir, cleanup, 'session', opts.trials, 1, opts.sessionLimitMb);
  const runtimeLimit = opts.runtimeTrials > 0 ? await runawayPart(workDir, cleanup, 'runtime', opts.runtimeTrials, opts.runtimeSessions, opts.runtimeLimitMb) : null;
  return { options: opts, postgresVersion, pgbenchVersion, runtimes: runtimeFlags, samples, sessionLimit, runtimeLimit };
}

// ---- render ------------------------------------------------------------------------------------------

interface ConfigStats {
  rounds: number;
  p50: number;
  p99: number;
  max: number;
  /** Median over rounds of p99 / the same round's "alone" p99. */
  p99Ratio: number;
  lagP99: number;
  tps: number;
  perSecond: number;
  migrationP50: number;
  neighbourErrors: number;
  runtimeCores: number;
  machineCores: number;
  backendCpuMs: number;
  backendWaitMs: number;
  engineWaitMsPerS: number;
}

function configStats(samples: IsolationSample[]): Record<Config, ConfigStats> {
  const out = {} as Record<Config, ConfigStats>;
  for (const config of CONFIGS) {
    const of = samples.filter((s) => s.config === config);
    const ratios = of.flatMap((s) => {
      const alone = samples.find((a) => a.config === 'alone' && a.round === s.round);
      return alone ? [s.victim.p99 / alone.victim.p99] : [];
    });
    out[config] = {
      rounds: of.length,
      p50: median(of.map((s) => s.victim.p50)),
      p99: median(of.map((s) => s.victim.p99)),
      max: Math.max(...of.map((s) => s.victim.max)),
      p99Ratio: median(ratios),
      lagP99: median(of.map((s) => s.victim.lagP99)),
      tps: median(of.map((s) => s.victim.tps)),
      perSecond: median(of.flatMap((s) => (s.neighbour ? [s.neighbour.perSecond] : []))),
      migrationP50: median(of.flatMap((s) => (s.neighbour ? [s.neighbour.migrationP50] : []))),
      neighbourErrors: of.reduce((n, s) => n + Object.values(s.neighbour?.errors ?? {}).reduce((a, b) => a + b, 0), 0),
      runtimeCores: median(of.map((s) => s.runtimeCores)),
      machineCores: median(of.map((s) => s.machineCores)),
      backendCpuMs: median(of.map((s) => s.victimBackendCpuMsPerQuery)),
      backendWaitMs: median(of.map((s) => s.victimBackendRunWaitMsPerQuery)),
      engineWaitMsPerS: median(of.map((s) => s.engineRunWaitMsPerS)),
    };
  }
  return out;
}

function render(r: Meta & Body) {
  const ms = (v: number | null): string => (v !== null && Number.isFinite(v) ? `${v < 10 ? v.toFixed(2) : v.toFixed(1)} ms` : '-');
  const x = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)}x` : '-');
  const st = configStats(r.samples);
  const o = r.options;

  const header = ['configuration', 'victim p50', 'victim p99', 'p99 / alone', 'victim queries/s', 'neighbour migrations/s', 'migration p50', 'runtime CPU', 'machine CPU'];
  const rows = CONFIGS.map((c) => {
    const s = st[c];
    const nb = c === 'alone';
    return [
      LABELS[c],
      ms(s.p50),
      ms(s.p99),
      x(s.p99Ratio),
      s.tps.toFixed(0),
      nb ? '-' : `${s.perSecond.toFixed(2)}${s.neighbourErrors > 0 ? ` (${s.neighbourErrors} errors)` : ''}`,
      nb ? '-' : `${(s.migrationP50 / 1000).toFixed(2)} s`,
      `${s.runtimeCores.toFixed(2)} cores`,
      `${s.machineCores.toFixed(2)} cores`,
    ];
  });

  const whereHeader = ['configuration', 'victim backend CPU per query', 'victim backend run-queue wait per query', 'engine (node) run-queue wait', 'victim schedule lag p99'];
  const whereRows = CONFIGS.map((c) => {
    const s = st[c];
    return [LABELS[c], ms(s.backendCpuMs), ms(s.backendWaitMs), `${s.engineWaitMsPerS.toFixed(0)} ms/s`, ms(s.lagP99)];
  });

  const trialRows = (part: RunawayPart | null): string[][] =>
    (part?.trials ?? []).map((t) => [
      `${t.scope} ${t.limitMb} MB${t.sessions > 1 ? ` (${t.sessions} sessions)` : ''}`,
      String(t.trial + 1),
      t.outcomes.join(', '),
      ms(t.crossedMs),
      ms(t.detectMs),
      `${t.peakMb} MB`,
      t.atErrorMb === null ? '-' : `${t.atErrorMb} MB`,
      `${t.treeBaselinePssMb} -> ${t.treePeakPssMb} MB`,
    ]);
  const trialHeader = ['limit', 'trial', 'outcome', 'crossed after', 'crossing -> 53200', 'peak RssAnon', 'RssAnon at 53200', 'tree PSS (before -> peak)'];
  const allTrials = [...trialRows(r.sessionLimit), ...trialRows(r.runtimeLimit)];

  const partSummary = (part: RunawayPart | null, scope: string): { bar: Bar | null; all53200: boolean; text: string } => {
    if (!part) return { bar: null, all53200: true, text: '' };
    const d = part.trials.map((t) => t.detectMs);
    const known = d.filter((v): v is number => v !== null);
    const worst = known.length > 0 ? Math.max(...known) : NaN;
    const all = part.trials.every((t) => t.outcomes.every((c) => c === '53200'));
    const limit = part.trials[0]?.limitMb ?? NaN;
    const peak = Math.max(...part.trials.map((t) => t.peakMb));
    const tree = Math.max(...part.trials.map((t) => t.treePeakPssMb));
    const text =
      `${scope} limit ${limit} MB, ${part.trials.length} trials: crossing -> 53200 median ${ms(median(known))}, max ${ms(worst)}; ` +
      `peak RssAnon ${median(part.trials.map((t) => t.peakMb)).toFixed(0)} MB median, ${peak.toFixed(0)} MB max (${x(peak / limit)} the limit); ` +
      `the runtime's tree PSS peaked at ${tree.toFixed(0)} MB; the watchdog's own peak ${part.watchdogPeakMb.toFixed(0)} MB, ` +
      `statements canceled: ${part.canceled.session} session, ${part.canceled.runtime} runtime.`;
    return {
      bar: {
        text: `${scope} limit: every crossing -> 53200 under ${DETECT_BAR_MS} ms`,
        measured: `median ${ms(median(known))}, max ${ms(worst)} over ${known.length} of ${part.trials.length} trials`,
        pass: known.length === part.trials.length && worst < DETECT_BAR_MS,
      },
      all53200: all,
      text,
    };
  };
  const sess = partSummary(r.sessionLimit, 'session');
  const runt = partSummary(r.runtimeLimit, 'runtime');

  const c2 = st.cap2;
  const bars: Bar[] = [
    {
      text: `victim p99 with --max-active-per-db 2 <= ${P99_BAR}x its p99 with no neighbour`,
      measured: `${ms(c2.p99)} vs ${ms(st.alone.p99)} = ${x(c2.p99Ratio)} (median of per-round ratios); no cap ${ms(st.uncapped.p99)} = ${x(st.uncapped.p99Ratio)}`,
      pass: c2.p99Ratio <= P99_BAR,
    },
    ...(sess.bar ? [sess.bar] : []),
    ...(runt.bar ? [runt.bar] : []),
    {
      text: 'every runaway statement ends with 53200 (none completes, none ends otherwise)',
      measured: [...r.sessionLimit.trials, ...(r.runtimeLimit?.trials ?? [])].flatMap((t) => t.outcomes).join(', '),
      pass: sess.all53200 && runt.all53200,
    },
  ];

  const about = [
    `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.postgresVersion}; ${r.pgbenchVersion}.`,
    `Victim: pgbench, 1 connection, point SELECT on ${VICTIM_ROWS.toLocaleString('en-US')} accounts scheduled at ${o.rate} a second (pgbench -R; latency is each query's own, from sending it to its answer, schedule lag left out); ` +
      `neighbour: ${o.neighbours} node-postgres connections, migrations of ${o.rows.toLocaleString('en-US')} rows; ` +
      `${o.rounds} rounds of ${o.windowS} s windows after ${o.rampS} s of ramp, the order of configurations alternating.`,
  ];
  const footnote =
    'p50/p99: medians over rounds of each window\'s percentiles; "p99 / alone": median of per-round ratios against the same round\'s victim alone. ' +
    'Runtime CPU: the runtime\'s process tree (node, postmaster, backends) in the window; machine CPU: every process on the machine (/proc/stat), ' +
    `of ${r.machine.nproc}: what else ran beside it is the difference, less the victim's pgbench and this benchmark's node.`;

  const whereNote =
    'From /proc/PID/schedstat over the window: the victim database\'s backend time on a CPU and time runnable but waiting for one, ' +
    'divided by the victim\'s queries; the engine\'s main thread (node, which relays every message) waiting for a CPU, per second. ' +
    'Schedule lag: how late pgbench sent a query against its Poisson schedule because the one before had not come back.';

  const terminal = [
    ...about,
    '',
    formatTable(header, rows),
    '',
    formatTable(whereHeader, whereRows),
    '',
    formatTable(trialHeader, allTrials),
    '',
    sess.text,
    ...(runt.text ? [runt.text] : []),
  ].join('\n');

  return {
    bars,
    terminal,
    markdown: (raw: string) =>
      [
        `Latest run: ${about.join(' ')}`,
        '',
        markdownTable(header, rows, ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r']),
        '',
        footnote,
        '',
        markdownTable(whereHeader, whereRows),
        '',
        whereNote,
        '',
        markdownTable(trialHeader, allTrials, ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r']),
        '',
        `- ${sess.text}`,
        ...(runt.text ? [`- ${runt.text}`] : []),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        '',
        `Raw samples: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

export const main = benchMain<Options, Body>({
  name: 'isolation',
  help: HELP,
  options: ['rounds', 'window', 'ramp', 'rate', 'neighbours', 'rows', 'trials', 'session-limit', 'runtime-trials', 'runtime-limit', 'runtime-sessions'],
  parse: (v, quick) => ({
    rounds: intOption(v, 'rounds', quick ? 1 : 5, 1),
    windowS: intOption(v, 'window', quick ? 4 : 15, 1),
    rampS: intOption(v, 'ramp', quick ? 2 : 5, 1),
    rate: intOption(v, 'rate', 200, 1),
    neighbours: intOption(v, 'neighbours', 50, 1),
    rows: intOption(v, 'rows', 10_000, 1),
    trials: intOption(v, 'trials', quick ? 2 : 8, 1),
    sessionLimitMb: intOption(v, 'session-limit', 200, 1),
    runtimeTrials: intOption(v, 'runtime-trials', quick ? 1 : 4, 0),
    runtimeLimitMb: intOption(v, 'runtime-limit', 400, 1),
    runtimeSessions: intOption(v, 'runtime-sessions', 3, 1),
  }),
  measure,
  render,
});
