// The frameworks benchmark: each framework lifecycle of the compat tests (test/compat/lifecycles/:
// node-postgres, postgres.js, Knex, Kysely, TypeORM, Sequelize with sequelize-cli, Drizzle with
// drizzle-kit) run through the PGX engine, directly on the same runtime's PostgreSQL 18, and through
// PgBouncer in front of that PostgreSQL, timed per phase: create (a warm mint, against CREATE DATABASE
// ... TEMPLATE + connect), migrate, fixtures, model tests, a second migration, model tests again, down,
// drop.
//
// One runtime as its own process (`pgx start`, defaults, PostgreSQL also on 127.0.0.1:5432 so every
// target is TCP loopback). PgBouncer (session pooling, trust, a `*` entry for any database name, to
// PostgreSQL's Unix socket, started as the overhead benchmark starts it) is the anchor: what any proxy's
// extra hop costs here. Every round runs every lifecycle on every target back to back, the order
// rotating between rounds. Before each run, and between its create and migrate phases (untimed), the
// benchmark waits until the warm pool is full again, so no spare is being made while a framework phase
// is timed. Each round also compares each run's transcript with the direct run's, as the compat test
// does. Reported: medians per phase, and the medians of the per-round ratios engine / direct (the bar),
// PgBouncer / direct and engine / PgBouncer.

import { chmodSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { firstDifference } from '../test/compat/lifecycles/compare.js';
import { LIFECYCLES } from '../test/compat/lifecycles/index.js';
import { FRAMEWORK_PHASES, PHASES, runLifecycle, type Phase } from '../test/compat/lifecycles/lifecycle.js';
import type { Entry } from '../test/compat/lifecycles/recorder.js';
import { buildTemplate, directTarget, engineTarget, type Target } from '../test/compat/lifecycles/targets.js';
import { PgxError } from '../src/errors.js';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { USER } from './lib/pg-connect.js';
import { startPgBouncer } from './lib/pgbouncer.js';
import { pgbouncerTarget } from './lib/pgbouncer-compat-target.js';
import { privateSocketDir } from './lib/runtime.js';
import { startRuntimeProcess, waitForPool } from './lib/runtime-process.js';
import { median } from './lib/stats.js';
import { formatTable, markdownTable } from './lib/table.js';
import { TARGET_NAMES, type TargetName } from './lib/target.js';

const HELP = `Usage: npm run bench -- frameworks [options]

Each framework lifecycle of test/compat/ through the PGX engine, directly on its PostgreSQL 18 and
through PgBouncer in front of it, timed per phase (create, migrate, fixtures, model, migrate2, model2,
down, drop).

Options:
  --rounds N     measured rounds (every lifecycle on every target, order rotating)      [5]
  --warmup N     rounds run first and not counted                                       [1]
  --only LIST    lifecycles to run, comma-separated (${LIFECYCLES.map((l) => l.name).join(', ')})
  --targets LIST targets, comma-separated, direct among them (${TARGET_NAMES.join(', ')})   [all]
                 Either makes a partial run: results to a temp file, docs untouched
  --quick        smoke run: 1 round, no warm-up; results to a temp file, docs untouched
  --report FILE  redraw the tables and docs section from a results JSON
  -h, --help     this help
`;

/** The bar to report against, not assert: every framework phase within 15% of direct. */
const BAR_RATIO = 1.15;

/** PgBouncer as the overhead benchmark runs it: session pooling, this many server connections per database and user. */
const PGBOUNCER_POOL_SIZE = 100;

interface Options {
  rounds: number;
  warmup: number;
  only: string[];
  /** Absent in results from before PgBouncer was a target: direct and pgx. */
  targets?: TargetName[];
}

interface Sample {
  round: number;
  lifecycle: string;
  target: TargetName;
  /** Its place in its round's order: 0 ran first. */
  position: number;
  ms: Record<Phase, number>;
}

interface Body {
  options: Options;
  postgresVersion: string;
  runtime: string[];
  /** Absent in results from before PgBouncer was a target. */
  pgbouncer?: { version: string; poolMode: 'session'; poolSize: number; server: 'Unix socket' };
  lifecycles: { name: string; about: string }[];
  samples: Sample[];
  /**
   * Runs (warm-up included) whose transcript differed from the same round's direct run; `target`
   * absent (results from before PgBouncer) means the engine.
   */
  mismatches: { round: number; lifecycle: string; target?: TargetName; difference: string }[];
}

/** The order of the targets in run i (warm-up included): rotated by one each round. */
function orderOf(targets: readonly TargetName[], i: number): TargetName[] {
  return targets.map((_, k) => targets[(k + i) % targets.length]!);
}

async function measure(opts: Options, { cleanup, workDir }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  const dir = (name: string): string => {
    const d = path.join(workDir, name);
    mkdirSync(d);
    chmodSync(d, 0o755);
    return d;
  };
  const chosen = opts.targets ?? [...TARGET_NAMES];
  const lifecycles = LIFECYCLES.filter((l) => opts.only.length === 0 || opts.only.includes(l.name));
  progress('starting a PGX runtime (defaults; PostgreSQL also on 127.0.0.1:5432)');
  const rt = await startRuntimeProcess({ workDir: dir('runtime'), tcpPostgres: true }, cleanup);
  await buildTemplate({ ...rt.engine, user: USER });
  const targets: Partial<Record<TargetName, Target>> = { direct: directTarget({ ...rt.postgres, user: USER }), pgx: engineTarget({ ...rt.engine, user: USER }) };
  let pgbouncer: Body['pgbouncer'];
  if (chosen.includes('pgbouncer')) {
    progress("starting PgBouncer (session pooling, to the runtime PostgreSQL's Unix socket; TCP loopback for clients)");
    // The runtime's PostgreSQL listens on its private socket too (pgx start's own), as in the overhead benchmark.
    const bouncer = await startPgBouncer(
      { workDir, pgSocketDir: privateSocketDir(rt.dataDir), pgPort: rt.postgres.port, poolSize: PGBOUNCER_POOL_SIZE, transport: 'tcp', adminUsers: [USER] },
      cleanup,
    );
    targets.pgbouncer = pgbouncerTarget(bouncer.target, rt.postgres);
    pgbouncer = { version: bouncer.version, poolMode: 'session', poolSize: PGBOUNCER_POOL_SIZE, server: 'Unix socket' };
  }
  const postgresVersion = (await rt.api.status()).runtime.postgres_version;
  const projectsDir = dir('projects');
  const projects: Record<string, string> = {};
  for (const l of lifecycles) {
    progress(`preparing ${l.name}`);
    projects[l.name] = await l.prepare(projectsDir);
  }
  const settle = (): Promise<void> => waitForPool(rt);

  const samples: Sample[] = [];
  const mismatches: Body['mismatches'] = [];
  const total = opts.warmup + opts.rounds;
  for (let i = 0; i < total; i++) {
    const round = i - opts.warmup;
    const order = orderOf(chosen, i);
    const line: string[] = [];
    for (const l of lifecycles) {
      const entries: Partial<Record<TargetName, Entry[]>> = {};
      const sums: string[] = [];
      for (const [position, target] of order.entries()) {
        await settle();
        const r = await runLifecycle(l, targets[target]!, projects[l.name]!, { afterCreate: settle });
        entries[target] = r.entries;
        if (round >= 0) samples.push({ round, lifecycle: l.name, target, position, ms: r.times });
        sums.push(`${target} ${Math.round(FRAMEWORK_PHASES.reduce((s, p) => s + r.times[p], 0))}`);
      }
      const differ: string[] = [];
      for (const target of ['pgx', 'pgbouncer'] as const) {
        const other = entries[target];
        if (other === undefined || entries.direct === undefined) continue;
        const difference = firstDifference(entries.direct, other, target === 'pgx' ? 'engine' : target);
        if (difference === null) continue;
        mismatches.push({ round, lifecycle: l.name, target, difference });
        differ.push(target);
      }
      line.push(`${l.name} ${sums.join('/')}${differ.length > 0 ? ` (transcripts differ from direct: ${differ.join(', ')})` : ''}`);
    }
    progress(`${round < 0 ? 'warm-up' : `round ${round + 1}/${opts.rounds}`} (${order.join(', then ')}), framework phases ms: ${line.join(', ')}`);
  }
  return {
    options: { ...opts, targets: chosen },
    postgresVersion,
    runtime: rt.flags,
    ...(pgbouncer ? { pgbouncer } : {}),
    lifecycles: lifecycles.map((l) => ({ name: l.name, about: l.about })),
    samples,
    mismatches,
  };
}

type Column = Phase | 'total';
const COLUMNS: Column[] = [...PHASES, 'total'];

/** How each target is named in the tables. */
const SHORT: Record<TargetName, string> = { direct: 'direct', pgx: 'engine', pgbouncer: 'PgBouncer' };

function render(r: Meta & Body) {
  const present = TARGET_NAMES.filter((t) => r.options.targets?.includes(t) ?? r.samples.some((s) => s.target === t));
  const has = (t: TargetName): boolean => present.includes(t);
  /** One target's values for a lifecycle and column, by round. */
  const byRound = (lifecycle: string, target: TargetName, c: Column): Map<number, number> =>
    new Map(
      r.samples
        .filter((s) => s.lifecycle === lifecycle && s.target === target)
        .map((s) => [s.round, c === 'total' ? FRAMEWORK_PHASES.reduce((sum, p) => sum + s.ms[p], 0) : s.ms[c]]),
    );
  const med = (lifecycle: string, target: TargetName, c: Column): number => median([...byRound(lifecycle, target, c).values()]);
  /** The median over rounds of a / b, each round's two runs paired (they ran back to back). */
  const ratio = (lifecycle: string, a: TargetName, b: TargetName, c: Column): number => {
    const of = byRound(lifecycle, b, c);
    return median([...byRound(lifecycle, a, c)].filter(([round]) => of.has(round)).map(([round, v]) => v / of.get(round)!));
  };
  const names = r.lifecycles.map((l) => l.name);
  const ms = (v: number): string => (Number.isFinite(v) ? `${Math.round(v)}` : '-');
  const x = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)}x` : '-');
  const header = ['lifecycle', ...COLUMNS.map((c) => (c === 'total' ? 'framework total' : c))];
  const ratioRows = (a: TargetName, b: TargetName): string[][] => names.map((n) => [n, ...COLUMNS.map((c) => x(ratio(n, a, b, c)))]);
  const msRows = names.map((n) => [n, ...COLUMNS.map((c) => present.map((t) => ms(med(n, t, c))).join(' / '))]);
  /** Every framework phase of lifecycle n on `a` within 15% of direct: what the bar checks. */
  const against = (n: string, a: TargetName) => {
    const phases = FRAMEWORK_PHASES.map((p) => ({ p, ratio: ratio(n, a, 'direct', p) }));
    const over = phases.filter((p) => !(p.ratio <= BAR_RATIO));
    const worst = phases.reduce((m, b) => (b.ratio > m.ratio ? b : m));
    return {
      measured: `worst ${worst.p} ${x(worst.ratio)}, framework total ${x(ratio(n, a, 'direct', 'total'))}${over.length > 0 ? `; over the bar: ${over.map((o) => `${o.p} ${x(o.ratio)}`).join(', ')}` : ''}`,
      pass: over.length === 0,
    };
  };
  const bars: Bar[] = has('pgx') ? names.map((n) => ({ text: `${n}: every framework phase within 15% of direct`, ...against(n, 'pgx') })) : [];
  // The same check for PgBouncer: informational, not a bar of PGX (and not counted with the bars).
  const bouncerLines = has('pgbouncer')
    ? names.map((n) => {
        const a = against(n, 'pgbouncer');
        return `PgBouncer, ${n}: ${a.pass ? 'would pass' : 'would fail'} the same bar (every framework phase within 15% of direct): ${a.measured}`;
      })
    : [];
  const rounds = r.options.rounds;
  const others = present.filter((t) => t !== 'direct');
  const observers = others.map((t) => (t === 'pgx' ? "the engine's run" : "PgBouncer's run")).join(' and ');
  const same =
    r.mismatches.length === 0
      ? `In every round (warm-up included) ${observers}${others.length > 1 ? ' each' : ''} observed exactly what the direct run did (rows, schema, errors, notices, CLI output).`
      : `Transcripts differed from the direct run's in ${r.mismatches.length} run(s): ${r.mismatches.map((m) => `${m.lifecycle} round ${m.round}${others.length > 1 ? ` (${SHORT[m.target ?? 'pgx']})` : ''}`).join(', ')}; first: ${r.mismatches[0]!.difference}`;
  const about = [
    `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.postgresVersion}; ${rounds} rounds after ${r.options.warmup} warm-up round(s), ` +
      (present.length === 2 ? 'the order of the two targets alternating.' : 'the order of the three targets rotating.'),
    ...(r.pgbouncer ? [`${r.pgbouncer.version}: ${r.pgbouncer.poolMode} pooling, pool size ${r.pgbouncer.poolSize}, to PostgreSQL's ${r.pgbouncer.server}, clients over TCP loopback like the other targets.`] : []),
    same,
  ];
  const intro = {
    engine: 'Engine / direct, the median of the per-round ratios (below 1.00x: the engine was faster):',
    bouncer: 'PgBouncer / direct, the median of the per-round ratios (below 1.00x: PgBouncer was faster):',
    engineBouncer: 'Engine / PgBouncer, the median of the per-round ratios (below 1.00x: the engine was faster than PgBouncer):',
    ms: `Medians in ms, ${present.map((t) => SHORT[t]).join(' / ')}:`,
  };
  const tables: { intro: string; rows: string[][] }[] = [
    ...(has('pgx') ? [{ intro: intro.engine, rows: ratioRows('pgx', 'direct') }] : []),
    ...(has('pgbouncer') ? [{ intro: intro.bouncer, rows: ratioRows('pgbouncer', 'direct') }] : []),
    ...(has('pgx') && has('pgbouncer') ? [{ intro: intro.engineBouncer, rows: ratioRows('pgx', 'pgbouncer') }] : []),
    { intro: intro.ms, rows: msRows },
  ];
  const footnote = has('pgbouncer')
    ? "create is a warm mint through the engine against `CREATE DATABASE ... TEMPLATE` and a first connect directly (for PgBouncer: the same `CREATE DATABASE` on PostgreSQL, then a first connect through PgBouncer); drop is `pgx_drop_database()` against `DROP DATABASE`, after the framework's sessions closed (for PgBouncer: its admin console's `KILL db` and `RESUME db`, which close its idle server connections to the database, then `DROP DATABASE` on PostgreSQL); neither is a framework phase, nor in the total. PgBouncer's lines after the bars are informational, not bars of PGX."
    : "create is a warm mint through the engine against `CREATE DATABASE ... TEMPLATE` and a first connect directly; drop is `pgx_drop_database()` against `DROP DATABASE`, after the framework's sessions closed; neither is a framework phase, nor in the total.";
  return {
    bars,
    terminal: [
      ...about,
      ...tables.flatMap((t) => ['', t.intro, formatTable(header, t.rows)]),
      ...(bouncerLines.length > 0 ? ['', 'PgBouncer against the same 15% bar (informational, not a bar of PGX):', ...bouncerLines.map((l) => `- ${l}`)] : []),
    ].join('\n'),
    markdown: (raw: string) =>
      [
        `Latest run: ${about.join(' ')}`,
        ...tables.flatMap((t) => ['', t.intro, '', markdownTable(header, t.rows)]),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        ...bouncerLines.map((l) => `- ${l}`),
        '',
        `${footnote} Raw samples: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

export const main = benchMain<Options, Body>({
  name: 'frameworks',
  help: HELP,
  options: ['rounds', 'warmup', 'only', 'targets'],
  parse: (v, quick) => {
    const list = (name: string): string[] => (typeof v[name] === 'string' ? v[name].split(',').map((s) => s.trim()).filter(Boolean) : []);
    const only = list('only');
    const unknown = only.filter((n) => !LIFECYCLES.some((l) => l.name === n));
    if (unknown.length > 0) throw new PgxError('CONFIG_INVALID', `--only: no lifecycle named ${unknown.join(', ')}`, { hint: `Choose from ${LIFECYCLES.map((l) => l.name).join(', ')}.` });
    const asked = list('targets');
    const badTargets = asked.filter((t) => !(TARGET_NAMES as readonly string[]).includes(t));
    if (badTargets.length > 0) throw new PgxError('CONFIG_INVALID', `--targets: no target named ${badTargets.join(', ')}`, { hint: `Choose from ${TARGET_NAMES.join(', ')}.` });
    const targets = asked.length === 0 ? [...TARGET_NAMES] : TARGET_NAMES.filter((t) => asked.includes(t));
    if (!targets.includes('direct') || targets.length < 2) {
      throw new PgxError('CONFIG_INVALID', `--targets ${asked.join(',')}: direct and at least one other target`, { hint: 'Every ratio and transcript comparison is against direct.' });
    }
    return { rounds: intOption(v, 'rounds', quick ? 1 : 5, 1), warmup: intOption(v, 'warmup', quick ? 0 : 1), only, targets };
  },
  partial: (o) => o.only.length > 0 || (o.targets?.length ?? TARGET_NAMES.length) < TARGET_NAMES.length,
  measure,
  render,
});
