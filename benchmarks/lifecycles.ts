// The lifecycles benchmark: how many whole database lifecycles a runtime completes a second, as agents
// and CI fleets use it. A lifecycle: a new database, a small migration (three CREATE TABLE and an
// index, in a transaction), 20 queries, disconnect, drop. N workers (1, 4, 16) loop over a fixed number
// of lifecycles per worker count, on three targets:
//   pgx-drop   connect to a new tdb_ name (the mint) ... then SELECT pgx_drop_database(name) on the
//              worker's control session through the engine; a runtime with its defaults
//   pgx-grace  the same without the drop call, on a second runtime started with a short --grace: its
//              janitor drops each database once it has been idle that long
// Both PGX runs end when every database they minted is gone from pg_database (the janitor's drops and
// the trash's background DROP DATABASEs done), so no run leaves work to the next.
//   postgres   CREATE DATABASE ... TEMPLATE tpl_small STRATEGY WAL_LOG on the control session, connect,
//              the same work, DROP DATABASE: on the first runtime's own PostgreSQL
//   work       the tenant's work alone: connect, the same work, disconnect, on databases that PG18
//              created before the run (untimed, dropped after it). No database is made or dropped in
//              it, so its rate is what no way of making databases can beat on this machine: the
//              ceiling of any runtime's ratio to PostgreSQL's full lifecycle.
// The order of the targets reverses from one worker count to the next. Reported: lifecycles per second
// and their ratio to PostgreSQL's, each phase's p50/p99 (the mint, the drop), and the runtime's warm and
// cold mints. With --trace the runtimes' PostgreSQL logs every statement's duration, and the statements
// that took the most time in each run are kept (where the time goes; the run is slower for it).
// Every target reaches its server over the same transport (--transport): the engine's Unix socket and
// PostgreSQL's, or TCP loopback to both, so a relay is not compared with a socket it does not use.

