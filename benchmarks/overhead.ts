// The overhead benchmark: what the PGX engine costs compared with connecting to PostgreSQL directly
// and with PgBouncer, all three in front of the same PostgreSQL 18 in the same run. On request
// (--targets ...,relay) a fourth target, a bare Node.js relay (lib/node-relay-main.ts), measures in the
// same run the floor any Node.js proxy has on this machine; bun-relay is the same relay run by Bun, and
// pgx-bun a second PGX runtime run by Bun (`bun bin/pgx.js start`, its own process and its
// own PostgreSQL, set up as the first), for Node and Bun side by side.
//
// Method (see docs/benchmarks.md): every target is warmed up; each workload's fixed work is sized from
// the warm-up (same work for every target); then rounds run each workload on every target, the order
// alternating (direct, pgx, pgbouncer; then the reverse) so drift on a shared machine hits all of them
// alike. Reported: medians over rounds, and ratios paired within a round. Every sample is kept.

import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { systemClock } from '../src/clock.js';
import { PgxError } from '../src/errors.js';
import { Cleanup } from './lib/cleanup.js';
import { ownCpuMs, processCpuMs } from './lib/cpu.js';
import { runChecked } from './lib/exec.js';
import { machineInfo } from './lib/machine.js';
import { replaceSection } from './lib/markdown-section.js';
import { markdownSection, svgChart, terminalReport } from './lib/overhead-report.js';
import type { OverheadResults, Sample, Workload } from './lib/overhead-results.js';
import { packageRoot } from './lib/paths.js';
import { initPgbench, pgbenchArgs, pgbenchVersion, runPgbench, type PgbenchRun } from './lib/pgbench.js';
import { startNodeRelay, type RunningNodeRelay } from './lib/node-relay.js';
import { startPgBouncer, type RunningPgBouncer } from './lib/pgbouncer.js';
import { psqlValue, timeScan } from './lib/psql.js';
import { waitForQuiet } from './lib/quiet.js';
import { startBenchRuntime, type Transport } from './lib/runtime.js';
import { startRuntimeProcess } from './lib/runtime-process.js';
import { median } from './lib/stats.js';
import { BENCH_DATABASE, OVERHEAD_TARGET_NAMES, TARGET_NAMES, type OverheadTargetName, type Target } from './lib/target.js';

const HELP = `Usage: npm run bench -- overhead [options]

Options:
  --rounds N         measured rounds, order alternating each round (env PGX_BENCH_ROUNDS)     [3]
  --seconds S        size each run's fixed work to take about S seconds                       [6]
  --transport T      tcp (every target on loopback TCP) or unix (all on Unix sockets)         [tcp]
  --quiet-wait S     before each workload, wait up to S s for a second with idle CPUs         [30]
  --quick            smoke run: 1 round, ~1 s runs, no quiet wait; results to a temp file,
                     docs untouched
  --only IDS         only these workloads (comma-separated: select-simple-1, select-prepared-16,
                     connect-simple-4, scan, ...): a partial run, results to a temp file, docs
                     untouched; for before/after CPU per transaction at two commits
  --targets LIST     targets to run, comma-separated, among direct, pgx, pgbouncer, relay,
                     bun-relay, pgx-bun, pgx-node, pooler [direct,pgx,pgbouncer]. relay: a bare Node.js relay in its own
                     process (bytes copied both ways, no parsing, no pool), the floor of any
                     Node.js proxy here; a new PostgreSQL connection per client connection, so
                     on -C it pays a backend fork. bun-relay: the same relay run by Bun (npm
                     package @oven/bun-linux-x64). pgx-bun: a second PGX runtime run by Bun,
                     in its own process in front of its own PostgreSQL (same settings, pgbench
                     data made the same way); TCP only. pooler: a bare Node.js session pooler
                     (node-pooler-main.ts: accept, startup, an idle backend, relay, back idle
                     on Terminate; no reset or check), the floor of -S -C for a Node.js
                     pooler; TCP only. pgx-node: like pgx-bun, on Node.js (the engine's CPU
                     read from /proc, like PgBouncer's, none of the benchmark's in it). Any
                     other list is a partial run
  --report FILE      redraw the table, docs section and chart from a results JSON
  -h, --help         this help
`;

const SCALE = 10;
const SCAN_SQL = 'SELECT * FROM pgbench_accounts';
const POOL_SIZE = 100;

interface Options {
  rounds: number;
  runSeconds: number;
  warmSeconds: number;
  transport: Transport;
  quick: boolean;
  quietWaitSeconds: number;
  /** Workload ids to run (--only); null: all. */
  only: string[] | null;
  /** Targets to run (--targets), in their canonical order. */
  targets: OverheadTargetName[];
}

