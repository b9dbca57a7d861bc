// The churn benchmark: N database lifecycles, each create -> use -> drop, and what they leave behind.
// PGX: connect to a new tdb_ name (the mint), `SELECT 1`, disconnect, then pgx_drop_database() on a
// control session. PostgreSQL 18 directly, on the runtime's own PostgreSQL: CREATE DATABASE ... TEMPLATE
// tpl_small STRATEGY WAL_LOG, connect, `SELECT 1`, disconnect, DROP DATABASE. Reported: lifecycles per
// second, and memory retained per lifecycle: PSS of the process tree after minus before, each taken
// after a settle (the warm pool full, the janitor idle) and, for PGX, after a full GC in node, divided
// by N; for PGX also node's V8 heap. A warm-up of lifecycles runs first so caches (shared buffers,
// catalog caches, V8's code) are already filled when "before" is taken. It opens its control sessions
// WARMUP_ROUNDS times: the engine pools their backends, and a pooled backend's first two reuses fill
// its catalog caches once (DISCARD ALL and the login check, 0.45 MB a backend; flat from the third
// on), which a warm-up with one round left to the measured run as "retained". The bar is judged on PSS
// without its file-backed part (Pss_File: the node and postgres binaries and libraries), which is
// shared with every other process on the machine mapping the same files and moves as they come and go.

