// The density benchmark: what 1,000 (or --count N, up to 10,000) databases cost a PGX runtime at rest.
// Measured on the runtime's whole process tree (node plus every postgres process) from /proc, in three states:
//   untouched  minted through the HTTP API (pinned, so the janitor keeps them), never connected to;
//              PSS sampled at 0, 10, 25, 50 and 100 % of N databases, and at 100 (the chart)
//   queried    each then connected to through the engine, `SELECT 1`, disconnected
//   idle       CPU of the tree over 3 minutes with nothing connected (utime + stime from /proc,
//              reaped children included), while one database holds dead rows from an UPDATE: does
//              autovacuum (or the runtime's own vacuum) clean it in that window (last_autovacuum, last_vacuum)?
// At 100 databases and at N it also times warm mints (the pool full before each; the databases dropped
// after), GET /v1/status (what `pgx status` reads, and the command itself) and GET /v1/databases, and
// reads the disk of a sample of the databases (shared with the template vs their own, from FIEMAP);
// at the end it restarts the runtime and times until all N databases are listed again.
// The same is then done on a stock PostgreSQL 18 (plain-postgres.ts): the databases made with
// CREATE DATABASE ... STRATEGY WAL_LOG, connected to directly, PSS and CPU of the postgres tree.
// Above 1,000 databases (or with --reflink yes) both run on a loop-mounted XFS image with reflink
// (loop-image.ts), so minted databases are clones of their template, as the scale bars assume.

import { readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import path from 'node:path';
import { systemClock } from '../src/clock.js';
import { processTree } from '../src/runtime/postgres/memory.js';
import { databaseDisk, type DatabaseDisk } from './lib/database-disk.js';
import { runCommand } from './lib/exec.js';
import { makeXfsImage, syncFs, usedBytes } from './lib/loop-image.js';
import { packageRoot, workSubdir } from './lib/paths.js';
import { median } from './lib/stats.js';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { treeCpuMs } from './lib/cpu.js';
import type { HeapReport } from './lib/heap-probe.js';
import { queryOnce, quoteIdent, timeFirstQuery, withClient, type Endpoint } from './lib/pg-connect.js';
import { startPlainPostgres } from './lib/plain-postgres.js';
import { startRuntimeProcess, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { panelGrid, type Panel } from './lib/svg-chart.js';
import { formatTable, markdownTable } from './lib/table.js';
import { SMALL_TEMPLATE, buildTemplate } from './lib/templates.js';
import { processKind, treeBreakdown, type TreeBreakdown } from './lib/tree-memory.js';

/** The wait after the UPDATE before the idle window starts: PGSTAT_IDLE_INTERVAL (10 s) and a margin. */
const STATS_FLUSH_MS = 12_000;
const HELP = `Usage: npm run bench -- density [options]

Memory (PSS) of the runtime's process tree with N untouched and N queried databases, idle CPU over a
window, and whether autovacuum still cleans a database with dead rows; warm mints at 100 and at N,
the API's answers, disk per database and a restart at N; then the same on a stock PostgreSQL 18.
Runs at 1,000 (docs section density) and 10,000 (density-10000) replace the published results;
at any other count the results go to a temp file.

Options:
  --count N         databases to create (--databases N: the same)                    [1000]
  --idle-seconds S  idle window for the CPU measurement                              [180]
  --vacuum-wait S   after the window, keep checking for the autovacuum this long     [150]
  --baseline yes|no also measure a stock PostgreSQL 18     [yes up to 1,000 databases, else no]
  --reflink yes|no  run on a loop-mounted XFS image with reflink (needs root)
                                                           [yes above 1,000 databases, else no]
  --image-gb N      size of that image (a sparse file)    [4 + 1 per 1,000 databases, + 8 with a baseline]
  --mint-samples N  warm mints timed at 100 databases and at N                       [30]
  --disk-sample N   databases whose files are read for the disk split                [20]
  --quick           smoke run: 100 databases, 20 s idle, no vacuum wait; docs untouched
  --report FILE     redraw the table, docs section and chart from a results JSON
  -h, --help        this help
`;

const DEAD_ROWS = 50_000;
/** Concurrent creates and connects: as many as the runtime has mint workers. */
const CONCURRENCY = 2;
/**
 * A sample is taken this long after the last database was made and the pool is full: at rest. The
 * runtime gives back the heap its work grew at its first quiet 2-s window and again about 12 s later
 * (src/runtime/quiet-collector.ts); samples 5 s after (until 2026-12-05) came before the second, and
 * in 2 of 5 runs before the first. PostgreSQL is sampled after the same wait.
 */
const SETTLE_SECONDS = 20;
/** Database counts whose runs replace the published results; a run at another count is a trial (a temp file). */
const PUBLISHED_SCALES = [1000, 10_000];
/** The database count warm mints at N are compared with (issue 23: within 1.2x of at 100). */
const MINT_BASE = 100;
/** pgx start's --max-databases default. */
const DEFAULT_MAX_DATABASES = 10_000;
/** Calls per API timing; the median is reported. */
const API_CALLS = 5;

interface Options {
  databases: number;
  idleSeconds: number;
  vacuumWaitSeconds: number;
  baseline: boolean;
  /** Also sample PGX once its pooled idle backends have timed out (300 s by default). */
  afterBackendTimeout: boolean;
  /** Absent in results from before these options. */
  reflink?: boolean;
  imageGb?: number;
  mintSamples?: number;
  diskSample?: number;
  /** Seconds each memory sample waits (SETTLE_SECONDS); absent in results from before it: 5. */
  settleSeconds?: number;
}

/** The engine's default --backend-idle-timeout, and a margin for its timer. */
const BACKEND_IDLE_TIMEOUT_S = 300 + 10;

interface MemorySample {
  /** 'idle backends closed': 310 s after the queries, past the engine's default --backend-idle-timeout (300 s). */
  state: 'untouched' | 'queried' | 'after idle' | 'idle backends closed';
  databases: number;
  memory: TreeBreakdown;
  /** PGX only: node's V8 heap after a full GC, MB. */
  heapMB?: number;
}

interface Vacuum {
  deadTuplesBefore: number;
  /** Seconds after the UPDATE when last_autovacuum was seen set; null: not within the wait. */
  vacuumedAfterS: number | null;
  deadTuplesAfter: number;
  lastAutovacuum: string | null;
}

/** Warm mints at a database count: connect to the first `SELECT 1` answer, ms. */
interface MintSample {
  databases: number;
  ms: number[];
}

/** At N untouched databases: medians of API_CALLS calls, and `pgx status` as a command (node's start included). */
interface ApiTimes {
  databases: number;
  statusMs: number;
  /** One page of GET /v1/databases at the server's default limit (what an old client gets, and the bar). */
  listMs: number;
  listItems: number;
  listBytes: number;
  /** Every page, one after another, at the largest limit (absent in results from before paging). */
  listAllMs?: number;
  cliStatusMs: number;
}

interface Restart {
  databases: number;
  stopMs: number;
  /** From the start of `pgx start` to its ready line. */
  readyMs: number;
  /** From the start of `pgx start` until GET /v1/databases listed every database made before. */
  allListedMs: number;
  missing: number;
  /** Of a sample connected to after the restart, how many failed. */
  connectFailures: number;
}

interface Disk {
  /** The filesystem's clone capability, as the runtime's status reports it (PGX only). */
  filesystem: string;
  clone: boolean | null;
  perDatabase: DatabaseDisk;
  /** The template's directory. */
  template: DatabaseDisk;
  /** The filesystem's used bytes (statfs) after creating N databases minus before, per database. */
  usedPerDatabaseBytes: number;
}

interface System {
  label: string;
  version: string;
  settings: string[];
  samples: MemorySample[];
  createSeconds: number;
  querySeconds: number;
  idle: { seconds: number; cpuMs: number; percentOfCore: number; byKind: Record<string, number> };
  vacuum: Vacuum;
  /** Absent in results from before they were measured, and for the stock PostgreSQL where it has none. */
  mints?: MintSample[];
  api?: ApiTimes;
  restart?: Restart;
  disk?: Disk;
}

interface Body {
  options: Options;
  pgx: System;
  plain: System | null;
}

/** Runs `fn(i)` for i < n on `CONCURRENCY` workers; reports progress every 10 %. */
async function forEach(n: number, what: string, fn: (i: number) => Promise<unknown>): Promise<number> {
  let next = 0;
  let done = 0;
  const started = performance.now();
  const worker = async (): Promise<void> => {
    while (next < n) {
      await fn(next++);
      if (++done % Math.max(1, Math.round(n / 10)) === 0) progress(`  ${what}: ${done}/${n}`);
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
  return (performance.now() - started) / 1000;
}

/** Checkpoints at which memory is sampled: the chart's x axis; 100 too (the warm mint's base). */
function checkpoints(n: number): number[] {
  return [...new Set([0, 0.1, 0.25, 0.5, 1].map((f) => Math.round(f * n)).concat(n > MINT_BASE ? [MINT_BASE] : []))].sort((a, b) => a - b);
}

/** Warm mints, the pool full before each, at `databases` databases; the minted ones dropped afterwards (their backends with them). */
async function timeWarmMints(rt: RuntimeProcess, databases: number, samples: number): Promise<MintSample> {
  const ms: number[] = [];
  const names: string[] = [];
  for (let i = 0; i < samples; i++) {
    await waitForPool(rt);
    const name = `tdb_${SMALL_TEMPLATE}__mint${databases}_${i}`;
    names.push(name);
    ms.push(Math.round((await timeFirstQuery(rt.engine, name)) * 100) / 100);
  }
  for (const name of names) await rt.api.dropDatabase(name);
  progress(`  warm mint at ${databases} databases: p50 ${median(ms).toFixed(1)} ms over ${samples}`);
  return { databases, ms };
}

/** Median milliseconds of `calls` runs of `fn`, one after another. */
async function medianMs(calls: number, fn: () => Promise<unknown>): Promise<number> {
  const ms: number[] = [];
  for (let i = 0; i < calls; i++) {
    const started = performance.now();
    await fn();
    ms.push(performance.now() - started);
  }
  return Math.round(median(ms) * 10) / 10;
}

async function timeApi(rt: RuntimeProcess, databases: number): Promise<ApiTimes> {
  const page = await rt.api.listDatabasesPage();
  const cli = path.join(packageRoot(), 'bin', 'pgx.js');
  const cliStatusMs = await medianMs(3, async () => {
    const r = await runCommand(process.execPath, [cli, 'status', '--url', rt.api.url], { env: process.env, discardStdout: true });
    if (r.code !== 0) throw new Error(`pgx status exited ${String(r.code)}: ${r.stderr.trim()}`);
  });
  const api: ApiTimes = {
    databases,
    statusMs: await medianMs(API_CALLS, () => rt.api.status()),
    listMs: await medianMs(API_CALLS, () => rt.api.listDatabasesPage()),
    listItems: page.items.length,
    listBytes: JSON.stringify(page).length,
    listAllMs: await medianMs(API_CALLS, () => rt.api.listDatabases()),
    cliStatusMs,
  };
  progress(`  GET /v1/status ${api.statusMs} ms, GET /v1/databases ${api.listMs} ms (a page of ${api.listItems}; all pages ${api.listAllMs} ms), pgx status ${api.cliStatusMs} ms`);
  return api;
}

/** Stops the runtime and starts it again on its data directory: how long until every database is back. */
async function restart(rt: RuntimeProcess, workDir: string, flags: string[], names: string[], cleanup: Cleanup): Promise<Restart> {
  let started = performance.now();
  await rt.stop();
  const stopMs = performance.now() - started;
  started = performance.now();
  const again = await startRuntimeProcess({ workDir, flags }, cleanup);
  const readyMs = performance.now() - started;
  const wanted = new Set(names);
  let missing = wanted.size;
  const deadline = started + 120_000;
  while (missing > 0 && performance.now() < deadline) {
    const listed = await again.api.listDatabases();
    missing = wanted.size - listed.filter((d) => wanted.has(d.name)).length;
    if (missing > 0) await sleep(100);
  }
  const allListedMs = performance.now() - started;
  let connectFailures = 0;
  for (const name of names.filter((_, i) => i % Math.max(1, Math.floor(names.length / 10)) === 0)) {
    await timeFirstQuery(again.engine, name).catch(() => connectFailures++);
  }
  await again.stop();
  const r = { databases: names.length, stopMs: Math.round(stopMs), readyMs: Math.round(readyMs), allListedMs: Math.round(allListedMs), missing, connectFailures };
  progress(`  restart: ready in ${r.readyMs} ms, all ${names.length} listed in ${r.allListedMs} ms, ${missing} missing, ${connectFailures} of a sample not connectable`);
  return r;
}

/** CPU per kind of process over the window: live processes' own time, and the postmaster's reaped children. */
async function cpuByKind(root: number): Promise<Record<string, number>> {
  const out: Record<string, number> = {};
  for (const pid of await processTree(root)) {
    try {
      const [stat, cmd] = await Promise.all([readFile(`/proc/${pid}/stat`, 'utf8'), readFile(`/proc/${pid}/cmdline`, 'utf8')]);
      const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
      const kind = processKind(cmd, pid === root);
      out[kind] = (out[kind] ?? 0) + (Number(f[11]) + Number(f[12])) * 10;
      if (kind === 'postmaster') out['reaped children'] = (out['reaped children'] ?? 0) + (Number(f[13]) + Number(f[14])) * 10;
    } catch {
      // Gone.
    }
  }
  return out;
}

/** Sets up dead rows in `database`, then idles for the window, measuring the tree's CPU; then checks autovacuum. */
async function idleAndVacuum(
  root: number,
  ep: Endpoint,
  database: string,
  opts: Options,
): Promise<{ idle: System['idle']; vacuum: Vacuum }> {
  await withClient(ep, database, async (c) => {
    await c.query(`CREATE TABLE dead AS SELECT g AS id, 0 AS v FROM generate_series(1, ${DEAD_ROWS}) g`);
    await c.query('UPDATE dead SET v = 1');
  });
  const updatedAt = systemClock.monotonic();
  // A backend flushes its statistics when idle, at the latest after 10 s (PGSTAT_IDLE_INTERVAL).
  await sleep(STATS_FLUSH_MS);
  const stats = (): Promise<Record<string, unknown>[]> =>
    // Vacuumed by autovacuum, or by the runtime itself (src/runtime/vacuum.ts: last_vacuum).
    queryOnce(ep, database, "SELECT n_dead_tup::int AS dead, greatest(last_autovacuum, last_vacuum)::text AS at FROM pg_stat_user_tables WHERE relname = 'dead'");
  const before = (await stats())[0]!;
  progress(`  dead rows: ${String(before.dead)}; idle window of ${opts.idleSeconds} s`);
  const [cpu0, kinds0] = [await treeCpuMs(root), await cpuByKind(root)];
  const t0 = systemClock.monotonic();
  await sleep(opts.idleSeconds * 1000);
  const [cpu1, kinds1] = [await treeCpuMs(root), await cpuByKind(root)];
  const seconds = (systemClock.monotonic() - t0) / 1000;
  const byKind: Record<string, number> = {};
  for (const k of Object.keys(kinds1)) byKind[k] = Math.round((kinds1[k]! - (kinds0[k] ?? 0)) * 10) / 10;
  const cpuMs = cpu1 - cpu0;
  const idle = { seconds: Math.round(seconds), cpuMs: Math.round(cpuMs), percentOfCore: Math.round((cpuMs / (seconds * 1000)) * 100 * 1000) / 1000, byKind };
  progress(`  idle CPU: ${idle.cpuMs} ms in ${idle.seconds} s = ${idle.percentOfCore}% of a core`);
  let after = (await stats())[0]!;
  const waitUntil = systemClock.monotonic() + opts.vacuumWaitSeconds * 1000;
  while (after.at === null && systemClock.monotonic() < waitUntil) {
    await sleep(10_000);
    after = (await stats())[0]!;
  }
  const vacuumedAfterS = after.at === null ? null : Math.round((systemClock.monotonic() - updatedAt) / 1000);
  progress(`  autovacuum of the dead rows: ${vacuumedAfterS === null ? 'not seen' : `seen by ${vacuumedAfterS} s after the UPDATE`}`);
  return {
    idle,
    vacuum: { deadTuplesBefore: Number(before.dead), vacuumedAfterS, deadTuplesAfter: Number(after.dead), lastAutovacuum: (after.at as string | null) ?? null },
  };
}

async function measurePgx(opts: Options, cleanup: Cleanup, workDir: string): Promise<System> {
  // The runtime's defaults, but for its cap of minted databases (--max-databases, 10,000) when the run
  // needs more: N, the timed warm mints and the database with dead rows.
  const needed = opts.databases + (opts.mintSamples ?? 0) + 1;
  const flags = needed > DEFAULT_MAX_DATABASES ? ['--max-databases', String(needed)] : [];
  progress(`PGX: starting the runtime with its defaults${flags.length > 0 ? ` and ${flags.join(' ')}` : ''}`);
  const rt = await startRuntimeProcess({ workDir, flags }, cleanup);
  await buildTemplate(rt, 'small');
  const mints: MintSample[] = [];
  let api: ApiTimes | undefined;
  await waitForPool(rt);
  await syncFs(workDir);
  const usedBefore = await usedBytes(workDir);
  const samples: MemorySample[] = [];
  const sample = async (state: MemorySample['state'], databases: number): Promise<void> => {
    await waitForPool(rt);
    await sleep((opts.settleSeconds ?? SETTLE_SECONDS) * 1000);
    const memory = await treeBreakdown(rt.pid);
    const heap: HeapReport = await rt.heap();
    samples.push({ state, databases, memory, heapMB: Math.round((heap.heapUsed / 2 ** 20) * 10) / 10 });
    progress(`  ${state} ${databases}: PSS ${memory.pss_mb} MB in ${memory.processes} processes (node heap ${samples.at(-1)!.heapMB} MB)`);
  };
  const names: string[] = [];
  let createSeconds = 0;
  let made = 0;
  for (const at of checkpoints(opts.databases)) {
    createSeconds += await forEach(at - made, 'created', async () => {
      const db = await rt.api.createDatabase({ template: SMALL_TEMPLATE, pinned: true });
      names.push(db.name);
    });
    made = at;
    await sample('untouched', at);
    if (at === opts.databases || at === MINT_BASE) mints.push(await timeWarmMints(rt, at, opts.mintSamples ?? 0));
    if (at === opts.databases) api = await timeApi(rt, at);
  }
  await syncFs(workDir);
  const usedPerDatabaseBytes = Math.round(((await usedBytes(workDir)) - usedBefore) / opts.databases);
  const storage = (await rt.api.status()).storage;
  const disk: Disk = {
    filesystem: storage.filesystem,
    clone: storage.clone,
    perDatabase: await databaseDisk(rt.postgres, rt.dataDir, names, opts.diskSample ?? 0),
    template: await databaseDisk(rt.postgres, rt.dataDir, [SMALL_TEMPLATE], 1),
    usedPerDatabaseBytes,
  };
  progress(`  disk per database: ${kb(disk.perDatabase.ownBytes)} own, ${kb(disk.perDatabase.sharedBytes)} shared; df ${kb(usedPerDatabaseBytes)} (${storage.filesystem}, clone ${String(storage.clone)})`);
  const querySeconds = await forEach(names.length, 'queried', (i) => timeFirstQuery(rt.engine, names[i]!));
  const queriedAt = systemClock.monotonic();
  await sample('queried', names.length);
  const dead = (await rt.api.createDatabase({ template: SMALL_TEMPLATE, name: `tdb_${SMALL_TEMPLATE}__deadrows`, pinned: true })).name;
  const { idle, vacuum } = await idleAndVacuum(rt.pid, rt.engine, dead, opts);
  await sample('after idle', names.length);
  if (opts.afterBackendTimeout) {
    const left = BACKEND_IDLE_TIMEOUT_S * 1000 - (systemClock.monotonic() - queriedAt);
    if (left > 0) await sleep(left);
    await sample('idle backends closed', names.length);
  }
  const status = await rt.api.status();
  const restarted = await restart(rt, workDir, flags, names, cleanup);
  return {
    label: 'PGX runtime (node + postgres)',
    version: status.runtime.postgres_version,
    settings: rt.flags,
    samples,
    createSeconds,
    querySeconds,
    idle,
    vacuum,
    mints,
    ...(api ? { api } : {}),
    restart: restarted,
    disk,
  };
}

const kb = (bytes: number): string => `${(bytes / 1024).toFixed(1)} KB`;

async function measurePlain(opts: Options, cleanup: Cleanup, workDir: string): Promise<System> {
  progress('PostgreSQL 18, stock settings: initdb and start');
  const pg = await startPlainPostgres(workDir, cleanup);
  await withClient(pg.endpoint, 'postgres', async (c) => {
    await c.query(`CREATE DATABASE ${SMALL_TEMPLATE}`);
  });
  await withClient(pg.endpoint, SMALL_TEMPLATE, (c) =>
    c.query("CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL); INSERT INTO items (name) SELECT 'item ' || g FROM generate_series(1, 10) g"),
  );
  const samples: MemorySample[] = [];
  const sample = async (state: MemorySample['state'], databases: number): Promise<void> => {
    await sleep((opts.settleSeconds ?? SETTLE_SECONDS) * 1000);
    const memory = await treeBreakdown(pg.pid);
    samples.push({ state, databases, memory });
    progress(`  ${state} ${databases}: PSS ${memory.pss_mb} MB in ${memory.processes} processes`);
  };
  const name = (i: number): string => `db_${i}`;
  let createSeconds = 0;
  let made = 0;
  await syncFs(workDir);
  const usedBefore = await usedBytes(workDir);
  for (const at of checkpoints(opts.databases)) {
    const from = made;
    // One admin session per batch, closed before the sample (PGX's admin sessions stay open and are counted).
    await withClient(pg.endpoint, 'postgres', async (c) => {
      const started = performance.now();
      for (let i = from; i < at; i++) await c.query(`CREATE DATABASE ${quoteIdent(name(i))} TEMPLATE ${SMALL_TEMPLATE} STRATEGY WAL_LOG`);
      createSeconds += (performance.now() - started) / 1000;
    });
    made = at;
    await sample('untouched', at);
  }
  await syncFs(workDir);
  const usedPerDatabaseBytes = Math.round(((await usedBytes(workDir)) - usedBefore) / opts.databases);
  const all = Array.from({ length: opts.databases }, (_, i) => name(i));
  const disk: Disk = {
    filesystem: '',
    clone: null,
    perDatabase: await databaseDisk(pg.endpoint, pg.dataDir, all, opts.diskSample ?? 0),
    template: await databaseDisk(pg.endpoint, pg.dataDir, [SMALL_TEMPLATE], 1),
    usedPerDatabaseBytes,
  };
  const querySeconds = await forEach(opts.databases, 'queried', (i) => timeFirstQuery(pg.endpoint, name(i)));
  await sample('queried', opts.databases);
  await withClient(pg.endpoint, 'postgres', (c) => c.query('CREATE DATABASE deadrows'));
  const { idle, vacuum } = await idleAndVacuum(pg.pid, pg.endpoint, 'deadrows', opts);
  await sample('after idle', opts.databases);
  await pg.stop();
  return { label: 'PostgreSQL 18 stock (postgres only)', version: pg.version, settings: pg.settings, samples, createSeconds, querySeconds, idle, vacuum, disk };
}

async function measure(opts: Options, { cleanup, workDir }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  let root = workDir;
  if (opts.reflink) {
    const bytes = (opts.imageGb ?? 4) * 2 ** 30;
    progress(`making a ${opts.imageGb} GB XFS image with reflink (sparse) under ${workDir}`);
    root = (await makeXfsImage({ dir: workDir, bytes, keep: false, roomHint: 'Set TMPDIR to a filesystem with more room, or make the image smaller (--image-gb) for fewer databases (--count).' }, cleanup)).mountPoint;
  }
  const sub = (name: string): string => workSubdir(root, name);
  const pgx = await measurePgx(opts, cleanup, sub('pgx'));
  const plain = opts.baseline ? await measurePlain(opts, cleanup, sub('plain')) : null;
  return { options: opts, pgx, plain };
}

function render(r: Meta & Body) {
  const n = r.options.databases;
  const systems = [r.pgx, ...(r.plain ? [r.plain] : [])];
  const at = (s: System, state: MemorySample['state'], count = n): MemorySample | undefined => s.samples.find((x) => x.state === state && x.databases === count);
  const mb = (x: MemorySample | undefined): string => (x ? `${x.memory.pss_mb.toFixed(1)} MB` : '-');
  const mbNum = (x: MemorySample | undefined): number => x?.memory.pss_mb ?? NaN;
  const header = ['', ...systems.map((s) => s.label), ...(r.plain ? ['PGX / PG18'] : [])];
  const ratio = (a: number, b: number): string => (Number.isFinite(a / b) ? `${(a / b).toFixed(2)}x` : '-');
  const memRow = (label: string, state: MemorySample['state'], count: number): string[] => [
    label,
    ...systems.map((s) => {
      const x = at(s, state, count);
      return x ? `${mb(x)} (${x.memory.processes} proc)` : '-';
    }),
    ...(r.plain ? [ratio(mbNum(at(r.pgx, state, count)), mbNum(at(r.plain, state, count)))] : []),
  ];
  const rows: string[][] = [
    ...checkpoints(n).map((c) => memRow(`PSS, ${c} untouched`, 'untouched', c)),
    memRow(`PSS, ${n} queried once`, 'queried', n),
    memRow(`PSS, ${n} queried, after the idle window`, 'after idle', n),
    ...(at(r.pgx, 'idle backends closed') ? [memRow(`PSS, ${n} queried, ${BACKEND_IDLE_TIMEOUT_S} s later (engine's idle backends closed)`, 'idle backends closed', n)] : []),
    ['create all (s)', ...systems.map((s) => s.createSeconds.toFixed(1)), ...(r.plain ? [ratio(r.pgx.createSeconds, r.plain.createSeconds)] : [])],
    ['connect + SELECT 1 to each (s)', ...systems.map((s) => s.querySeconds.toFixed(1)), ...(r.plain ? [ratio(r.pgx.querySeconds, r.plain.querySeconds)] : [])],
    [
      `idle CPU, % of one core over ${r.options.idleSeconds} s`,
      ...systems.map((s) => `${s.idle.percentOfCore.toFixed(2)} %`),
      ...(r.plain ? [ratio(r.pgx.idle.percentOfCore, r.plain.idle.percentOfCore)] : []),
    ],
    [
      `dead rows (${DEAD_ROWS.toLocaleString('en-US')} updated) autovacuumed`,
      ...systems.map((s) => (s.vacuum.vacuumedAfterS === null ? `no (waited ${r.options.idleSeconds + r.options.vacuumWaitSeconds} s)` : `yes, by ${s.vacuum.vacuumedAfterS} s`)),
      ...(r.plain ? [''] : []),
    ],
    ...scaleRows(r, systems),
  ];
  const untouched = mbNum(at(r.pgx, 'untouched'));
  const queried = mbNum(at(r.pgx, 'queried'));
  const vac = r.pgx.vacuum.vacuumedAfterS;
  const bars: Bar[] = [
    { text: `${n} untouched databases <= 120 MB PSS (whole runtime)`, measured: mb(at(r.pgx, 'untouched')), pass: untouched <= 120 },
    { text: `${n} databases queried once <= 160 MB PSS`, measured: mb(at(r.pgx, 'queried')), pass: queried <= 160 },
    { text: `idle CPU with ${n} databases <= 0.5 % of a core`, measured: `${r.pgx.idle.percentOfCore.toFixed(2)} % (${r.pgx.idle.cpuMs} ms CPU in ${r.pgx.idle.seconds} s)`, pass: r.pgx.idle.percentOfCore <= 0.5 },
    {
      text: `a database with dead rows is autovacuumed within the ${r.options.idleSeconds} s idle window (from ${STATS_FLUSH_MS / 1000} s after the UPDATE, once its statistics are flushed, to ${r.options.idleSeconds + STATS_FLUSH_MS / 1000} s; looked at when it ends, then every 10 s)`,
      measured: vac === null ? 'not vacuumed' : `vacuumed by ${vac} s after the UPDATE`,
      // 2 s for reading the CPU and the statistics at the window's end, and rounding.
      pass: vac !== null && vac <= r.options.idleSeconds + STATS_FLUSH_MS / 1000 + 2,
    },
    ...scaleBars(r),
  ];
  const split = (s: System, state: MemorySample['state']): string => {
    const x = at(s, state);
    if (!x) return '-';
    const kinds = Object.entries(x.memory.byKind).sort((a, b) => b[1].pss_mb - a[1].pss_mb);
    const shared = x.memory.neighbours ? Object.entries(x.memory.neighbours).map(([program, count]) => `${count} ${program}`) : [];
    return (
      kinds.map(([k, v]) => `${k}${v.count > 1 ? ` x${v.count}` : ''} ${v.pss_mb.toFixed(1)}`).join(', ') +
      (x.heapMB !== undefined ? `; node heap after GC ${x.heapMB} MB` : '') +
      (shared.length > 0 ? `; of it file-backed ${x.memory.file_mb.toFixed(1)}, shared with ${shared.join(' and ')} processes outside the tree` : '')
    );
  };
  const cpuSplit = (s: System): string =>
    Object.entries(s.idle.byKind)
      .filter(([, v]) => v > 0)
      .sort((a, b) => b[1] - a[1])
      .map(([k, v]) => `${k} ${Math.round(v)} ms`)
      .join(', ');
  const details = systems.flatMap((s) => [
    `${s.label} (settings: ${s.settings.filter((f) => !f.startsWith('/')).join(' ')}):`,
    `  PSS by process (MB), ${n} untouched: ${split(s, 'untouched')}`,
    `  PSS by process (MB), ${n} queried: ${split(s, 'queried')}`,
    `  idle CPU by process: ${cpuSplit(s) || 'none'}`,
  ]);
  const fs = r.pgx.disk ? `; data directories on ${r.options.reflink ? 'a loop-mounted XFS image with reflink' : r.pgx.disk.filesystem} (the runtime's databases ${r.pgx.disk.clone ? 'are' : 'are not'} clones of their template)` : '';
  const about = `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.pgx.version}; template ${SMALL_TEMPLATE} (one table of 10 rows)${fs}; PSS from /proc/PID/smaps_rollup summed over the process tree, ${r.options.settleSeconds ?? 5} s after the last database was made and the warm pool is full.`;
  const chartBars = (s: System, color: string): Panel['bars'] => [
    ...checkpoints(n).map((c) => ({ label: c >= 1000 ? `${c / 1000}k` : String(c), value: mbNum(at(s, 'untouched', c)), color })),
    { label: 'used', value: mbNum(at(s, 'queried')), color: '#c0504d' },
    ...(at(s, 'idle backends closed') ? [{ label: '+300s', value: mbNum(at(s, 'idle backends closed')), color: '#d08a2c' }] : []),
  ];
  const max = Math.max(...systems.flatMap((s) => s.samples.map((x) => x.memory.pss_mb)), 160) * 1.05;
  const panels: Panel[] = systems.map((s, i) => ({
    title: s === r.pgx ? 'PGX runtime (node + postgres)' : 'PostgreSQL 18, stock',
    subtitle: s === r.pgx ? 'PSS MB; used = each queried once' : 'PSS MB; used = each queried once',
    bars: chartBars(s, i === 0 ? '#2f6fb3' : '#8c8c8c'),
    format: (v: number) => (Number.isFinite(v) ? v.toFixed(0) : '-'),
    max,
  }));
  const chartFile = r.benchmark === 'density' ? 'density.svg' : `${r.benchmark}.svg`;
  return {
    bars,
    terminal: [about, '', formatTable(header, rows), '', ...details].join('\n'),
    svg: { file: chartFile, text: panelGrid(`Memory (PSS) against database count, ${r.machine.date.slice(0, 10)}, ${r.machine.nproc} CPUs`, panels, 2) },
    markdown: (raw: string) =>
      [
        `Latest run: ${about}`,
        '',
        markdownTable(header, rows, ['l', ...systems.map((): 'r' => 'r'), ...(r.plain ? ['r' as const] : [])]),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        '',
        `![Memory (PSS) against database count](img/${chartFile})`,
        '',
        'Where it goes:',
        '',
        ...details.map((d) => (d.startsWith('  ') ? `  - ${d.trim()}` : `- ${d}`)),
        '',
        `Raw results: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

/** Per-database disk in a cell: own and shared bytes from FIEMAP, and the df delta. */
function diskCell(d: Disk | undefined): string {
  if (!d) return '-';
  const p = d.perDatabase;
  return `${kb(p.ownBytes)} own + ${kb(p.sharedBytes)} shared of ${kb(p.fileBytes)} in ${p.files} files; df ${kb(d.usedPerDatabaseBytes)}`;
}

/** Rows of what the scale bars read (results from before they were measured show '-'). */
function scaleRows(r: Meta & Body, systems: System[]): string[][] {
  const pad = r.plain ? [''] : [];
  const mintAt = (s: System, at: number): string => {
    const m = s.mints?.find((x) => x.databases === at);
    return m ? `${median(m.ms).toFixed(1)} ms (${m.ms.length})` : '-';
  };
  const n = r.options.databases;
  const pgx = r.pgx;
  // Results from before these were measured have none of them: no rows of dashes.
  const measured = (row: string[]): boolean => row.slice(1).some((c) => c !== '-' && c !== '');
  const rows: string[][] = [
    [`disk per database (sample of ${pgx.disk?.perDatabase.sampled ?? '-'})`, ...systems.map((s) => diskCell(s.disk)), ...pad],
    ['template directory', ...systems.map((s) => (s.disk ? `${kb(s.disk.template.fileBytes)} in ${s.disk.template.files} files` : '-')), ...pad],
    ...(n > MINT_BASE ? [[`warm mint p50, at ${MINT_BASE} databases`, mintAt(pgx, MINT_BASE), ...systems.slice(1).map(() => '-'), ...pad]] : []),
    [`warm mint p50, at ${n} databases`, mintAt(pgx, n), ...systems.slice(1).map(() => '-'), ...pad],
    [
      `GET /v1/status, GET /v1/databases, pgx status at ${n}`,
      pgx.api ? `${pgx.api.statusMs} ms, ${pgx.api.listMs} ms (${pgx.api.listItems} items, ${kb(pgx.api.listBytes)}${pgx.api.listAllMs !== undefined ? `; all pages ${pgx.api.listAllMs} ms` : ''}), ${pgx.api.cliStatusMs} ms` : '-',
      ...systems.slice(1).map(() => '-'),
      ...pad,
    ],
    [
      `restart with ${n} databases: ready, all listed`,
      pgx.restart ? `${(pgx.restart.readyMs / 1000).toFixed(1)} s, ${(pgx.restart.allListedMs / 1000).toFixed(1)} s (${pgx.restart.missing} missing)` : '-',
      ...systems.slice(1).map(() => '-'),
      ...pad,
    ],
  ];
  return rows.filter(measured);
}

/** Issue 23's bars, set for 10,000 databases; at a smaller count they are printed with that caveat. */
function scaleBars(r: Meta & Body): Bar[] {
  const n = r.options.databases;
  const p = r.pgx;
  const at = n < 10_000 ? ` (a bar for 10,000; measured at ${n})` : '';
  const untouched = p.samples.find((x) => x.state === 'untouched' && x.databases === n)?.memory.pss_mb ?? NaN;
  const bars: Bar[] = [
    { text: `${n} untouched databases <= 300 MB PSS, whole runtime${at}`, measured: `${untouched.toFixed(1)} MB`, pass: untouched <= 300 },
    { text: `idle CPU with ${n} databases <= 1 % of a core${at}`, measured: `${p.idle.percentOfCore.toFixed(2)} %`, pass: p.idle.percentOfCore <= 1 },
  ];
  const base = p.mints?.find((x) => x.databases === MINT_BASE);
  const top = p.mints?.find((x) => x.databases === n);
  // At N <= 100 there is nothing to compare: both would be the same sample.
  if (base && top && n > MINT_BASE) {
    const ratio = median(top.ms) / median(base.ms);
    bars.push({
      text: `warm mint p50 at ${n} databases within 1.2x of at ${base.databases}${at}`,
      measured: `${median(top.ms).toFixed(1)} vs ${median(base.ms).toFixed(1)} ms = ${ratio.toFixed(2)}x`,
      pass: ratio <= 1.2,
    });
  }
  if (p.restart) {
    const x = p.restart;
    bars.push({
      text: `restart with ${n} live databases: ready and every one listed in <= 30 s, none lost${at}`,
      measured: `ready in ${(x.readyMs / 1000).toFixed(1)} s, all listed in ${(x.allListedMs / 1000).toFixed(1)} s; ${x.missing} missing, ${x.connectFailures} of a sample not connectable`,
      pass: x.allListedMs <= 30_000 && x.missing === 0 && x.connectFailures === 0,
    });
  }
  if (p.api) {
    const a = p.api;
    bars.push({
      // Issue 23 names the command: what a user at a terminal waits for, node's start included.
      text: `pgx status (the command, node's start included), GET /v1/status and GET /v1/databases answer in <= 200 ms with ${n} databases${at}`,
      measured: `${a.cliStatusMs} ms, ${a.statusMs} ms and ${a.listMs} ms (${a.listItems} items in the answer, ${kb(a.listBytes)}${a.listAllMs !== undefined ? `; every page in turn ${a.listAllMs} ms` : ''})`,
      pass: a.cliStatusMs <= 200 && a.statusMs <= 200 && a.listMs <= 200,
    });
  }
  return bars;
}

export const main = benchMain<Options, Body>({
  name: 'density',
  help: HELP,
  options: ['count', 'databases', 'idle-seconds', 'vacuum-wait', 'baseline', 'reflink', 'image-gb', 'mint-samples', 'disk-sample'],
  parse: (v, quick) => {
    const yesNo = (name: string, fallback: boolean): boolean => {
      const raw = v[name];
      if (raw === undefined) return fallback;
      if (raw !== 'yes' && raw !== 'no') throw new Error(`--${name} ${String(raw)}: expected yes or no`);
      return raw === 'yes';
    };
    if (v.count !== undefined && v.databases !== undefined && v.count !== v.databases) throw new Error('--count and --databases are the same option: give one');
    const databases = intOption(v, v.count !== undefined ? 'count' : 'databases', quick ? 100 : 1000, 1);
    const baseline = yesNo('baseline', databases <= 1000);
    return {
      databases,
      idleSeconds: intOption(v, 'idle-seconds', quick ? 20 : 180, 1),
      vacuumWaitSeconds: intOption(v, 'vacuum-wait', quick ? 0 : 150),
      baseline,
      afterBackendTimeout: !quick,
      reflink: yesNo('reflink', databases > 1000),
      imageGb: intOption(v, 'image-gb', 4 + Math.ceil(databases / 1000) * (baseline ? 9 : 1), 1),
      mintSamples: intOption(v, 'mint-samples', quick ? 10 : 30),
      diskSample: intOption(v, 'disk-sample', 20),
      // The smoke run checks that the benchmark works; at rest or not does not matter there.
      settleSeconds: quick ? 5 : SETTLE_SECONDS,
    };
  },
  // Published at two scales: 1,000 (the density section) and 10,000 (density-10000); other counts are trials.
  partial: (o) => !PUBLISHED_SCALES.includes(o.databases),
  variant: (o) => (o.databases === 1000 ? null : String(o.databases)),
  measure,
  render,
});