/** The workloads, before their fixed work is sized. */
function plannedWorkloads(): Workload[] {
  const w = (kind: Workload['kind'], clients: number, protocol: 'simple' | 'prepared'): Workload => {
    const id = kind === 'scan' ? 'scan' : `${kind}-${protocol}-${clients}`;
    const label =
      kind === 'scan' ? 'scan 1M rows (psql)' : kind === 'connect' ? `-S -C, ${clients} client${clients > 1 ? 's' : ''}` : `-S ${protocol}, ${clients} client${clients > 1 ? 's' : ''}`;
    return { id, kind, label, clients, threads: clients > 1 ? 2 : 1, protocol, transactionsPerClient: 1, command: '' };
  };
  return [
    ...[1, 4, 16].map((c) => w('select', c, 'simple')),
    ...[1, 4, 16].map((c) => w('select', c, 'prepared')),
    w('connect', 1, 'simple'),
    w('connect', 4, 'simple'),
    w('scan', 1, 'simple'),
  ];
}

function pgbenchRun(w: Workload, sizing: { seconds: number } | { transactionsPerClient: number }): PgbenchRun {
  return { clients: w.clients, threads: w.threads, protocol: w.protocol, connectEach: w.kind === 'connect', ...sizing };
}

/** Transactions per client so that a run at `tps` takes about `seconds`; two significant digits. */
function sizeWork(tps: number, clients: number, seconds: number): number {
  const raw = Math.max(20, (tps * seconds) / clients);
  const unit = 10 ** Math.max(0, Math.floor(Math.log10(raw)) - 1);
  return Math.round(raw / unit) * unit;
}

function parseOptions(argv: string[]): Options | 'help' | { report: string } {
  const { values } = parseArgs({
    args: argv,
    strict: true,
    options: {
      rounds: { type: 'string' },
      seconds: { type: 'string' },
      transport: { type: 'string' },
      quick: { type: 'boolean' },
      'quiet-wait': { type: 'string' },
      report: { type: 'string' },
      only: { type: 'string' },
      targets: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    },
  });
  if (values.help) return 'help';
  if (values.report) return { report: values.report };
  const quick = values.quick ?? false;
  const rounds = Number(values.rounds ?? process.env.PGX_BENCH_ROUNDS ?? (quick ? 1 : 3));
  const runSeconds = Number(values.seconds ?? (quick ? 1 : 6));
  const transport = values.transport ?? 'tcp';
  if (!Number.isInteger(rounds) || rounds < 1) throw new PgxError('CONFIG_INVALID', `--rounds ${values.rounds}: expected a whole number >= 1`);
  if (!(runSeconds > 0)) throw new PgxError('CONFIG_INVALID', `--seconds ${values.seconds}: expected a positive number`);
  if (transport !== 'tcp' && transport !== 'unix') throw new PgxError('CONFIG_INVALID', `--transport ${transport}: expected tcp or unix`);
  const quietWaitSeconds = Number(values['quiet-wait'] ?? (quick ? 0 : 30));
  if (!(quietWaitSeconds >= 0)) throw new PgxError('CONFIG_INVALID', `--quiet-wait ${values['quiet-wait']}: expected seconds >= 0`);
  let only: string[] | null = null;
  if (values.only !== undefined) {
    const known = plannedWorkloads().map((w) => w.id);
    only = values.only.split(',').map((id) => id.trim()).filter((id) => id !== '');
    const unknown = only.filter((id) => !known.includes(id));
    if (only.length === 0 || unknown.length > 0) {
      throw new PgxError('CONFIG_INVALID', `--only ${values.only}: expected workload ids among ${known.join(', ')}`);
    }
  }
  let targets: OverheadTargetName[] = [...TARGET_NAMES];
  if (values.targets !== undefined) {
    const asked = values.targets.split(',').map((t) => t.trim()).filter((t) => t !== '');
    const unknown = asked.filter((t) => !(OVERHEAD_TARGET_NAMES as readonly string[]).includes(t));
    if (asked.length === 0 || unknown.length > 0) {
      throw new PgxError('CONFIG_INVALID', `--targets ${values.targets}: ${unknown.length ? `no target named ${unknown.join(', ')}` : 'no target given'}`, {
        hint: `Choose comma-separated among ${OVERHEAD_TARGET_NAMES.join(', ')}, e.g. --targets direct,pgx,pgbouncer,relay.`,
      });
    }
    targets = OVERHEAD_TARGET_NAMES.filter((t) => asked.includes(t));
  }
  return { rounds, runSeconds, warmSeconds: quick ? 1 : 2, transport, quick, quietWaitSeconds, only, targets };
}