import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { newClient, quoteIdent, quoteLiteral, timeFirstQuery, type Endpoint } from './lib/pg-connect.js';
import { startRuntimeProcess, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { median } from './lib/stats.js';
import { formatTable, markdownTable } from './lib/table.js';
import { SMALL_TEMPLATE, buildTemplate } from './lib/templates.js';
import { treeBreakdown, type ProcessMemory, type TreeBreakdown } from './lib/tree-memory.js';

const HELP = `Usage: npm run bench -- churn [options]

N create -> use -> drop lifecycles through PGX and directly on PostgreSQL 18: memory retained per
lifecycle and lifecycles per second, one run.

Options:
  --count N        lifecycles through PGX                                        [30000]
  --pg-count N     lifecycles directly on PostgreSQL (0: skip)                     [400]
  --warmup N       lifecycles run first on each (on PostgreSQL at most --pg-count),
                   before memory is taken                                        [15000]
  --concurrency N  lifecycles in flight at once                                      [3]
  --quick          smoke run: 500 lifecycles (100 warm-up); docs untouched
  --report FILE    redraw the table and docs section from a results JSON
  -h, --help       this help
`;

/**
 * Longer than the 10 s after which the runtime closes the connections its drops used (settings.ts,
 * dropConnectionIdleMs): at 5 s the 17:41 run (2026-12-02) read them open after the lifecycles and
 * closed before them, and counted their two backends (13.5 MB) as retained.
 */
const SETTLE_MS = 12_000;
/** The warm-up's rounds, each with control sessions of its own: a new backend, then its two reuses. */
const WARMUP_ROUNDS = 3;
const DRIFT_GAP_MS = 15_000;

interface Options {
  count: number;
  pgCount: number;
  warmup: number;
  concurrency: number;
}

interface Memory {
  /** Whole tree (PGX: node + postgres; PostgreSQL: the postmaster's tree). */
  pssMB: number;
  nodeMB: number;
  postgresMB: number;
  processes: number;
  /** The file-backed part of pssMB and of nodeMB (absent in results from before it was read). */
  fileMB?: number;
  nodeFileMB?: number;
  /** PGX only: node's V8 heap used after a full GC, MB, and of it the code space (compiled code). */
  heapMB?: number;
  codeMB?: number;
  /**
   * PGX only: V8's committed heap after the GC. Before 4d60060 it included a young generation that
   * V8 grew to 32 MB under allocation and did not give back, so node's PSS could step by 16-30 MB
   * between two readings with nothing retained; the runtime now keeps it at 2 MB. Read this beside a
   * node figure.
   */
  heapCommittedMB?: number;
  /** Each process of the tree at the last reading (absent in results from before it was kept). */
  perProcess?: ProcessMemory[];
}

interface Run {
  target: 'pgx' | 'postgres';
  count: number;
  seconds: number;
  errors: number;
  before: Memory;
  after: Memory;
  /** The same reading taken 15 s before `before`, with nothing running. */
  idle: Memory;
  /** How far an idle tree's PSS (without file-backed pages) moved by itself: `idle` against `before`. */
  idleDriftMB: number;
}

interface Body {
  options: Options;
  postgresVersion: string;
  runtimeFlags: string[];
  runs: Run[];
}

/** `count` lifecycles on `concurrency` workers, each with its own control session. */
async function lifecycles(
  count: number,
  concurrency: number,
  control: Endpoint,
  one: (c: pg.Client, i: number) => Promise<void>,
  label: string,
): Promise<{ seconds: number; errors: number }> {
  let next = 0;
  let done = 0;
  let errors = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    const c = newClient(control, 'postgres');
    c.on('error', () => undefined);
    await c.connect();
    try {
      while (next < count) {
        const i = next++;
        try {
          await one(c, i);
        } catch (err) {
          if (errors++ < 5) progress(`  ${label} ${i}: ${(err as Error).message}`);
        }
        if (++done % Math.max(1, Math.round(count / 10)) === 0) progress(`  ${label}: ${done}/${count} (${(done / ((performance.now() - started) / 1000)).toFixed(1)}/s)`);
      }
    } finally {
      await c.end().catch(() => undefined);
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return { seconds: (performance.now() - started) / 1000, errors };
}

/**
 * Memory of a tree, the median of three readings a second apart (a backend may be exiting). With `rt`,
 * node runs a full GC first: without it node's PSS swung by up to 30 MB with the time since V8 last
 * collected, garbage rather than memory retained.
 */
async function memoryOf(root: number, rt?: RuntimeProcess): Promise<Memory> {
  const heap = rt ? await rt.heap() : undefined;
  const reads: TreeBreakdown[] = [];
  for (let i = 0; i < 3; i++) {
    if (i > 0) await sleep(1000);
    reads.push(await treeBreakdown(root));
  }
  const pick = (f: (b: TreeBreakdown) => number): number => median(reads.map(f));
  const node = (b: TreeBreakdown): number => b.byKind.node?.pss_mb ?? 0;
  const mb = (bytes: number): number => Math.round((bytes / 2 ** 20) * 1000) / 1000;
  return {
    pssMB: pick((b) => b.pss_mb),
    nodeMB: pick(node),
    postgresMB: pick((b) => b.pss_mb - node(b)),
    processes: pick((b) => b.processes),
    fileMB: pick((b) => b.file_mb),
    nodeFileMB: pick((b) => b.byKind.node?.file_mb ?? 0),
    ...(heap ? { heapMB: mb(heap.heapUsed), codeMB: mb(heap.spaces.code_space ?? 0), heapCommittedMB: mb(heap.heapTotal) } : {}),
    perProcess: reads[reads.length - 1]!.perProcess,
  };
}

/** Where the tree's own memory moved: the processes there before and after by growth, and those that came or went. */
function processChanges(before: ProcessMemory[], after: ProcessMemory[]): string {
  const was = new Map(before.map((p) => [p.pid, p]));
  const now = new Set(after.map((p) => p.pid));
  const grew = after
    .filter((p) => was.has(p.pid))
    .map((p) => ({ p, d: p.owned_mb - was.get(p.pid)!.owned_mb, shmem: (p.shmem_mb ?? 0) - (was.get(p.pid)!.shmem_mb ?? 0) }))
    .sort((a, b) => b.d - a.d);
  const mb = (v: number): string => `${v >= 0 ? '+' : ''}${v.toFixed(2)} MB`;
  const total = (ps: ProcessMemory[], f: (p: ProcessMemory) => number): number => ps.reduce((sum, p) => sum + f(p), 0);
  const shmem = total(after, (p) => p.shmem_mb ?? 0) - total(before, (p) => p.shmem_mb ?? 0);
  const came = after.filter((p) => !was.has(p.pid));
  const went = before.filter((p) => !now.has(p.pid));
  return (
    `By process (PSS without file-backed pages, the last reading of each; of it shared memory): ${grew.slice(0, 4).map(({ p, d, shmem: s }) => `pid ${p.pid} ${p.title ?? p.kind} ${mb(d)} (${mb(s)})`).join(', ')}` +
    `; the whole tree's shared memory ${mb(shmem)}` +
    `; new since before: ${came.map((p) => `${p.kind} ${p.owned_mb.toFixed(2)} MB`).join(', ') || 'none'}; gone: ${went.map((p) => `${p.kind} ${p.owned_mb.toFixed(2)} MB`).join(', ') || 'none'}.`
  );
}

/**
 * The runtime at rest: no minted database left, the pool full, nothing dropping (and the drops'
 * connections closed), and node's garbage collected SETTLE_MS before the reading. Read at once after the first collection following 2,500
 * lifecycles, the tree's PSS was 14 MB above a reading 15 s later (the 04:44 run on 2026-12-01), and
 * that idle drift is the resolution. V8 shrinks its committed heap some seconds after a collection,
 * not during it: even with this wait, 21.3 MB at the idle reading, 18.3 MB 15 s later (05:10 run).
 */
async function settle(rt: RuntimeProcess): Promise<void> {
  while ((await rt.api.status()).databases.ephemeral > 0) await sleep(250);
  await waitForPool(rt);
  await rt.heap();
  await sleep(SETTLE_MS);
}

async function measure(opts: Options, { cleanup, workDir }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  // PostgreSQL directly over its private Unix socket: no port 5432 needed, so churn can run beside the
  // other benchmarks; a create costs hundreds of times a connect's transport difference.
  progress('starting the PGX runtime with its defaults');
  const rt = await startRuntimeProcess({ workDir }, cleanup);
  await buildTemplate(rt, 'small');
  const postgresVersion = (await rt.api.status()).runtime.postgres_version;
  const runs: Run[] = [];

  const pgx = (c: pg.Client, i: number): Promise<void> =>
    (async () => {
      const name = `tdb_${SMALL_TEMPLATE}__c${i}`;
      await timeFirstQuery(rt.engine, name);
      await c.query(`SELECT pgx_drop_database(${quoteLiteral(name)})`);
    })();
  progress(`PGX: ${opts.warmup} warm-up lifecycles in ${WARMUP_ROUNDS} rounds`);
  for (let round = 0, done = 0; round < WARMUP_ROUNDS; round++) {
    const n = Math.round((opts.warmup * (round + 1)) / WARMUP_ROUNDS) - done;
    const first = 1_000_000 + done;
    await lifecycles(n, opts.concurrency, rt.engine, (c, i) => pgx(c, first + i), 'warm-up');
    done += n;
  }
  await settle(rt);
  let idle = await memoryOf(rt.pid, rt);
  await sleep(DRIFT_GAP_MS);
  let before = await memoryOf(rt.pid, rt);
  progress(`PGX before: ${JSON.stringify(before)}`);
  let r = await lifecycles(opts.count, opts.concurrency, rt.engine, pgx, 'PGX');
  await settle(rt);
  let after = await memoryOf(rt.pid, rt);
  progress(`PGX after: ${JSON.stringify(after)}`);
  runs.push({ target: 'pgx', count: opts.count, ...r, before, after, idle, idleDriftMB: Math.abs(owned(before) - owned(idle)) });

  if (opts.pgCount > 0) {
    const direct = (c: pg.Client, i: number): Promise<void> =>
      (async () => {
        const name = quoteIdent(`plain_${i}`);
        await c.query(`CREATE DATABASE ${name} TEMPLATE ${SMALL_TEMPLATE} STRATEGY WAL_LOG`);
        await timeFirstQuery(rt.postgres, `plain_${i}`);
        await c.query(`DROP DATABASE ${name}`);
      })();
    // PostgreSQL has no JIT or allocator to warm up beyond its first few hundred: a long PGX warm-up
    // (thousands) is not repeated here, where a lifecycle takes three times as long.
    const pgWarmup = Math.min(opts.warmup, opts.pgCount);
    progress(`PostgreSQL directly: ${pgWarmup} warm-up lifecycles`);
    await lifecycles(pgWarmup, opts.concurrency, rt.postgres, (c, i) => direct(c, 1_000_000 + i), 'warm-up');
    await settle(rt);
    idle = await memoryOf(rt.postmasterPid());
    await sleep(DRIFT_GAP_MS);
    before = await memoryOf(rt.postmasterPid());
    r = await lifecycles(opts.pgCount, opts.concurrency, rt.postgres, direct, 'PG18');
    await settle(rt);
    after = await memoryOf(rt.postmasterPid());
    runs.push({ target: 'postgres', count: opts.pgCount, ...r, before, after, idle, idleDriftMB: Math.abs(owned(before) - owned(idle)) });
  }
  return { options: opts, postgresVersion, runtimeFlags: rt.flags, runs };
}

/** PSS without the file-backed part: memory the tree's processes hold themselves (heap, stacks, shared buffers). */
function owned(m: Memory): number {
  return m.pssMB - (m.fileMB ?? 0);
}

function render(r: Meta & Body) {
  const kb = (mb: number, n: number): number => (mb * 1024) / n;
  const fmtKb = (v: number): string => `${(Math.abs(v) < 0.0005 ? 0 : v).toFixed(3)} KB`;
  const nodeOwned = (m: Memory): number => m.nodeMB - (m.nodeFileMB ?? 0);
  const header = [
    'target', 'lifecycles', 'errors', 'per second', 'PSS before', 'PSS after', 'retained per lifecycle (PSS)', 'of which file-backed',
    'retained without file-backed', 'resolution', 'of which node', 'of which postgres', 'node heap before -> after (GC)', 'of which code',
  ];
  const rows = r.runs.map((x) => [
    x.target === 'pgx' ? 'PGX (mint on connect, pgx_drop_database)' : 'PG18 directly (CREATE / DROP DATABASE)',
    x.count.toLocaleString('en-US'),
    String(x.errors),
    (x.count / x.seconds).toFixed(1),
    `${x.before.pssMB.toFixed(1)} MB`,
    `${x.after.pssMB.toFixed(1)} MB`,
    fmtKb(kb(x.after.pssMB - x.before.pssMB, x.count)),
    fmtKb(kb((x.after.fileMB ?? 0) - (x.before.fileMB ?? 0), x.count)),
    fmtKb(kb(owned(x.after) - owned(x.before), x.count)),
    `+-${fmtKb(kb(x.idleDriftMB, x.count))}`,
    x.target === 'pgx' ? fmtKb(kb(nodeOwned(x.after) - nodeOwned(x.before), x.count)) : '-',
    fmtKb(kb(owned(x.after) - nodeOwned(x.after) - (owned(x.before) - nodeOwned(x.before)), x.count)),
    x.before.heapMB !== undefined && x.after.heapMB !== undefined
      ? `${x.before.heapMB.toFixed(2)} -> ${x.after.heapMB.toFixed(2)} MB (${(((x.after.heapMB - x.before.heapMB) * 2 ** 20) / x.count).toFixed(0)} B each)`
      : '-',
    x.before.codeMB !== undefined && x.after.codeMB !== undefined ? `${(((x.after.codeMB - x.before.codeMB) * 2 ** 20) / x.count).toFixed(0)} B each` : '-',
  ]);
  const p = r.runs.find((x) => x.target === 'pgx')!;
  const d = r.runs.find((x) => x.target === 'postgres');
  const retained = kb(owned(p.after) - owned(p.before), p.count);
  const retainedPss = kb(p.after.pssMB - p.before.pssMB, p.count);
  const resolution = kb(p.idleDriftMB, p.count);
  const heapEach = p.before.heapMB !== undefined && p.after.heapMB !== undefined ? ((p.after.heapMB - p.before.heapMB) * 1024) / p.count : NaN;
  const bars: Bar[] = [
    {
      text: `memory retained per lifecycle <= 0.1 KB (${p.count.toLocaleString('en-US')} lifecycles, whole runtime PSS after a full GC in node, without file-backed pages)`,
      measured:
        `${fmtKb(retained)}, resolution +-${fmtKb(resolution)} (idle, it moved ${p.idleDriftMB.toFixed(1)} MB in 15 s)` +
        `${resolution > 0.1 ? ': too coarse to show 0.1 KB, so this pass or fail is within noise' : ''}; with file-backed pages ${fmtKb(retainedPss)}; node heap after GC ${fmtKb(heapEach)} per lifecycle` +
        (p.before.heapCommittedMB !== undefined && p.after.heapCommittedMB !== undefined
          ? `; V8 heap committed ${p.before.heapCommittedMB.toFixed(1)} -> ${p.after.heapCommittedMB.toFixed(1)} MB`
          : ''),
      pass: retained <= 0.1,
    },
    { text: 'every lifecycle succeeds', measured: `${p.errors} errors`, pass: p.errors === 0 },
  ];
  const rate = d ? ` PGX ${(p.count / p.seconds).toFixed(1)} lifecycles/s = ${((p.count / p.seconds) / (d.count / d.seconds)).toFixed(2)}x PostgreSQL directly.` : '';
  const about =
    `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.postgresVersion}; template ${SMALL_TEMPLATE}; runtime defaults; ` +
    `${r.options.concurrency} lifecycles in flight; ${r.options.warmup} warm-up lifecycles before "before"${d && r.options.pgCount < r.options.warmup ? ` (${r.options.pgCount} on PostgreSQL directly)` : ''}.${rate}`;
  return {
    bars,
    terminal: [about, '', formatTable(header, rows)].join('\n'),
    markdown: (raw: string) =>
      [
        `Latest run: ${about}`,
        '',
        `Command: \`npm run bench -- churn${commandFlags(r.options)}\``,
        '',
        markdownTable(header, rows, ['l', ...header.slice(1).map(() => 'r' as const)]),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        '',
        ...(p.before.perProcess && p.after.perProcess ? [`PGX: ${processChanges(p.before.perProcess, p.after.perProcess)}`, ''] : []),
        `Resolution: how far the same tree's PSS without file-backed pages moved by itself in 15 s just before "before", divided by the lifecycles; a retained figure inside it is noise. PSS: the median of three readings after a settle (no minted database left, the pool full, the drops' connections closed: ${SETTLE_MS / 1000} s) and, for PGX, a full GC in node. File-backed: Pss_File, the node and postgres binaries and libraries, shared with every process on the machine that maps them, so it moves when other programs start or exit. Of which node / postgres: without file-backed pages. Code: V8's code space (compiled code). For PostgreSQL directly (over its Unix socket) the tree is the postmaster's (the runtime's node process is idle then). Raw results: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

/**
 * The published run's size. The warm-up is half the run because a pooled backend's caches fill over
 * its first reuses (see docs/benchmarks.md, Churn); PostgreSQL directly retains nothing per lifecycle
 * and manages about 7 a second, so 400 of its lifecycles are enough to show it.
 */
const DEFAULTS = { count: 30_000, pgCount: 400, warmup: 15_000, concurrency: 3 };

/** The flags a run was given beyond the defaults, for the docs' Command line. */
function commandFlags(o: Options): string {
  const d: string[] = [];
  if (o.count !== DEFAULTS.count) d.push(`--count ${o.count}`);
  if (o.pgCount !== DEFAULTS.pgCount) d.push(`--pg-count ${o.pgCount}`);
  if (o.warmup !== DEFAULTS.warmup) d.push(`--warmup ${o.warmup}`);
  if (o.concurrency !== DEFAULTS.concurrency) d.push(`--concurrency ${o.concurrency}`);
  return d.length ? ` ${d.join(' ')}` : '';
}

export const main = benchMain<Options, Body>({
  name: 'churn',
  help: HELP,
  options: ['count', 'pg-count', 'warmup', 'concurrency'],
  parse: (v, quick) => {
    const count = intOption(v, 'count', quick ? 500 : DEFAULTS.count, 1);
    return {
      count,
      pgCount: intOption(v, 'pg-count', quick ? count : DEFAULTS.pgCount),
      warmup: intOption(v, 'warmup', quick ? 100 : DEFAULTS.warmup),
      concurrency: intOption(v, 'concurrency', DEFAULTS.concurrency, 1),
    };
  },
  measure,
  render,
});