import type pg from 'pg';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { workSubdir } from './lib/paths.js';
import { errorKey, newClient, openTimed, quoteIdent, quoteLiteral, withClient, type Endpoint } from './lib/pg-connect.js';
import { startRuntimeProcess, untilStatus, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { median, percentile } from './lib/stats.js';
import { processCpuMs, treeCpuMs } from './lib/cpu.js';
import { makeXfsImage } from './lib/loop-image.js';
import { StatementTrace, type StatementTotal } from './lib/statement-trace.js';
import { formatTable, markdownTable } from './lib/table.js';
import { SMALL_TEMPLATE, buildTemplate } from './lib/templates.js';
import { MIGRATION, QUERIES, msSince, tenantWork } from './lib/tenant-work.js';

const HELP = `Usage: npm run bench -- lifecycles [options]

Create -> migrate -> 20 queries -> disconnect -> drop, by N concurrent workers: PGX with
pgx_drop_database(), PGX with drops by grace expiry, and PostgreSQL 18's CREATE / DROP DATABASE.

Options:
  --count N      lifecycles per target and worker count                            [300]
  --workers L    comma-separated worker counts                                      [1,4,16]
  --warmup N     lifecycles per target first, one worker, not counted               [10]
  --grace S      --grace of the runtime whose janitor drops (pgx-grace)             [1]
  --reflink yes|no run both runtimes (and PG18, the first runtime's PostgreSQL) on a loop-mounted
                 XFS image with reflink, the filesystems PGX is deployed on (needs root)   [no]
  --transport unix|tcp  how every target connects: the engine's and PostgreSQL's Unix
                 sockets, or TCP loopback to both (PostgreSQL then also listens on 127.0.0.1)  [unix]
  --trace yes|no log every statement's duration in the runtimes' PostgreSQL and keep
                 the costliest per run (slows the run; figures are for where, not how fast)  [no]
  --quick        smoke run: 20 lifecycles, workers 1,4, 1 warm-up; docs untouched
  --report FILE  redraw the table and docs section from a results JSON
  -h, --help     this help
`;

const TARGETS = ['pgx-drop', 'pgx-grace', 'postgres', 'work'] as const;
type LifecycleTarget = (typeof TARGETS)[number];
const LABELS: Record<LifecycleTarget, string> = {
  'pgx-drop': 'PGX, pgx_drop_database()',
  'pgx-grace': 'PGX, dropped at grace expiry',
  postgres: 'PG18 CREATE / DROP DATABASE',
  work: "the tenant's work alone (PG18, databases made beforehand)",
};
const TRACE_TOP = 20;
/** The --reflink image: two runtimes, a few hundred small databases at a time. */
const IMAGE_GB = 8;

interface Options {
  count: number;
  workers: number[];
  warmup: number;
  graceSeconds: number;
  trace: boolean;
  reflink: boolean;
  /** How every target connects (results from before 2026-12-03 17:00 lack it: see transportText). */
  transport: Transport;
}

type Transport = 'unix' | 'tcp';

/** Milliseconds per lifecycle, 0.01 precision, in the order the lifecycles finished. */
interface Phases {
  /** Connect to the first `SELECT 1` answer (PG18: CREATE DATABASE first, then that). */
  mint: number[];
  /** PG18 only: the CREATE DATABASE part of `mint`. */
  create: number[];
  migrate: number[];
  queries: number[];
  /** pgx_drop_database() or DROP DATABASE on the control session; none for pgx-grace. */
  drop: number[];
}

interface Run {
  target: LifecycleTarget;
  workers: number;
  /** 0-based place of this target among the three at this worker count. */
  position: number;
  count: number;
  ok: number;
  errors: Record<string, number>;
  /** From the first lifecycle's start to the last one's end; for pgx-grace, to the janitor's last drop. */
  seconds: number;
  /** pgx-grace: from the last disconnect to the janitor's last drop. */
  drainSeconds?: number;
  phases: Phases;
  /**
   * CPU of both runtimes' process trees over the run, drain included, per successful lifecycle: on 2
   * saturated cores it is what bounds lifecycles per second. Absent in results from before 2026-12-02.
   */
  cpuMsPerLifecycle?: number;
  /** The part of cpuMsPerLifecycle spent in the runtimes' node processes (engine and runtime). */
  nodeCpuMsPerLifecycle?: number;
  /** PGX: the runtime's mint counters over the run. */
  mints?: { warm: number; cold: number; failures: number };
  /** With --trace: the statements that took the most time on that PostgreSQL in this run. */
  trace?: StatementTotal[];
}

interface Body {
  options: Options;
  postgresVersion: string;
  runtimes: { drop: string[]; grace: string[] };
  runs: Run[];
}

interface Runtimes {
  drop: RuntimeProcess;
  grace: RuntimeProcess;
  traces: { drop: StatementTrace; grace: StatementTrace } | null;
  transport: Transport;
}

/** Where `target`'s sessions go: its runtime's engine, or the first runtime's PostgreSQL, over the run's transport. */
function endpoint(rts: Runtimes, target: LifecycleTarget): Endpoint {
  if (target === 'postgres' || target === 'work') return rts.drop.postgres;
  const rt = target === 'pgx-grace' ? rts.grace : rts.drop;
  return rts.transport === 'unix' ? rt.engineSocket! : rt.engine;
}

function databaseName(target: LifecycleTarget, tag: string): string {
  if (target === 'work') return `work_${tag}`;
  if (target === 'postgres') return `plain_${tag}`;
  return `tdb_${SMALL_TEMPLATE}__${target === 'pgx-drop' ? 'd' : 'g'}${tag}`;
}

async function migrateAndQuery(c: pg.Client, phases: Phases): Promise<void> {
  const { migrateMs, queriesMs } = await tenantWork(c);
  phases.migrate.push(migrateMs);
  phases.queries.push(queriesMs);
}

/** One lifecycle; throws on the first failure (the worker counts it). */
async function lifecycle(target: LifecycleTarget, rts: Runtimes, control: pg.Client | null, tag: string, phases: Phases): Promise<void> {
  const name = databaseName(target, tag);
  const ep = endpoint(rts, target);
  const started = performance.now();
  if (target === 'postgres') {
    await control!.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${SMALL_TEMPLATE} STRATEGY WAL_LOG`);
    phases.create.push(msSince(started));
  }
  const { client } = await openTimed(ep, name);
  phases.mint.push(msSince(started));
  try {
    await migrateAndQuery(client, phases);
  } finally {
    await client.end().catch(() => undefined);
  }
  if (target === 'pgx-grace' || target === 'work') return;
  const t = performance.now();
  await control!.query(target === 'postgres' ? `DROP DATABASE ${quoteIdent(name)}` : `SELECT pgx_drop_database(${quoteLiteral(name)})`);
  phases.drop.push(msSince(t));
}

/** `count` lifecycles on `workers` workers, each with its own control session (none for pgx-grace). */
async function loop(
  target: LifecycleTarget,
  rts: Runtimes,
  count: number,
  workers: number,
  tag: string,
): Promise<Pick<Run, 'ok' | 'errors' | 'seconds' | 'phases'>> {
  const phases: Phases = { mint: [], create: [], migrate: [], queries: [], drop: [] };
  const errors: Record<string, number> = {};
  let next = 0;
  let ok = 0;
  const controlAt = target === 'postgres' || target === 'pgx-drop' ? endpoint(rts, target) : null;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    const control = controlAt ? newClient(controlAt, 'postgres') : null;
    control?.on('error', () => undefined);
    await control?.connect();
    try {
      while (next < count) {
        const i = next++;
        try {
          await lifecycle(target, rts, control, `${tag}_${i}`, phases);
          ok++;
        } catch (err) {
          const key = errorKey(err);
          if ((errors[key] = (errors[key] ?? 0) + 1) <= 3) progress(`  ${target} ${tag}_${i}: ${(err as Error).message}`);
        }
      }
    } finally {
      await control?.end().catch(() => undefined);
    }
  };
  await Promise.all(Array.from({ length: workers }, worker));
  return { ok, errors, seconds: (performance.now() - started) / 1000, phases };
}

/**
 * For `work`: its `count` databases for `tag`, made by PG18 before the run and untimed; answers what
 * drops them after it. Nothing to make for the other targets.
 */
async function madeBeforehand(target: LifecycleTarget, rts: Runtimes, count: number, tag: string): Promise<() => Promise<void>> {
  if (target !== 'work') return async () => undefined;
  const names = Array.from({ length: count }, (_, i) => databaseName(target, `${tag}_${i}`));
  const each = (sql: (name: string) => string): Promise<void> =>
    withClient(rts.drop.postgres, 'postgres', async (c) => {
      for (const name of names) await c.query(sql(quoteIdent(name)));
    });
  await each((name) => `CREATE DATABASE ${name} TEMPLATE ${SMALL_TEMPLATE} STRATEGY WAL_LOG`);
  return () => each((name) => `DROP DATABASE IF EXISTS ${name}`);
}

/** No minted database left on either runtime and both warm pools full: the next run starts alike. */
async function settle(rts: Runtimes): Promise<void> {
  for (const rt of [rts.drop, rts.grace]) {
    await untilStatus(
      rt,
      (s) => s.databases.ephemeral === 0 && s.databases.trash === 0 && s.sessions.total === 0,
      'the minted databases were not all dropped',
      120_000,
      250,
    );
    await waitForPool(rt);
  }
}

/** CPU so far of both runtimes' process trees (node, the postmaster, every backend, reaped ones too). */
async function runtimesCpuMs(rts: Runtimes): Promise<number> {
  return (await treeCpuMs(rts.drop.pid)) + (await treeCpuMs(rts.grace.pid));
}

/** CPU so far of both runtimes' node processes alone (the engine and the runtime's own work). */
function runtimesNodeCpuMs(rts: Runtimes): number {
  return processCpuMs(rts.drop.pid) + processCpuMs(rts.grace.pid);
}

async function run(target: LifecycleTarget, rts: Runtimes, count: number, workers: number, tag: string): Promise<Omit<Run, 'position'>> {
  const rt = target === 'pgx-grace' ? rts.grace : rts.drop;
  const trace = rts.traces ? (target === 'pgx-grace' ? rts.traces.grace : rts.traces.drop) : null;
  trace?.reset();
  const dropMade = await madeBeforehand(target, rts, count, tag);
  const before = await rt.api.status();
  const cpuBefore = await runtimesCpuMs(rts);
  const nodeBefore = runtimesNodeCpuMs(rts);
  const started = performance.now();
  const r = await loop(target, rts, count, workers, tag);
  let drainSeconds: number | undefined;
  if (target === 'pgx-drop' || target === 'pgx-grace') {
    // Counted until every database this run minted is gone from pg_database: for pgx-grace the
    // janitor's drops, for both the trash's DROP DATABASEs, which a drop's answer does not wait for.
    // Work left to the background is work the run made, so its time is the run's.
    const disconnected = performance.now();
    const dropped = (s: Awaited<ReturnType<typeof rt.api.status>>): boolean => target === 'pgx-drop' || s.janitor.drops - before.janitor.drops >= r.ok;
    await untilStatus(rt, (s) => dropped(s) && s.databases.trash === 0, `the ${r.ok} databases were not all dropped`, 600_000, 50);
    drainSeconds = (performance.now() - disconnected) / 1000;
    r.seconds = (performance.now() - started) / 1000;
  }
  const cpuMs = (await runtimesCpuMs(rts)) - cpuBefore;
  const nodeMs = runtimesNodeCpuMs(rts) - nodeBefore;
  const after = await rt.api.status();
  await dropMade();
  const mints =
    target === 'postgres' || target === 'work'
      ? undefined
      : { warm: after.mints.warm - before.mints.warm, cold: after.mints.cold - before.mints.cold, failures: after.mints.failures - before.mints.failures };
  return { target, workers, count, ...r, cpuMsPerLifecycle: cpuMs / Math.max(1, r.ok), nodeCpuMsPerLifecycle: nodeMs / Math.max(1, r.ok), ...(drainSeconds !== undefined ? { drainSeconds } : {}), ...(mints ? { mints } : {}), ...(trace ? { trace: trace.top(TRACE_TOP) } : {}) };
}

/** A runtime's listeners for the transport: the engine's Unix socket, or PostgreSQL on TCP too (for the targets on `withPostgres`'s runtime). */
function transportOptions(transport: Transport, socketDir: string, withPostgres: boolean): { socketDir?: string; tcpPostgres?: boolean } {
  return transport === 'unix' ? { socketDir } : { tcpPostgres: withPostgres };
}

async function measure(opts: Options, { cleanup, workDir }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  let root = workDir;
  if (opts.reflink) {
    progress(`making a ${IMAGE_GB} GB XFS image with reflink (sparse) under ${workDir}`);
    root = (await makeXfsImage({ dir: workDir, bytes: IMAGE_GB * 2 ** 30, keep: false, roomHint: 'Set TMPDIR to a filesystem with more room, or run on it without an image (--reflink no).' }, cleanup)).mountPoint;
  }
  const dir = (name: string): string => workSubdir(root, name);
  const traces = opts.trace ? { drop: new StatementTrace(), grace: new StatementTrace() } : null;
  // The runtime passes PostgreSQL's routine LOG lines (a statement's duration is one) on at debug level.
  const traceFlags = opts.trace ? ['-c', 'log_min_duration_statement=0', '--log-level', 'debug'] : [];
  progress(`starting two PGX runtimes: its defaults, and --grace ${opts.graceSeconds}${opts.trace ? ' (statement durations logged)' : ''}`);
  // Started side by side: nothing is measured yet, and a smoke run in CI is shorter for it.
  const [drop, grace] = await Promise.all([
    startRuntimeProcess(
      { workDir: dir('drop'), flags: traceFlags, ...transportOptions(opts.transport, dir('drop-socket'), true), ...(traces ? { onStderrLine: traces.drop.onLine } : {}) },
      cleanup,
    ),
    startRuntimeProcess(
      {
        workDir: dir('grace'),
        flags: ['--grace', String(opts.graceSeconds), ...traceFlags],
        ...transportOptions(opts.transport, dir('grace-socket'), false),
        ...(traces ? { onStderrLine: traces.grace.onLine } : {}),
      },
      cleanup,
    ),
  ]);
  await Promise.all([buildTemplate(drop, 'small'), buildTemplate(grace, 'small')]);
  const rts: Runtimes = { drop, grace, traces, transport: opts.transport };
  const [dropStatus, graceStatus] = await Promise.all([drop.api.status(), grace.api.status()]);
  const postgresVersion = dropStatus.runtime.postgres_version;
  // The report says the runtimes clone on the image. A runtime that found otherwise would measure full
  // copies: the storage probe used to, now and then, with the other runtime starting beside it.
  for (const [name, status] of [['drop', dropStatus], ['grace', graceStatus]] as const) {
    if (opts.reflink && !status.storage.clone) throw new Error(`the ${name} runtime found no clones on the reflink image: ${status.storage.detail}`);
  }
  if (opts.warmup > 0) {
    for (const target of TARGETS) {
      progress(`${target}: ${opts.warmup} warm-up lifecycles`);
      const dropMade = await madeBeforehand(target, rts, opts.warmup, 'w');
      await loop(target, rts, opts.warmup, 1, 'w');
      await dropMade();
    }
  }
  await settle(rts);
  const runs: Run[] = [];
  for (const [k, workers] of opts.workers.entries()) {
    const order = k % 2 === 0 ? [...TARGETS] : [...TARGETS].reverse();
    for (const [position, target] of order.entries()) {
      const r = await run(target, rts, opts.count, workers, `${workers}w`);
      runs.push({ ...r, position });
      const errs = Object.entries(r.errors).map(([key, v]) => `${key} x${v}`).join(', ');
      progress(
        `${workers} workers, ${target}: ${r.ok}/${r.count} in ${r.seconds.toFixed(1)} s = ${(r.ok / r.seconds).toFixed(1)}/s` +
          `${r.mints ? `; mints ${r.mints.warm} warm, ${r.mints.cold} cold` : ''}${errs ? `; errors: ${errs}` : ''}`,
      );
      await settle(rts);
    }
  }
  return { options: opts, postgresVersion, runtimes: { drop: drop.flags, grace: grace.flags }, runs };
}

function render(r: Meta & Body) {
  const find = (t: LifecycleTarget, w: number): Run | undefined => r.runs.find((x) => x.target === t && x.workers === w);
  const rate = (x: Run | undefined): number => (x ? x.ok / x.seconds : NaN);
  const num = (v: number, digits = 1): string => (Number.isFinite(v) ? v.toFixed(digits) : '-');
  const times = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)}x` : '-');
  const p = (values: number[], q: number): string => num(q === 50 ? median(values) : percentile(values, q));
  const workers = r.options.workers;

  const rateHeader = ['workers', ...TARGETS.map((t) => `${LABELS[t]} (/s)`), 'pgx_drop_database / PG18', 'grace expiry / PG18', 'the work alone / PG18'];
  const rateRows = workers.map((w) => [
    String(w),
    ...TARGETS.map((t) => num(rate(find(t, w)))),
    times(rate(find('pgx-drop', w)) / rate(find('postgres', w))),
    times(rate(find('pgx-grace', w)) / rate(find('postgres', w))),
    times(rate(find('work', w)) / rate(find('postgres', w))),
  ]);
  const phaseHeader = ['workers', 'target', 'ok', 'errors', 'mint p50 / p99 (ms)', 'of which CREATE DATABASE p50', 'migrate p50', '20 queries p50', 'drop p50 / p99 (ms)', 'mints warm / cold', 'drops drained after (s)', 'CPU per lifecycle (ms)', 'of which node'];
  const phaseRows = r.runs.map((x) => [
    String(x.workers),
    LABELS[x.target],
    String(x.ok),
    Object.entries(x.errors).map(([k, v]) => `${k} x${v}`).join(', ') || '0',
    `${p(x.phases.mint, 50)} / ${p(x.phases.mint, 99)}`,
    x.target === 'postgres' ? p(x.phases.create, 50) : '-',
    p(x.phases.migrate, 50),
    p(x.phases.queries, 50),
    x.phases.drop.length > 0 ? `${p(x.phases.drop, 50)} / ${p(x.phases.drop, 99)}` : '-',
    x.mints ? `${x.mints.warm} / ${x.mints.cold}` : '-',
    x.drainSeconds !== undefined ? num(x.drainSeconds) : '-',
    x.cpuMsPerLifecycle !== undefined ? num(x.cpuMsPerLifecycle) : '-',
    x.nodeCpuMsPerLifecycle !== undefined ? num(x.nodeCpuMsPerLifecycle) : '-',
  ]);

  const bars: Bar[] = [];
  for (const w of workers.filter((n) => n === 4 || n === 16)) {
    for (const t of ['pgx-drop', 'pgx-grace'] as const) {
      const ratio = rate(find(t, w)) / rate(find('postgres', w));
      const ceiling = rate(find('work', w)) / rate(find('postgres', w));
      bars.push({
        text: `${LABELS[t]}: lifecycles/s >= 3x PG18's at ${w} workers`,
        measured:
          `${num(rate(find(t, w)))} vs ${num(rate(find('postgres', w)))}/s = ${times(ratio)}` +
          (Number.isFinite(ceiling) ? ` (the tenant's work alone, no database made or dropped: ${num(rate(find('work', w)))}/s = ${times(ceiling)})` : ''),
        pass: ratio >= 3,
      });
    }
  }
  const dropRatios = workers.map((w) => ({ w, a: median(find('pgx-drop', w)?.phases.drop ?? []), b: median(find('postgres', w)?.phases.drop ?? []) }));
  bars.push({
    text: 'a drop through PGX never slower than DROP DATABASE (p50, at every worker count)',
    measured: dropRatios.map((d) => `${d.w}w ${num(d.a)} vs ${num(d.b)} ms = ${times(d.a / d.b)}`).join('; '),
    pass: dropRatios.every((d) => d.a <= d.b),
  });
  for (const t of ['pgx-drop', 'pgx-grace'] as const) {
    const spread = workers.map((w) => {
      const m = find(t, w)?.phases.mint ?? [];
      return { w, p50: median(m), p99: percentile(m, 99) };
    });
    bars.push({
      text: `${LABELS[t]}: mint p99 <= 3x its p50 in the loop (at every worker count)`,
      measured: spread.map((s) => `${s.w}w ${num(s.p50)} / ${num(s.p99)} ms = ${times(s.p99 / s.p50)}`).join('; '),
      pass: spread.every((s) => s.p99 <= 3 * s.p50),
    });
  }
  const failed = r.runs.reduce((a, x) => a + (x.count - x.ok), 0);
  bars.push({ text: 'every lifecycle succeeds', measured: `${failed} failed of ${r.runs.reduce((a, x) => a + x.count, 0)}`, pass: failed === 0 });

  const traced = r.runs.filter((x) => x.trace && x.trace.length > 0);
  const traceLines = traced.flatMap((x) => [
    `${LABELS[x.target]}, ${x.workers} workers (${x.ok} lifecycles), statements by total time on its PostgreSQL:`,
    ...x.trace!.map((s) => `  ${num(s.totalMs / Math.max(1, x.ok), 2)} ms per lifecycle, ${s.count}x, max ${num(s.maxMs)} ms: ${s.statement}`),
  ]);
  const about =
    `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.postgresVersion}; template ${SMALL_TEMPLATE}; ${r.options.count} lifecycles per target and worker count ` +
    `after ${r.options.warmup} warm-up lifecycles per target; target order reversing per worker count; pgx-grace on a runtime with --grace ${r.options.graceSeconds}, ` +
    `the other with its defaults; ${transportText(r.options.transport)}; data directories on ${r.options.reflink ? `a loop-mounted XFS image with reflink (the runtimes create with FILE_COPY and file_copy_method = clone, PG18 with its default WAL_LOG)` : 'the host filesystem'}${r.options.trace ? '; statement durations logged (--trace), which slows every target' : ''}.`;
  const note =
    `A lifecycle: mint (connect to the first \`SELECT 1\` answer; PG18: CREATE DATABASE ... STRATEGY WAL_LOG first), a migration (${MIGRATION.length - 1} CREATE TABLE and an index in one transaction), ` +
    `${QUERIES} parameterised statements (inserts, then a join with GROUP BY), disconnect, then the drop on the worker's control session; pgx-grace has no drop call. ` +
    `"The tenant's work alone" is the connect, migration and queries without making or dropping a database, on databases PG18 made before the run (untimed): on this machine no way of making databases completes lifecycles faster, so its ratio to PG18's full lifecycle bounds every runtime's. A PGX run ends when every database ` +
    `it minted is gone from pg_database: the janitor's drops (pgx-grace, status janitor.drops) and the background DROP DATABASEs of dropped databases (status databases.trash back to 0); ` +
    `"drops drained after" is that time after the last worker finished. Lifecycles/s: successful lifecycles / the run's wall time, the drain included. ` +
    `CPU per lifecycle: user + system time of both runtimes' process trees (node, PostgreSQL and its backends) over the run, drain included, per lifecycle, and of it the runtimes' node processes (engine and runtime); the benchmark's own client is not counted.`;
  return {
    bars,
    terminal: [about, '', formatTable(rateHeader, rateRows), '', formatTable(phaseHeader, phaseRows), ...(traceLines.length > 0 ? ['', ...traceLines] : [])].join('\n'),
    markdown: (raw: string) =>
      [
        `Latest run: ${about}`,
        '',
        markdownTable(rateHeader, rateRows),
        '',
        markdownTable(phaseHeader, phaseRows, ['r', 'l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r']),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        '',
        ...(traceLines.length > 0 ? [...traceLines.map((l) => (l.startsWith('  ') ? `  - ${l.trim()}` : `- ${l}`)), ''] : []),
        `${note} Raw results: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

/** The header's words for `transport`; older results, without one, had PG18 on its socket and the engine on TCP. */
function transportText(transport: Transport | undefined): string {
  if (transport === 'unix') return "every target over Unix sockets (the engine's, PostgreSQL's)";
  if (transport === 'tcp') return 'every target over TCP loopback (the engine, PostgreSQL)';
  return 'PG18 over its Unix socket, the engine over TCP loopback';
}

function workerList(raw: string | boolean | undefined, fallback: number[]): number[] {
  if (raw === undefined) return fallback;
  const list = String(raw).split(',').map((s) => Number(s.trim()));
  if (list.length === 0 || list.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--workers ${String(raw)}: expected whole numbers >= 1, comma-separated`);
  return list;
}

export const main = benchMain<Options, Body>({
  name: 'lifecycles',
  help: HELP,
  options: ['count', 'workers', 'warmup', 'grace', 'trace', 'reflink', 'transport'],
  parse: (v, quick) => {
    for (const flag of ['trace', 'reflink'] as const) {
      if (v[flag] !== undefined && v[flag] !== 'yes' && v[flag] !== 'no') throw new Error(`--${flag} ${String(v[flag])}: expected yes or no`);
    }
    if (v.transport !== undefined && v.transport !== 'unix' && v.transport !== 'tcp') throw new Error(`--transport ${String(v.transport)}: expected unix or tcp`);
    return {
      count: intOption(v, 'count', quick ? 20 : 300, 1),
      workers: workerList(v.workers, quick ? [1, 4] : [1, 4, 16]),
      warmup: intOption(v, 'warmup', quick ? 1 : 10),
      graceSeconds: intOption(v, 'grace', 1),
      trace: v.trace === 'yes',
      reflink: v.reflink === 'yes',
      transport: v.transport === 'tcp' ? 'tcp' : 'unix',
    };
  },
  measure,
  render,
});