/** A run of other targets than the default three is partial: its results do not replace the published ones. */
function partialRun(opts: Options): boolean {
  return opts.only !== null || opts.targets.join(',') !== TARGET_NAMES.join(',');
}

function progress(text: string): void {
  process.stderr.write(`${text}\n`);
}

/** Pids of the proxies that run in their own process. */
interface ProxyPids {
  pgbouncer?: number;
  relay?: number;
  'bun-relay'?: number;
  pooler?: number;
  'pgx-node'?: number;
  'pgx-bun'?: number;
}

/** CPU the proxy has used so far: the engine runs in this process, PgBouncer and the relay in their own. */
function proxyCpu(target: OverheadTargetName, pids: ProxyPids): number | null {
  if (target === 'pgx') return ownCpuMs();
  if (target === 'pgbouncer' && pids.pgbouncer !== undefined) return processCpuMs(pids.pgbouncer);
  if (target === 'relay' && pids.relay !== undefined) return processCpuMs(pids.relay);
  if (target === 'bun-relay' && pids['bun-relay'] !== undefined) return processCpuMs(pids['bun-relay']);
  if (target === 'pooler' && pids.pooler !== undefined) return processCpuMs(pids.pooler);
  if (target === 'pgx-node' && pids['pgx-node'] !== undefined) return processCpuMs(pids['pgx-node']);
  if (target === 'pgx-bun' && pids['pgx-bun'] !== undefined) return processCpuMs(pids['pgx-bun']);
  return null;
}

/** Runs every workload briefly on every target, and sizes each workload's fixed work from that. */
async function warmUpAndSize(workloads: Workload[], targets: Partial<Record<OverheadTargetName, Target>>, opts: Options): Promise<OverheadResults['warmup']> {
  const warmup: OverheadResults['warmup'] = [];
  progress(`warm-up: ${opts.warmSeconds} s of each workload on each target, which also sizes the fixed work`);
  for (const w of workloads) {
    // A burst from someone else here would shrink the work of every later run.
    if (opts.quietWaitSeconds > 0) await waitForQuiet(opts.quietWaitSeconds * 1000);
    const values: number[] = [];
    for (const t of opts.targets) {
      const target = targets[t]!;
      const value = w.kind === 'scan' ? await timeScan(target, SCAN_SQL) : (await runPgbench(target, pgbenchRun(w, { seconds: opts.warmSeconds }))).tps;
      warmup.push({ workload: w.id, target: t, value });
      values.push(value);
    }
    // Same work for every target; sized so the median target (the middle one of the default three)
    // takes about --seconds. For the scan (a value in seconds) the work is that many scans back to
    // back, reported per scan.
    const mid = median(values);
    w.transactionsPerClient = w.kind === 'scan' ? Math.max(1, Math.round(opts.runSeconds / mid)) : sizeWork(mid, w.clients, opts.runSeconds);
    w.command =
      w.kind === 'scan'
        ? `psql -Atc '${SCAN_SQL}' > /dev/null  (${w.transactionsPerClient} times in a row)`
        : `pgbench ${pgbenchArgs(pgbenchRun(w, { transactionsPerClient: w.transactionsPerClient })).join(' ')}`;
    progress(`  ${w.label}: ${values.map((v, i) => `${opts.targets[i]} ${w.kind === 'scan' ? `${v.toFixed(2)} s` : `${Math.round(v)} tps`}`).join(', ')} -> ${w.command}`);
  }
  return warmup;
}

/** One workload's fixed work on one target: the sample, with the proxy's CPU over the run. */
async function runOnce(w: Workload, target: Target, pids: ProxyPids, at: Pick<Sample, 'round' | 'position' | 'idleBefore'>): Promise<Sample> {
  const load1 = os.loadavg()[0]!;
  const cpuBefore = proxyCpu(target.name, pids);
  let value: number;
  let wallMs: number;
  let latencyMs: number | null = null;
  if (w.kind === 'scan') {
    let seconds = 0;
    for (let i = 0; i < w.transactionsPerClient; i++) seconds += await timeScan(target, SCAN_SQL);
    value = seconds / w.transactionsPerClient;
    wallMs = seconds * 1000;
  } else {
    const r = await runPgbench(target, pgbenchRun(w, { transactionsPerClient: w.transactionsPerClient }));
    value = r.tps;
    wallMs = r.wallMs;
    latencyMs = r.latencyMs;
  }
  const cpuAfter = proxyCpu(target.name, pids);
  const proxyCpuMs = cpuBefore !== null && cpuAfter !== null ? cpuAfter - cpuBefore : null;
  return { ...at, workload: w.id, target: target.name, value, wallMs, latencyMs, proxyCpuMs, load1 };
}

