// The first-session benchmark: how fast a new database's first client works, as an agent or a CI job
// uses one (a new database now and then, a migration, a few statements), on a filesystem that clones.
// One runtime with its defaults on a loop-mounted XFS image with reflink (the loop device doing direct
// I/O, so a read the page cache misses goes to the disk), and its own PostgreSQL for the yardsticks.
// Each round takes one sample of each target, the order rotating and reversing every other pass, each
// after the same pause with nothing running (the runtime's pool refilled and at rest):
//   pgx       connect through the engine to a new tdb_ name (a warm mint: a spare claimed), the
//             migration and 20 statements (lib/tenant-work.ts), disconnect, pgx_drop_database()
//   pgx-direct the same mint, its session closed, and the work on a session of PostgreSQL's own
//             socket: the minted database's state alone, without the engine's relay of each statement
//   postgres  CREATE DATABASE ... STRATEGY WAL_LOG (PostgreSQL 18's default) on a control session,
//             connect, the same work, DROP DATABASE: its copy goes through shared buffers, so the new
//             database's pages are in memory when its first client comes
//   clone     the same with STRATEGY FILE_COPY and file_copy_method = clone, as PGX copies templates:
//             the clone's page cache is its files', not the blocks' it shares with the template, so its
//             first client reads the catalogs from disk (a spare before catalog-prefetch.ts)
// Timed: connect to the first SELECT 1 answer (CREATE DATABASE included for the PostgreSQL targets),
// the migration, the statements. Every target over Unix sockets (the engine's and PostgreSQL's).

import { chmodSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta, type Rendered } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { makeXfsImage } from './lib/loop-image.js';
import { workSubdir } from './lib/paths.js';
import { newClient, openTimed, quoteIdent, quoteLiteral } from './lib/pg-connect.js';
import { startRuntimeProcess, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { median, percentile } from './lib/stats.js';
import { formatTable, markdownTable } from './lib/table.js';
import { SMALL_TEMPLATE, buildTemplate } from './lib/templates.js';
import { MIGRATION, QUERIES, msSince, tenantWork } from './lib/tenant-work.js';
import { roundOrder } from './lib/round-order.js';

const HELP = `Usage: npm run bench -- first-session [options]

A new database's first client (connect, a migration, ${QUERIES} statements), now and then, on a
loop-mounted XFS image with reflink (needs root): through PGX (a warm mint), and on its PostgreSQL
with CREATE DATABASE ... WAL_LOG and with a FILE_COPY clone.

Options:
  --rounds N     rounds, one sample of each target per round                   [30]
  --pause-ms N   quiet time before each sample (the pool refilled and at rest)  [1500]
  --quick        smoke run: 2 rounds; docs untouched
  --report FILE  redraw the table and docs section from a results JSON
  -h, --help     this help
`;

const TARGETS = ['pgx', 'pgx-direct', 'postgres', 'clone'] as const;
type Target = (typeof TARGETS)[number];
const LABELS: Record<Target, string> = {
  pgx: 'PGX: a warm mint through the engine',
  'pgx-direct': "PGX: a warm mint, the work on PostgreSQL's socket",
  postgres: 'PG18: CREATE DATABASE ... WAL_LOG, then connect',
  clone: 'PG18: CREATE DATABASE ... FILE_COPY (clone), then connect',
};
const IMAGE_GB = 4;

interface Options {
  rounds: number;
  pauseMs: number;
}

interface Samples {
  ready: number[];
  migrate: number[];
  queries: number[];
}

interface Body {
  options: Options;
  postgresVersion: string;
  samples: Record<Target, Samples>;
  /** The runtime's mint counters over the pgx samples: every one should be warm. */
  mints: { warm: number; cold: number };
}

async function sample(target: Target, rt: RuntimeProcess, control: pg.Client, engineControl: pg.Client, tag: string, into: Samples): Promise<void> {
  const minted = target === 'pgx' || target === 'pgx-direct';
  const name = minted ? `tdb_${SMALL_TEMPLATE}__${target === 'pgx' ? 'fs' : 'fd'}${tag}` : `fs_${target}_${tag}`;
  const started = performance.now();
  if (!minted) await control.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${SMALL_TEMPLATE} STRATEGY ${target === 'postgres' ? 'WAL_LOG' : 'FILE_COPY'}`);
  let { client } = await openTimed(minted ? rt.engineSocket! : rt.postgresSocket, name);
  into.ready.push(msSince(started));
  if (target === 'pgx-direct') {
    await client.end();
    ({ client } = await openTimed(rt.postgresSocket, name));
  }
  try {
    const { migrateMs, queriesMs } = await tenantWork(client);
    into.migrate.push(migrateMs);
    into.queries.push(queriesMs);
  } finally {
    await client.end().catch(() => undefined);
  }
  if (minted) await engineControl.query(`SELECT pgx_drop_database(${quoteLiteral(name)})`);
  else await control.query(`DROP DATABASE ${quoteIdent(name)}`);
}

async function measure(opts: Options, { cleanup, workDir }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  const root = (await makeXfsImage({ dir: workDir, bytes: IMAGE_GB * 2 ** 30, keep: false, roomHint: 'Set TMPDIR to a filesystem with more room.' }, cleanup)).mountPoint;
  const socketDir = path.join(workDir, 'sock');
  mkdirSync(socketDir);
  chmodSync(socketDir, 0o755);
  progress('starting a runtime with its defaults on the XFS image');
  const rt = await startRuntimeProcess({ workDir: workSubdir(root, 'rt'), socketDir }, cleanup);
  await buildTemplate(rt, 'small');
  await waitForPool(rt);
  const before = await rt.api.status();
  const control = newClient(rt.postgresSocket, 'postgres');
  await control.connect();
  cleanup.add('control session', () => control.end());
  await control.query('SET file_copy_method = clone');
  const engineControl = newClient(rt.engineSocket!, 'postgres');
  await engineControl.connect();
  cleanup.add('engine control session', () => engineControl.end());
  const samples = Object.fromEntries(TARGETS.map((t) => [t, { ready: [], migrate: [], queries: [] }])) as unknown as Record<Target, Samples>;
  for (let round = 0; round < opts.rounds; round++) {
    for (const target of roundOrder(TARGETS, round)) {
      await waitForPool(rt);
      await sleep(opts.pauseMs);
      await sample(target, rt, control, engineControl, String(round), samples[target]);
    }
    if ((round + 1) % 10 === 0 || round + 1 === opts.rounds) progress(`${round + 1}/${opts.rounds} rounds`);
  }
  const after = await rt.api.status();
  return {
    options: opts,
    postgresVersion: after.runtime.postgres_version,
    samples,
    mints: { warm: after.mints.warm - before.mints.warm, cold: after.mints.cold - before.mints.cold },
  };
}

const f1 = (n: number): string => n.toFixed(1);

function render(r: Meta & Body): Rendered {
  const s = r.samples;
  const header = ['target', 'samples', 'ready p50 (ms)', 'migration p50 / p99 (ms)', `${QUERIES} statements p50 (ms)`, 'migration / PG18 WAL_LOG (p50)'];
  const rows = TARGETS.map((t) => [
    LABELS[t],
    String(s[t].migrate.length),
    f1(median(s[t].ready)),
    `${f1(median(s[t].migrate))} / ${f1(percentile(s[t].migrate, 99))}`,
    f1(median(s[t].queries)),
    `${(median(s[t].migrate) / median(s.postgres.migrate)).toFixed(2)}x`,
  ]);
  const ratio = median(s['pgx-direct'].migrate) / median(s.postgres.migrate);
  const bars: Bar[] = [
    {
      text: "a minted database's first migration, on PostgreSQL's socket, within 1.2x of one on a database PG18 just made (p50)",
      measured: `${f1(median(s['pgx-direct'].migrate))} vs ${f1(median(s.postgres.migrate))} ms = ${ratio.toFixed(2)}x`,
      pass: ratio <= 1.2,
    },
    { text: 'every mint warm', measured: `${r.mints.warm} warm, ${r.mints.cold} cold`, pass: r.mints.cold === 0 },
  ];
  const context =
    `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.postgresVersion}; ${r.options.rounds} rounds, one sample of each target per round, ` +
    `the order rotating; ${r.options.pauseMs} ms of quiet before each sample; template ${SMALL_TEMPLATE}; the runtime with its defaults; ` +
    `data directory on a loop-mounted XFS image with reflink (direct I/O); every target over Unix sockets.`;
  return {
    terminal: `${context}\n\n${formatTable(header, rows)}`,
    bars,
    markdown: (raw) =>
      [
        `Latest run: ${context}`,
        '',
        markdownTable(header, rows, ['l', 'r', 'r', 'r', 'r', 'r']),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : 'FAIL'} ${b.text}: ${b.measured}`),
        '',
        `The migration: ${MIGRATION.length - 1} CREATE TABLE and an index in one transaction; then ${QUERIES} parameterised statements ` +
          `(inserts, then a join with GROUP BY). Ready: connect to the first \`SELECT 1\` answer, CREATE DATABASE included for the PG18 targets. ` +
          `Raw results: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

export const main = benchMain<Options, Body>({
  name: 'first-session',
  help: HELP,
  options: ['rounds', 'pause-ms'],
  parse: (v, quick) => ({ rounds: intOption(v, 'rounds', quick ? 2 : 30, 1), pauseMs: intOption(v, 'pause-ms', 1500) }),
  measure,
  render,
});
