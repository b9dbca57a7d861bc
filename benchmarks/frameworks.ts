// The frameworks benchmark: each framework lifecycle of the compat tests (test/compat/lifecycles/:
// node-postgres, postgres.js, Knex, Kysely, TypeORM, Sequelize with sequelize-cli, Drizzle with
// drizzle-kit) run through the PGX engine and directly on the same runtime's PostgreSQL 18, timed per
// phase: create (a warm mint, against CREATE DATABASE ... TEMPLATE + connect), migrate, fixtures,
// model tests, a second migration, model tests again, down, drop.
//
// One runtime as its own process (`pgx start`, defaults, PostgreSQL also on 127.0.0.1:5432 so both
// targets are TCP loopback). Every round runs every lifecycle on both targets back to back, the order
// alternating between rounds. Before each run, and between its create and migrate phases (untimed),
// the benchmark waits until the warm pool is full again, so no spare is being made while a framework
// phase is timed. Each round also compares the two runs' transcripts, as the compat test does.
// Reported: medians per phase, and the median of the per-round ratios engine / direct.

import { chmodSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { firstDifference } from '../test/compat/lifecycles/compare.js';
import { LIFECYCLES } from '../test/compat/lifecycles/index.js';
import { FRAMEWORK_PHASES, PHASES, runLifecycle, type Phase } from '../test/compat/lifecycles/lifecycle.js';
import { buildTemplate, directTarget, engineTarget, type Target, type TargetName } from '../test/compat/lifecycles/targets.js';
import { PgxError } from '../src/errors.js';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { USER } from './lib/pg-connect.js';
import { startRuntimeProcess, waitForPool } from './lib/runtime-process.js';
import { median, pairedRatios } from './lib/stats.js';
import { formatTable, markdownTable } from './lib/table.js';

const HELP = `Usage: npm run bench -- frameworks [options]

Each framework lifecycle of test/compat/ through the PGX engine and directly on its PostgreSQL 18,
timed per phase (create, migrate, fixtures, model, migrate2, model2, down, drop).

Options:
  --rounds N     measured rounds (every lifecycle on both targets, order alternating)   [5]
  --warmup N     rounds run first and not counted                                       [1]
  --only LIST    lifecycles to run, comma-separated (${LIFECYCLES.map((l) => l.name).join(', ')})
  --quick        smoke run: 1 round, no warm-up; results to a temp file, docs untouched
  --report FILE  redraw the tables and docs section from a results JSON
  -h, --help     this help
`;

/** The bar to report against, not assert: every framework phase within 15% of direct. */
const BAR_RATIO = 1.15;

interface Options {
  rounds: number;
  warmup: number;
  only: string[];
}

interface Sample {
  round: number;
  lifecycle: string;
  target: TargetName;
  /** 0: ran first in its round, 1: second. */
  position: number;
  ms: Record<Phase, number>;
}

interface Body {
  options: Options;
  postgresVersion: string;
  runtime: string[];
  lifecycles: { name: string; about: string }[];
  samples: Sample[];
  /** Rounds (warm-up included) where the engine's run observed something else than the direct one. */
  mismatches: { round: number; lifecycle: string; difference: string }[];
}

async function measure(opts: Options, { cleanup, workDir }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  const dir = (name: string): string => {
    const d = path.join(workDir, name);
    mkdirSync(d);
    chmodSync(d, 0o755);
    return d;
  };
  const lifecycles = LIFECYCLES.filter((l) => opts.only.length === 0 || opts.only.includes(l.name));
  progress('starting a PGX runtime (defaults; PostgreSQL also on 127.0.0.1:5432)');
  const rt = await startRuntimeProcess({ workDir: dir('runtime'), tcpPostgres: true }, cleanup);
  await buildTemplate({ ...rt.engine, user: USER });
  const targets: Record<TargetName, Target> = { direct: directTarget({ ...rt.postgres, user: USER }), pgx: engineTarget({ ...rt.engine, user: USER }) };
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
    const order: TargetName[] = i % 2 === 0 ? ['direct', 'pgx'] : ['pgx', 'direct'];
    const line: string[] = [];
    for (const l of lifecycles) {
      const entries: Partial<Record<TargetName, unknown[]>> = {};
      const sums: string[] = [];
      for (const [position, target] of order.entries()) {
        await settle();
        const r = await runLifecycle(l, targets[target], projects[l.name]!, { afterCreate: settle });
        entries[target] = r.entries;
        if (round >= 0) samples.push({ round, lifecycle: l.name, target, position, ms: r.times });
        sums.push(`${target} ${Math.round(FRAMEWORK_PHASES.reduce((s, p) => s + r.times[p], 0))}`);
      }
      const difference = firstDifference(entries.direct as never, entries.pgx as never);
      if (difference) mismatches.push({ round, lifecycle: l.name, difference });
      line.push(`${l.name} ${sums.join('/')}${difference ? ' (transcripts differ)' : ''}`);
    }
    progress(`${round < 0 ? 'warm-up' : `round ${round + 1}/${opts.rounds}`} (${order.join(' first, then ')}), framework phases ms: ${line.join(', ')}`);
  }
  return { options: opts, postgresVersion, runtime: rt.flags, lifecycles: lifecycles.map((l) => ({ name: l.name, about: l.about })), samples, mismatches };
}