async function measure(opts: Options, cleanup: Cleanup): Promise<OverheadResults> {
  const started = systemClock.monotonic();
  const machine = await machineInfo(new Date(systemClock.now()));
  const [pgbench, psql] = [await pgbenchVersion(), (await runChecked('psql', ['--version'], { env: process.env })).stdout.trim()];

  const workDir = mkdtempSync(path.join(os.tmpdir(), 'pgx-bench-'));
  cleanup.add('work directory', () => rmSync(workDir, { recursive: true, force: true }));
  // PostgreSQL and PgBouncer run as an unprivileged user, who must reach their directories inside.
  // (The relay runs as we do.)
  chmodSync(workDir, 0o755);

  progress(`starting the PGX runtime (${opts.transport}) in ${workDir}`);
  const rt = await startBenchRuntime(workDir, opts.transport, cleanup);
  await psqlValue(rt.direct, `CREATE DATABASE ${BENCH_DATABASE}`, 'postgres');
  progress(`pgbench -i -s ${SCALE} through direct PostgreSQL`);
  await initPgbench(rt.direct, SCALE);
  const targets: Partial<Record<OverheadTargetName, Target>> = { direct: rt.direct, pgx: rt.pgx };
  let bouncer: RunningPgBouncer | undefined;
  if (opts.targets.includes('pgbouncer')) {
    bouncer = await startPgBouncer({ workDir, pgSocketDir: rt.pgSocketDir, pgPort: rt.pgPort, poolSize: POOL_SIZE, transport: opts.transport }, cleanup);
    targets.pgbouncer = bouncer.target;
  }
  const relays: Partial<Record<'relay' | 'bun-relay' | 'pooler', RunningNodeRelay>> = {};
  for (const [name, runtime] of [['relay', 'node'], ['bun-relay', 'bun'], ['pooler', 'node']] as const) {
    if (!opts.targets.includes(name)) continue;
    const pooler = name === 'pooler';
    progress(pooler ? 'starting the bare Node pooler (to PostgreSQL\'s Unix socket, backends reused, no reset)' : `starting the ${runtime === 'bun' ? 'Bun' : 'Node'} relay (to PostgreSQL's Unix socket, a new connection per client connection)`);
    const relay = await startNodeRelay({ workDir, pgSocketDir: rt.pgSocketDir, pgPort: rt.pgPort, transport: opts.transport, runtime, pooler }, cleanup);
    progress(`  accepted sockets read ${relay.onread ? 'with onread' : "through 'data' events"}`);
    relays[name] = relay;
    targets[name] = relay.target;
  }
  // Runtimes of their own process, each with its own PostgreSQL: on Bun, and on Node.js (whose CPU,
  // read from /proc, then holds none of the benchmark's own work, as PgBouncer's holds none).
  const ownProcess: Partial<Record<'pgx-bun' | 'pgx-node', number>> = {};
  for (const [name, runtime] of [['pgx-bun', 'bun'], ['pgx-node', 'node']] as const) {
    if (!opts.targets.includes(name)) continue;
    if (opts.transport !== 'tcp') throw new PgxError('CONFIG_INVALID', `the ${name} target runs on TCP only`, { hint: `Leave out --transport unix, or ${name}.` });
    progress(`starting a second PGX runtime on ${runtime === 'bun' ? 'Bun' : 'Node.js'} in its own process (its own PostgreSQL), and pgbench -i in it`);
    const dir = path.join(workDir, name);
    mkdirSync(dir, { mode: 0o755 });
    chmodSync(dir, 0o755);
    const started = await startRuntimeProcess({ workDir: dir, runtime, flags: ['--max-backends', String(rt.maxBackends)] }, cleanup);
    const postgres: Target = { name, host: started.postgres.host, port: started.postgres.port };
    await psqlValue(postgres, `CREATE DATABASE ${BENCH_DATABASE}`, 'postgres');
    await initPgbench(postgres, SCALE);
    targets[name] = { name, host: started.engine.host, port: started.engine.port };
    ownProcess[name] = started.pid;
  }
  const pids: ProxyPids = { pgbouncer: bouncer?.pid, relay: relays.relay?.pid, 'bun-relay': relays['bun-relay']?.pid, 'pgx-bun': ownProcess['pgx-bun'], 'pgx-node': ownProcess['pgx-node'], pooler: relays.pooler?.pid };
  const postgres = await psqlValue(rt.direct, 'SHOW server_version');

  const only = opts.only;
  const workloads = plannedWorkloads().filter((w) => only === null || only.includes(w.id));
  const warmup = await warmUpAndSize(workloads, targets, opts);
  const samples: Sample[] = [];
  for (let round = 0; round < opts.rounds; round++) {
    const order = round % 2 === 0 ? [...opts.targets] : [...opts.targets].reverse();
    progress(`round ${round + 1}/${opts.rounds}: ${order.join(', ')}`);
    for (const w of workloads) {
      const idleBefore = opts.quietWaitSeconds > 0 ? await waitForQuiet(opts.quietWaitSeconds * 1000) : null;
      for (const [position, t] of order.entries()) {
        const sample = await runOnce(w, targets[t]!, pids, { round, position, idleBefore });
        samples.push(sample);
        const shown = w.kind === 'scan' ? `${sample.value.toFixed(3)} s` : `${sample.value.toFixed(0)} tps`;
        progress(`  ${w.label.padEnd(22)} ${t.padEnd(9)} ${shown} (${(sample.wallMs / 1000).toFixed(1)} s)`);
      }
    }
  }

  return {
    benchmark: 'overhead',
    format: 1,
    options: {
      rounds: opts.rounds,
      quick: opts.quick,
      transport: opts.transport,
      runSeconds: opts.runSeconds,
      quietWaitSeconds: opts.quietWaitSeconds,
      scale: SCALE,
      targets: opts.targets,
    },
    machine,
    versions: { postgres, pgbench, psql, pgbouncer: bouncer?.version ?? 'PgBouncer not run' },
    setup: { pgSettings: rt.pgSettings, pgxMaxBackends: rt.maxBackends, pgbouncerPoolMode: 'session', pgbouncerPoolSize: POOL_SIZE },
    workloads,
    warmup,
    samples,
    durationSeconds: Math.round((systemClock.monotonic() - started) / 1000),
  };
}

/** Writes the raw JSON (timestamped, and as -latest) and redraws the docs section and the chart. */
function publish(results: OverheadResults, partial: boolean): string {
  const root = packageRoot();
  const stamp = results.machine.date.replace(/[:.]/g, '-').replace(/-\d{3}Z$/, 'Z');
  const json = `${JSON.stringify(results, null, 1)}\n`;
  if (results.options.quick || partial) {
    const file = path.join(os.tmpdir(), `pgx-overhead-${partial ? 'partial' : 'quick'}-${stamp}.json`);
    writeFileSync(file, json);
    return file;
  }
  const dir = path.join(root, 'benchmarks', 'results');
  mkdirSync(dir, { recursive: true });
  const rel = `benchmarks/results/overhead-${stamp}.json`;
  writeFileSync(path.join(root, rel), json);
  writeFileSync(path.join(dir, 'overhead-latest.json'), json);
  writeDocs(results, rel);
  return rel;
}

function writeDocs(results: OverheadResults, rawPath: string): void {
  const root = packageRoot();
  mkdirSync(path.join(root, 'docs', 'img'), { recursive: true });
  writeFileSync(path.join(root, 'docs', 'img', 'overhead.svg'), svgChart(results));
  replaceSection(path.join(root, 'docs', 'benchmarks.md'), 'overhead', markdownSection(results, rawPath, 'img/overhead.svg'));
}

export async function main(argv: string[]): Promise<number> {
  const opts = parseOptions(argv);
  if (opts === 'help') {
    process.stdout.write(HELP);
    return 0;
  }
  if ('report' in opts) {
    const results = JSON.parse(readFileSync(opts.report, 'utf8')) as OverheadResults;
    process.stdout.write(`${terminalReport(results)}\n`);
    const rel = path.relative(packageRoot(), path.resolve(opts.report));
    if (!results.options.quick) writeDocs(results, rel.startsWith('..') ? opts.report : rel);
    return 0;
  }
  const cleanup = new Cleanup();
  const offSignals = cleanup.onSignals();
  let results: OverheadResults;
  try {
    results = await measure(opts, cleanup);
  } finally {
    await cleanup.run();
    offSignals();
  }
  const saved = publish(results, partialRun(opts));
  process.stdout.write(`\n${terminalReport(results)}\n\nraw results: ${saved}\n`);
  return 0;
}