type Column = Phase | 'total';
const COLUMNS: Column[] = [...PHASES, 'total'];

function render(r: Meta & Body) {
  /** One target's series for a lifecycle and column, in round order (paired with the other target's). */
  const series = (lifecycle: string, target: TargetName, c: Column): number[] =>
    r.samples
      .filter((s) => s.lifecycle === lifecycle && s.target === target)
      .sort((a, b) => a.round - b.round)
      .map((s) => (c === 'total' ? FRAMEWORK_PHASES.reduce((sum, p) => sum + s.ms[p], 0) : s.ms[c]));
  const stat = (lifecycle: string, c: Column) => {
    const d = series(lifecycle, 'direct', c);
    const e = series(lifecycle, 'pgx', c);
    const ratios = pairedRatios(e, d);
    return { direct: median(d), pgx: median(e), ratio: median(ratios), pgxFaster: ratios.filter((x) => x <= 1).length, n: ratios.length };
  };
  const names = r.lifecycles.map((l) => l.name);
  const ms = (v: number): string => (Number.isFinite(v) ? `${Math.round(v)}` : '-');
  const x = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)}x` : '-');
  const header = ['lifecycle', ...COLUMNS.map((c) => (c === 'total' ? 'framework total' : c))];
  const ratioRows = names.map((n) => [n, ...COLUMNS.map((c) => x(stat(n, c).ratio))]);
  const msRows = names.map((n) => [n, ...COLUMNS.map((c) => `${ms(stat(n, c).direct)} / ${ms(stat(n, c).pgx)}`)]);
  const bars: Bar[] = names.map((n) => {
    const phases = FRAMEWORK_PHASES.map((p) => ({ p, ratio: stat(n, p).ratio }));
    const over = phases.filter((p) => !(p.ratio <= BAR_RATIO));
    const worst = phases.reduce((a, b) => (b.ratio > a.ratio ? b : a));
    return {
      text: `${n}: every framework phase within 15% of direct`,
      measured: `worst ${worst.p} ${x(worst.ratio)}, framework total ${x(stat(n, 'total').ratio)}${over.length > 0 ? `; over the bar: ${over.map((o) => `${o.p} ${x(o.ratio)}`).join(', ')}` : ''}`,
      pass: over.length === 0,
    };
  });
  const rounds = r.options.rounds;
  const same =
    r.mismatches.length === 0
      ? `In every round (warm-up included) the engine's run observed exactly what the direct run did (rows, schema, errors, notices, CLI output).`
      : `Transcripts differed in ${r.mismatches.length} run pair(s): ${r.mismatches.map((m) => `${m.lifecycle} round ${m.round}`).join(', ')}; first: ${r.mismatches[0]!.difference}`;
  const about = [
    `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.postgresVersion}; ${rounds} rounds after ${r.options.warmup} warm-up round(s), the order of the two targets alternating.`,
    same,
  ];
  return {
    bars,
    terminal: [...about, '', 'engine / direct, median of per-round ratios:', formatTable(header, ratioRows), '', 'medians, ms, direct / engine:', formatTable(header, msRows)].join('\n'),
    markdown: (raw: string) =>
      [
        `Latest run: ${about.join(' ')}`,
        '',
        'Engine / direct, the median of the per-round ratios (below 1.00x: the engine was faster):',
        '',
        markdownTable(header, ratioRows),
        '',
        'Medians in ms, direct / engine:',
        '',
        markdownTable(header, msRows),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        '',
        `create is a warm mint through the engine against \`CREATE DATABASE ... TEMPLATE\` and a first connect directly; drop is \`pgx_drop_database()\` against \`DROP DATABASE\`, after the framework's sessions closed; neither is a framework phase, nor in the total. Raw samples: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

export const main = benchMain<Options, Body>({
  name: 'frameworks',
  help: HELP,
  options: ['rounds', 'warmup', 'only'],
  parse: (v, quick) => {
    const only = typeof v.only === 'string' ? v.only.split(',').map((s) => s.trim()).filter(Boolean) : [];
    const unknown = only.filter((n) => !LIFECYCLES.some((l) => l.name === n));
    if (unknown.length > 0) throw new PgxError('CONFIG_INVALID', `--only: no lifecycle named ${unknown.join(', ')}`, { hint: `Choose from ${LIFECYCLES.map((l) => l.name).join(', ')}.` });
    return { rounds: intOption(v, 'rounds', quick ? 1 : 5, 1), warmup: intOption(v, 'warmup', quick ? 0 : 1), only };
  },
  measure,
  render,
});
