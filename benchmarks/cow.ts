// The copy-on-write benchmark: what a branch of a large template costs on a filesystem that clones
// (XFS with reflink, in a loop-mounted image), in time and in new physical storage, against a full
// copy of the same template in the same run.
//
// Per template size (1, 2, 5, 10 GB by default), on one runtime data directory in the image:
//   build      one table of wide rows (INSERT ... SELECT generate_series, one transaction), VACUUM
//              (FREEZE), then SELECT pgx_seal_template(...) through the engine: the runtime's own seal,
//              which picks FILE_COPY with file_copy_method = clone
//   cold       --pool-size 0: connect through the engine to a fresh tdb_<template>__<token>; the timer
//              runs to the answer of the first SELECT 1; each branch's new storage is the used-space
//              delta (CHECKPOINT, sync, statfs; WAL excluded, as test/runtime/copy-on-write.test.ts)
//   updates    1,000 rows of one branch updated, each in a different heap block, spread over the table
//   profile    where a cold branch's milliseconds go: a CHECKPOINT alone, CREATE DATABASE directly on
//              PostgreSQL with its copy_file_range calls traced (perf), first and later connects, and
//              cp --reflink of the template's directory
//   full copy  CREATE DATABASE ... STRATEGY FILE_COPY with file_copy_method = copy, and WAL_LOG (the
//              default), then connect + SELECT 1; storage after; dropped before the next
//   warm       the runtime restarted with the default --pool-size auto (8 spares where files clone):
//              the same connect claims a spare
// Then (--neighbour yes), on the largest template: a neighbour database minted from a pgbench template
// runs pgbench -N at a fixed rate while branches are minted back to back in some windows and nothing
// in others; the neighbour's latency in each.

import { existsSync, mkdirSync, readFileSync, readdirSync, statSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { PgxError } from '../src/errors.js';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { runChecked, runCommand } from './lib/exec.js';
import { fileExtents, filesIn, type FileExtents } from './lib/file-extents.js';
import { ioCounters, ioDelta, type IoCounters } from './lib/io-counters.js';
import { freeBytes, makeXfsImage, syncFs, usedBytes, type LoopImage } from './lib/loop-image.js';
import { monotonicMs, traceSyscall } from './lib/perf-syscalls.js';
import { newClient, quoteIdent, timeFirstQuery, withClient, type Endpoint } from './lib/pg-connect.js';
import { readPgbenchLogs, type Transaction } from './lib/pgbench-log.js';
import { startRuntimeProcess, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { median, percentile } from './lib/stats.js';
import { panelGrid, type Panel } from './lib/svg-chart.js';
import { formatTable, markdownTable } from './lib/table.js';

const HELP = `Usage: npm run bench -- cow [options]

Branches of 1-10 GB templates on an XFS reflink image (loop-mounted; needs root): time to the first
SELECT 1 and new physical storage, cold (--pool-size 0) and warm (a pool spare), after 1,000 scattered
updates, against full copies (FILE_COPY with file_copy_method = copy, and WAL_LOG) of the same
template; where a cold branch's time goes; and a neighbour's write latency while branches are minted.

Options:
  --sizes LIST          template sizes in GB (2^30 bytes), comma-separated             [1,2,5,10]
  --branches N          branches per size and path (cold, warm)                         [5]
  --copies N            full copies per size and strategy                               [1]
  --wal-log yes|no      also a WAL_LOG full copy                                        [yes]
  --warm yes|no         also the warm path (runtime restarted with the default pool)    [yes]
  --neighbour yes|no    the neighbour write-latency part, on the largest template       [yes]
  --neighbour-rate N    the neighbour's pgbench -N rate, transactions per second        [100]
  --neighbour-windows N rounds of windows: quiet, checkpoints, clones, after            [3]
  --window-seconds S    length of each window                                           [20]
  --dir DIR             where the image file and its mount point go                     [${os.tmpdir()}]
  --keep-image yes|no   keep the image file afterwards (it is always unmounted)          [no]
  --quick               smoke run: one 0.25 GB template, 2 branches, short windows; docs untouched
  --report FILE         redraw the tables, docs section and chart from a results JSON
  -h, --help            this help
`;

const GB = 2 ** 30;
const MB = 2 ** 20;
/** Rows are ~1.15 KB (int + 1,120 characters): 7 to an 8 KB heap page, plus ~22 bytes of primary key. */
const PAD_REPEAT = 35;
const BYTES_PER_ROW = 8192 / 7 + 22.3;
const UPDATED_ROWS = 1000;
/** Keep minted branches until the benchmark drops them (the janitor's default drops after 15 s idle). */
const GRACE_S = '86400';
/** The runtime's default, which on this XFS image means 8 spares per template. */
const WARM_POOL = 'auto';
const NEIGHBOUR_TEMPLATE = 'tpl_neighbour';
const NEIGHBOUR_SCALE = 10;
const NEIGHBOUR_CLIENTS = 4;
const PROFILE_SAMPLES = 5;

interface Options {
  sizes: number[];
  branches: number;
  copies: number;
  walLog: boolean;
  warm: boolean;
  neighbour: boolean;
  neighbourRate: number;
  neighbourWindows: number;
  windowSeconds: number;
  dir: string;
  keepImage: boolean;
}

interface TemplateInfo {
  name: string;
  gb: number;
  rows: number;
  /** pg_database_size after the seal. */
  bytes: number;
  heapBytes: number;
  indexBytes: number;
  files: number;
  /** FIEMAP extents over the template's files, and of its largest file. */
  extents: number;
  largestFileExtents: number;
  fillSeconds: number;
  vacuumSeconds: number;
  sealSeconds: number;
  strategy: string;
  /** Whether the sealed template's directory holds a relation cache init file for its clones to inherit. */
  initFile: boolean;
}

interface BranchSample {
  name: string;
  /** Connect through the engine to the first SELECT 1 answer. */
  readyMs: number;
  /** The runtime's own mint latency for it (its counters): queue, claim or CREATE DATABASE, record. */
  mintMs: number;
  /** Used-space delta, WAL excluded. */
  newBytes: number;
  /** The same once XFS's speculative preallocations are trimmed. */
  newBytesTrimmed: number;
  walBytes: number;
  /** A second connect + SELECT 1 through the engine to the same database, after the measurement. */
  againMs: number;
}

interface OwnFile {
  file: string;
  relation: string;
  ownBytes: number;
}

interface BranchFiles {
  database: string;
  files: number;
  ownBytes: number;
  sharedBytes: number;
  top: OwnFile[];
}

interface Updates {
  database: string;
  rows: number;
  heapBlocks: number;
  ms: number;
  newBytes: number;
  newBytesTrimmed: number;
  /** Unshared bytes in the branch's directory, before and after (filefrag). */
  ownBefore: number;
  ownAfter: number;
  walBytes: number;
}

interface FullCopy {
  strategy: 'FILE_COPY (file_copy_method = copy)' | 'WAL_LOG';
  createMs: number;
  connectMs: number;
  /** createMs + connectMs: what a client waits for a usable copy. */
  readyMs: number;
  /** fsync is off: the copy's data is written back after CREATE DATABASE returns; this is how long that took. */
  syncMs: number;
  newBytes: number;
  newBytesTrimmed: number;
  walBytes: number;
}

interface DirectCreate {
  createMs: number;
  firstConnectMs: number;
  secondConnectMs: number;
  checkpoints: number;
  buffersWritten: number;
  ckptWriteMs: number;
  ckptSyncMs: number;
  /** XFS transactions committed while it ran (the filesystem's counters; nothing else writes then). */
  xfsTransactions: number;
}

interface TracedCreate {
  createMs: number;
  /** From sending CREATE DATABASE to the first copy_file_range: the first checkpoint and catalog work. */
  beforeCloneMs: number;
  /** First copy_file_range entered to last one returned. */
  cloneMs: number;
  /** Sum of the copy_file_range calls' own durations. */
  callsMs: number;
  calls: number;
  /** Calls that returned 0: one per file. */
  files: number;
  /** Bytes cloned, and the largest one call cloned (PostgreSQL 18 asks for 1 MB a call). */
  bytes: number;
  maxCallBytes: number;
  /** Last copy_file_range returned to the CREATE DATABASE answer: WAL record, second checkpoint, commit. */
  afterCloneMs: number;
}

interface Profile {
  checkpointMs: number[];
  direct: DirectCreate[];
  /** First connect + SELECT 1 to a fresh clone after its files under 16 MB were read into the page cache. */
  cachedFirstConnectMs: number[];
  /**
   * First connect + SELECT 1 to a clone of a database that has a relation cache init file (a branch
   * that has had a session), and whether the clone got the file: what sealing a template with the
   * file in place would give every branch.
   */
  initFileFirstConnectMs: number[];
  initFileInherited: boolean | null;
  traced: TracedCreate[];
  tracedError: string | null;
  cpReflinkMs: number[];
  cpReflinkTransactions: number[];
}

interface SizeResult {
  template: TemplateInfo;
  /** The machine's 1-minute load average when this size started (the machine is shared). */
  loadAverage: number;
  cold: BranchSample[];
  warm: BranchSample[];
  /** The runtime's mint counters over the warm samples: every one should be warm. */
  warmMints: { warm: number; cold: number };
  branchFiles: BranchFiles | null;
  updates: Updates | null;
  profile: Profile;
  fullCopies: FullCopy[];
  skipped: string[];
}

interface LatencyStats {
  n: number;
  tps: number;
  p50: number;
  p90: number;
  p99: number;
  max: number;
}

/**
 * Each round, in this order: quiet (nothing but the neighbour), checkpoints (CHECKPOINT alone, two per
 * cold branch at the quiet branch rate: what the clones' FILE_COPY checkpoints would be without the
 * cloning), clones (cold branches minted back to back), after (quiet again, right after the clones).
 */
const WINDOW_KINDS = ['quiet', 'checkpoints', 'clones', 'after'] as const;
type WindowKind = (typeof WINDOW_KINDS)[number];

interface NeighbourWindow extends IoCounters {
  kind: WindowKind;
  startMs: number;
  endMs: number;
  checkpoints: number;
  buffersWritten: number;
}

interface WindowSummary extends IoCounters {
  seconds: number;
  checkpoints: number;
  buffersWritten: number;
  /** The neighbour through the engine, and the control one directly on PostgreSQL's socket. */
  engine: LatencyStats;
  direct: LatencyStats;
}

interface NeighbourResult {
  template: string;
  branchTemplate: string;
  pgbench: { engine: string; direct: string };
  checkpointEveryMs: number;
  windows: NeighbourWindow[];
  byKind: Record<WindowKind, WindowSummary>;
  clones: { startMs: number; endMs: number; readyMs: number }[];
  /** Engine neighbour transactions overlapping a branch being minted. */
  overlapping: LatencyStats;
  transactions: { engine: number; direct: number };
  failedClones: number;
}

interface Body {
  options: Options;
  postgresVersion: string;
  image: { bytes: number; directIo: boolean; xfsInfo: string; dir: string };
  storage: { filesystem: string; clone: boolean; detail: string };
  runtimeFlags: { cold: string[]; warm: string[] };
  sizes: SizeResult[];
  neighbour: NeighbourResult | null;
}

// ---------------------------------------------------------------------------------------------------

const mbs = (b: number): string => (b / MB).toFixed(1);
const epochMs = (): number => performance.timeOrigin + performance.now();

function templateName(gb: number): string {
  return Number.isInteger(gb) ? `tpl_cow_${gb}g` : `tpl_cow_${Math.round(gb * 1024)}m`;
}

/** The runtime's mint latency per mint, from the mean it reports over the mints of this process. */
class MintClock {
  private n = 0;
  private sum = 0;
  constructor(private readonly rt: RuntimeProcess) {}
  async next(): Promise<number> {
    const mean = (await this.rt.api.status()).mints.latency_ms.mean;
    this.n++;
    const sum = mean * this.n;
    const ms = sum - this.sum;
    this.sum = sum;
    return Math.round(ms * 100) / 100;
  }
}

class Bench {
  rt!: RuntimeProcess;
  admin!: pg.Client;
  mints!: MintClock;
  postgresVersion = '';
  storage = { filesystem: '', clone: false, detail: '' };
  flags: { cold: string[]; warm: string[] } = { cold: [], warm: [] };
  private seq = 0;

  constructor(
    readonly opts: Options,
    readonly img: LoopImage,
    readonly cleanup: Cleanup,
    readonly workDir: string,
  ) {}

  get dataDir(): string {
    return path.join(this.img.mountPoint, 'data');
  }

  async start(poolSize: number | 'auto'): Promise<void> {
    progress(`starting the runtime on the XFS image, --pool-size ${poolSize}`);
    this.rt = await startRuntimeProcess({ workDir: this.img.mountPoint, flags: ['--pool-size', String(poolSize), '--grace', GRACE_S] }, this.cleanup);
    if (poolSize === 0) this.flags.cold = this.rt.flags;
    else this.flags.warm = this.rt.flags;
    const admin = newClient(this.rt.postgres, 'postgres');
    admin.on('error', () => undefined);
    await admin.connect();
    this.admin = admin;
    this.cleanup.add('admin session', () => admin.end().catch(() => undefined));
    this.mints = new MintClock(this.rt);
    const status = await this.rt.api.status();
    this.postgresVersion = status.runtime.postgres_version;
    this.storage = { ...status.storage };
    if (!status.storage.clone) throw new PgxError('INTERNAL', `the runtime finds it cannot clone on the XFS image: ${status.storage.detail}`);
  }

  async stop(): Promise<void> {
    await this.admin.end().catch(() => undefined);
    await this.rt.stop();
  }

  async q<T = Record<string, unknown>>(sql: string): Promise<T[]> {
    return (await this.admin.query(sql)).rows as T[];
  }

  walDirBytes(): number {
    const wal = path.join(this.dataDir, 'pg_wal');
    let bytes = 0;
    for (const f of readdirSync(wal)) {
      const st = statSync(path.join(wal, f));
      if (st.isFile()) bytes += st.blocks * 512;
    }
    return bytes;
  }

  /** Used bytes once PostgreSQL has written its dirty buffers and the kernel its pages, WAL excluded. */
  async settled(): Promise<number> {
    await this.admin.query('CHECKPOINT');
    await syncFs(this.img.mountPoint);
    return (await usedBytes(this.img.mountPoint)) - this.walDirBytes();
  }

  /**
   * settled(), then without XFS's speculative preallocations: blocks reserved past the end of files
   * being extended, and copy-on-write fork reservations (cowextsize) around blocks being unshared.
   * XFS trims them itself (on close, or by its background worker after
   * fs.xfs.speculative_prealloc_lifetime, 300 s); xfs_spaceman does it now.
   */
  async trimmed(): Promise<number> {
    await this.settled();
    await runChecked('xfs_spaceman', ['-c', 'prealloc -s', this.img.mountPoint], { env: process.env });
    await syncFs(this.img.mountPoint);
    return (await usedBytes(this.img.mountPoint)) - this.walDirBytes();
  }

  async walLsn(): Promise<string> {
    return String((await this.q<{ lsn: string }>('SELECT pg_current_wal_insert_lsn()::text AS lsn'))[0]!.lsn);
  }

  async walSince(lsn: string): Promise<number> {
    return Number((await this.q<{ b: string }>(`SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '${lsn}')::int8 AS b`))[0]!.b);
  }

  async oid(database: string): Promise<string> {
    const rows = await this.q<{ oid: string }>(`SELECT oid::text AS oid FROM pg_database WHERE datname = '${database}'`);
    if (!rows[0]) throw new PgxError('INTERNAL', `no database ${database}`);
    return rows[0].oid;
  }

  async dbDir(database: string): Promise<string> {
    return path.join(this.dataDir, 'base', await this.oid(database));
  }

  /** Waits (up to 60 s) for the space of something dropped to come back: XFS frees unlinked files in the background. */
  async spaceBack(target: number, slack = 64 * MB): Promise<number> {
    let used = await this.trimmed();
    for (let i = 0; i < 60 && used > target + slack; i++) {
      await sleep(1000);
      used = await this.trimmed();
    }
    return used;
  }

  // --- template ------------------------------------------------------------------------------------

  async buildTemplate(gb: number): Promise<TemplateInfo> {
    const name = templateName(gb);
    const rows = Math.max(10_000, Math.round((gb * GB) / BYTES_PER_ROW));
    progress(`${name}: ${rows.toLocaleString('en-US')} rows of ~1.15 KB (${gb} GB)`);
    await this.admin.query(`CREATE DATABASE ${name}`);
    const mnt = this.img.mountPoint;
    const used0 = await usedBytes(mnt);
    const t0 = performance.now();
    const tick = setInterval(() => {
      void usedBytes(mnt).then((u) => {
        const w = u - used0;
        const s = (performance.now() - t0) / 1000;
        progress(`  ${name}: ${(w / GB).toFixed(2)} GB written of ~${gb} GB, ${s.toFixed(0)} s (${(w / MB / s).toFixed(0)} MB/s)`);
      });
    }, 5000);
    try {
      // One transaction with the CREATE TABLE: with wal_level = minimal (the runtime's profile) the rows
      // and the index skip the WAL. The primary key is built after the rows (a sort, not 9 M inserts).
      await withClient(this.rt.postgres, name, (c) =>
        c.query(
          `SET maintenance_work_mem = '1GB'; BEGIN; ` +
            `CREATE TABLE rows (id int NOT NULL, pad text NOT NULL); ` +
            `INSERT INTO rows SELECT g, repeat(md5(g::text), ${PAD_REPEAT}) FROM generate_series(1, ${rows}) g; ` +
            `ALTER TABLE rows ADD PRIMARY KEY (id); COMMIT`,
        ),
      );
    } finally {
      clearInterval(tick);
    }
    const fillSeconds = (performance.now() - t0) / 1000;
    progress(`  ${name}: filled in ${fillSeconds.toFixed(0)} s; VACUUM (FREEZE)`);
    // Frozen here with progress shown; the seal's own VACUUM (FREEZE, ANALYZE) then finds every page
    // frozen and only analyses.
    const t1 = performance.now();
    const vacuum = withClient(this.rt.postgres, name, (c) => c.query('VACUUM (FREEZE) rows'));
    const vtick = setInterval(() => {
      void this.q<{ s: string; t: string }>(
        `SELECT heap_blks_scanned::int8 AS s, heap_blks_total::int8 AS t FROM pg_stat_progress_vacuum WHERE datname = '${name}'`,
      ).then((r) => {
        if (r[0]) progress(`  ${name}: VACUUM (FREEZE) ${((Number(r[0].s) * 8192) / GB).toFixed(2)} of ${((Number(r[0].t) * 8192) / GB).toFixed(2)} GB scanned`);
      }, () => undefined);
    }, 5000);
    try {
      await vacuum;
    } finally {
      clearInterval(vtick);
    }
    const vacuumSeconds = (performance.now() - t1) / 1000;
    const [sizes] = await withClient(this.rt.postgres, name, async (c) =>
      (await c.query<{ heap: string; index: string }>("SELECT pg_table_size('rows')::int8 AS heap, pg_indexes_size('rows')::int8 AS index")).rows,
    );
    progress(`  ${name}: frozen in ${vacuumSeconds.toFixed(0)} s; SELECT pgx_seal_template('${name}') through the engine`);
    const t2 = performance.now();
    await withClient(this.rt.engine, 'postgres', (c) => c.query(`SELECT pgx_seal_template('${name}')`));
    const sealSeconds = (performance.now() - t2) / 1000;
    const record = (await this.rt.api.listTemplates()).find((t) => t.name === name);
    const bytes = Number((await this.q<{ b: string }>(`SELECT pg_database_size('${name}')::int8 AS b`))[0]!.b);
    await this.settled();
    const tplDir = await this.dbDir(name);
    const ext = await fileExtents(filesIn(tplDir));
    const largest = ext.reduce((a, b) => (b.size > a.size ? b : a), ext[0]!);
    const info: TemplateInfo = {
      name,
      gb,
      rows,
      bytes,
      heapBytes: Number(sizes!.heap),
      indexBytes: Number(sizes!.index),
      files: ext.length,
      extents: ext.reduce((s, e) => s + e.extents, 0),
      largestFileExtents: largest.extents,
      fillSeconds: Math.round(fillSeconds),
      vacuumSeconds: Math.round(vacuumSeconds),
      sealSeconds: Math.round(sealSeconds * 10) / 10,
      strategy: String((record as { strategy?: unknown } | undefined)?.strategy ?? 'unknown'),
      initFile: existsSync(path.join(tplDir, 'pg_internal.init')),
    };
    progress(
      `  ${name}: sealed in ${info.sealSeconds} s, strategy ${info.strategy}; ${(bytes / GB).toFixed(2)} GB on disk ` +
        `(heap ${(info.heapBytes / GB).toFixed(2)}, index ${(info.indexBytes / MB).toFixed(0)} MB), ${info.files} files, ${info.extents} extents`,
    );
    if (info.strategy !== 'FILE_COPY') throw new PgxError('INTERNAL', `${name} was sealed with ${info.strategy}, not FILE_COPY: the runtime does not clone here`);
    return info;
  }

  async dropTemplate(name: string): Promise<void> {
    await this.rt.api.unseal(name);
    // Its spares are stale now; the janitor drops them within seconds.
    for (let i = 0; i < 120 && (await this.rt.api.status()).databases.spares > 0; i++) await sleep(500);
    await this.admin.query(`DROP DATABASE ${quoteIdent(name)} WITH (FORCE)`);
  }

  // --- branches ------------------------------------------------------------------------------------

  async branch(tpl: string, kind: 'cold' | 'warm', label: string): Promise<BranchSample> {
    const name = `tdb_${tpl}__${label}`;
    const before = await this.trimmed();
    const lsn = await this.walLsn();
    const readyMs = await timeFirstQuery(this.rt.engine, name);
    const mintMs = await this.mints.next();
    // Warm: the claim starts a refill, a new spare cloned from the template; the branch's storage is that.
    if (kind === 'warm') await waitForPool(this.rt, 600_000);
    const walBytes = await this.walSince(lsn);
    const after = await this.settled();
    const afterTrimmed = await this.trimmed();
    const againMs = await timeFirstQuery(this.rt.engine, name);
    return { name, readyMs: round1(readyMs), mintMs, newBytes: after - before, newBytesTrimmed: afterTrimmed - before, walBytes, againMs: round1(againMs) };
  }

  async branches(tpl: string, kind: 'cold' | 'warm'): Promise<BranchSample[]> {
    const out: BranchSample[] = [];
    for (let i = 1; i <= this.opts.branches; i++) {
      if (kind === 'warm') await waitForPool(this.rt, 600_000);
      const s = await this.branch(tpl, kind, `${kind}${i}`);
      out.push(s);
      progress(`  ${kind} branch ${i}/${this.opts.branches}: ready ${s.readyMs.toFixed(1)} ms (runtime mint ${s.mintMs.toFixed(1)} ms), new storage ${mbs(s.newBytes)} MB`);
    }
    return out;
  }

  /** What a branch owns on disk (blocks not shared with its template), by file. */
  async branchFiles(database: string): Promise<BranchFiles> {
    const ext = await fileExtents(filesIn(await this.dbDir(database)));
    const own = ext.filter((e) => e.ownBytes > 0).sort((a, b) => b.ownBytes - a.ownBytes);
    const top = await this.nameFiles(database, own.slice(0, 8));
    return {
      database,
      files: ext.length,
      ownBytes: ext.reduce((s, e) => s + e.ownBytes, 0),
      sharedBytes: ext.reduce((s, e) => s + e.sharedBytes, 0),
      top,
    };
  }

  /** Relation names for relation files (base/<db>/<filenode>[_fsm|_vm][.N]). */
  private async nameFiles(database: string, files: FileExtents[]): Promise<OwnFile[]> {
    const nodes = files.map((f) => /^(\d+)/.exec(path.basename(f.file))?.[1]).filter((x): x is string => x !== undefined);
    const names = new Map<string, string>();
    if (nodes.length > 0) {
      const rows = await withClient(this.rt.postgres, database, async (c) =>
        (await c.query<{ node: string; rel: string }>(
          `SELECT pg_relation_filenode(oid)::text AS node, relname AS rel FROM pg_class WHERE pg_relation_filenode(oid) IN (${nodes.join(',')})`,
        )).rows,
      );
      for (const r of rows) names.set(r.node, r.rel);
    }
    return files.map((f) => {
      const base = path.basename(f.file);
      const m = /^(\d+)(_\w+)?(\.\d+)?$/.exec(base);
      const relation = m ? `${names.get(m[1]!) ?? '?'}${m[2] ?? ''}${m[3] ?? ''}` : base;
      return { file: base, relation, ownBytes: f.ownBytes };
    });
  }

  async updates(database: string, rows: number): Promise<Updates> {
    const dir = await this.dbDir(database);
    const own = async (): Promise<number> => (await fileExtents(filesIn(dir))).reduce((s, e) => s + e.ownBytes, 0);
    const ids = Array.from({ length: UPDATED_ROWS }, (_, i) => 1 + Math.floor(((i + 0.5) * rows) / UPDATED_ROWS));
    const list = ids.join(',');
    const before = await this.trimmed();
    const ownBefore = await own();
    const lsn = await this.walLsn();
    const { ms, heapBlocks } = await withClient(this.rt.engine, database, async (c) => {
      const blocks = await c.query<{ n: number }>(`SELECT count(DISTINCT (ctid::text::point)[0])::int AS n FROM rows WHERE id IN (${list})`);
      const t = performance.now();
      const r = await c.query(`UPDATE rows SET pad = repeat('u', ${PAD_REPEAT * 32}) WHERE id IN (${list})`);
      if (r.rowCount !== UPDATED_ROWS) throw new PgxError('INTERNAL', `updated ${r.rowCount} rows, expected ${UPDATED_ROWS}`);
      return { ms: performance.now() - t, heapBlocks: blocks.rows[0]!.n };
    });
    const walBytes = await this.walSince(lsn);
    const after = await this.settled();
    const afterTrimmed = await this.trimmed();
    return { database, rows: UPDATED_ROWS, heapBlocks, ms: Math.round(ms), newBytes: after - before, newBytesTrimmed: afterTrimmed - before, ownBefore, ownAfter: await own(), walBytes };
  }

  // --- profile -------------------------------------------------------------------------------------

  async profile(tpl: string, branch: string): Promise<Profile> {
    const made: string[] = [];
    const checkpointMs: number[] = [];
    await this.settled();
    for (let i = 0; i < 5; i++) {
      const t = performance.now();
      await this.admin.query('CHECKPOINT');
      checkpointMs.push(Math.round((performance.now() - t) * 100) / 100);
    }
    const direct: DirectCreate[] = [];
    for (let i = 0; i < PROFILE_SAMPLES; i++) {
      const name = `cow_direct_${++this.seq}`;
      await this.settled();
      const ck0 = await this.checkpointer();
      let io0 = ioCounters(this.img.device);
      const createMs = await withClient(this.rt.postgres, 'postgres', async (c) => {
        await c.query('SET file_copy_method = clone');
        io0 = ioCounters(this.img.device);
        const t = performance.now();
        await c.query(`CREATE DATABASE ${name} TEMPLATE ${tpl} STRATEGY FILE_COPY`);
        return performance.now() - t;
      });
      const io = ioDelta(io0, ioCounters(this.img.device));
      made.push(name);
      const ck1 = await this.checkpointer();
      const firstConnectMs = await timeFirstQuery(this.rt.postgres, name);
      const secondConnectMs = await timeFirstQuery(this.rt.postgres, name);
      direct.push({
        createMs: round1(createMs),
        firstConnectMs: round1(firstConnectMs),
        secondConnectMs: round1(secondConnectMs),
        checkpoints: ck1.done - ck0.done,
        buffersWritten: ck1.buffers - ck0.buffers,
        ckptWriteMs: ck1.writeMs - ck0.writeMs,
        ckptSyncMs: ck1.syncMs - ck0.syncMs,
        xfsTransactions: io.xfsTransactions,
      });
    }
    // The same first connect once the clone's catalog files are in the page cache: a clone is a new
    // inode, so none of its template's cached pages count for it.
    const cachedFirstConnectMs: number[] = [];
    for (let i = 0; i < PROFILE_SAMPLES; i++) {
      const name = `cow_cached_${++this.seq}`;
      await this.settled();
      await withClient(this.rt.postgres, 'postgres', async (c) => {
        await c.query('SET file_copy_method = clone');
        await c.query(`CREATE DATABASE ${name} TEMPLATE ${tpl} STRATEGY FILE_COPY`);
      });
      made.push(name);
      for (const f of filesIn(await this.dbDir(name))) if (statSync(f).size < 16 * MB) readFileSync(f);
      cachedFirstConnectMs.push(round1(await timeFirstQuery(this.rt.postgres, name)));
    }
    const initFileFirstConnectMs: number[] = [];
    let initFileInherited: boolean | null = null;
    for (let i = 0; i < PROFILE_SAMPLES; i++) {
      const name = `cow_init_${++this.seq}`;
      await this.settled();
      await withClient(this.rt.postgres, 'postgres', async (c) => {
        // The engine keeps idle backends on the branch; CREATE DATABASE needs its source alone.
        await c.query(`SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE datname = '${branch}'`);
        await c.query('SET file_copy_method = clone');
        await c.query(`CREATE DATABASE ${name} TEMPLATE ${branch} STRATEGY FILE_COPY`);
      });
      made.push(name);
      initFileInherited = existsSync(path.join(await this.dbDir(name), 'pg_internal.init'));
      initFileFirstConnectMs.push(round1(await timeFirstQuery(this.rt.postgres, name)));
    }
    const traced: TracedCreate[] = [];
    let tracedError: string | null = null;
    for (let i = 0; i < PROFILE_SAMPLES; i++) {
      const name = `cow_traced_${++this.seq}`;
      await this.settled();
      try {
        traced.push(await this.tracedCreate(tpl, name));
      } catch (err) {
        // Kept, and the next sample tried: on a loaded machine perf is sometimes not attached in time.
        tracedError = (err as Error).message.slice(0, 300);
        progress(`  perf trace ${i + 1} failed: ${tracedError}`);
      }
      made.push(name);
    }
    const cpReflinkMs: number[] = [];
    const cpReflinkTransactions: number[] = [];
    const src = await this.dbDir(tpl);
    for (let i = 0; i < PROFILE_SAMPLES; i++) {
      const dest = path.join(this.img.mountPoint, `reflink-copy-${++this.seq}`);
      await this.settled();
      const io0 = ioCounters(this.img.device);
      const r = await runChecked('cp', ['-a', '--reflink=always', src, dest], { env: process.env });
      cpReflinkTransactions.push(ioDelta(io0, ioCounters(this.img.device)).xfsTransactions);
      cpReflinkMs.push(Math.round(r.ms * 10) / 10);
      await runChecked('rm', ['-rf', dest], { env: process.env });
    }
    for (const name of made) await this.admin.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
    const p: Profile = { checkpointMs, direct, cachedFirstConnectMs, initFileFirstConnectMs, initFileInherited, traced, tracedError, cpReflinkMs, cpReflinkTransactions };
    progress(
      `  profile: CHECKPOINT alone ${median(checkpointMs).toFixed(1)} ms; CREATE DATABASE (clone) directly ${median(direct.map((d) => d.createMs)).toFixed(1)} ms` +
        (traced.length > 0
          ? ` = before clone ${median(traced.map((t) => t.beforeCloneMs)).toFixed(1)} + cloning ${median(traced.map((t) => t.cloneMs)).toFixed(1)} (${traced[0]!.files} files) + after ${median(traced.map((t) => t.afterCloneMs)).toFixed(1)} ms (traced)`
          : '') +
        `; first connect ${median(direct.map((d) => d.firstConnectMs)).toFixed(1)} ms (catalog files cached: ${median(cachedFirstConnectMs).toFixed(1)} ms; cloned with an init file: ${median(initFileFirstConnectMs).toFixed(1)} ms), later ${median(direct.map((d) => d.secondConnectMs)).toFixed(1)} ms; cp --reflink ${median(cpReflinkMs).toFixed(1)} ms`,
    );
    return p;
  }

  private async checkpointer(): Promise<{ done: number; buffers: number; writeMs: number; syncMs: number }> {
    const r = (
      await this.q<{ done: string; buffers: string; w: number; s: number }>(
        'SELECT num_done::int8 AS done, buffers_written::int8 AS buffers, write_time AS w, sync_time AS s FROM pg_stat_checkpointer',
      )
    )[0]!;
    return { done: Number(r.done), buffers: Number(r.buffers), writeMs: Number(r.w), syncMs: Number(r.s) };
  }

  /** CREATE DATABASE with its backend's copy_file_range calls recorded by perf, on the same clock. */
  private async tracedCreate(tpl: string, name: string): Promise<TracedCreate> {
    return withClient(this.rt.postgres, 'postgres', async (c) => {
      await c.query('SET file_copy_method = clone');
      const pid = Number((await c.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
      const trace = await traceSyscall(pid, 'copy_file_range', path.join(this.workDir, `perf-${name}.data`));
      const t0 = monotonicMs();
      const created = c.query(`CREATE DATABASE ${name} TEMPLATE ${tpl} STRATEGY FILE_COPY`).then(() => monotonicMs());
      // Stop the recording whether or not the CREATE succeeded; then report its outcome.
      const t1 = await created.catch(async (err: unknown) => {
        await trace.stop();
        throw err;
      });
      const calls = await trace.stop();
      if (calls.length === 0) throw new Error('perf recorded no copy_file_range calls');
      const first = calls[0]!;
      const last = calls.at(-1)!;
      return {
        createMs: round1(t1 - t0),
        beforeCloneMs: round1(first.enterMs - t0),
        cloneMs: round1(last.exitMs - first.enterMs),
        callsMs: round1(calls.reduce((s, x) => s + (x.exitMs - x.enterMs), 0)),
        calls: calls.length,
        files: calls.filter((x) => x.result === 0).length,
        bytes: calls.reduce((s, x) => s + Math.max(0, x.result), 0),
        maxCallBytes: calls.reduce((m, x) => Math.max(m, x.result), 0),
        afterCloneMs: round1(t1 - last.exitMs),
      };
    });
  }

  // --- full copies ---------------------------------------------------------------------------------

  async fullCopies(tpl: TemplateInfo, skipped: string[]): Promise<FullCopy[]> {
    const out: FullCopy[] = [];
    const strategies: FullCopy['strategy'][] = ['FILE_COPY (file_copy_method = copy)', ...(this.opts.walLog ? (['WAL_LOG'] as const) : [])];
    for (const strategy of strategies) {
      for (let i = 0; i < this.opts.copies; i++) {
        const free = await freeBytes(this.img.mountPoint);
        if (free < tpl.bytes * 1.1 + GB) {
          const why = `${strategy} copy of ${tpl.name} skipped: ${(free / GB).toFixed(1)} GB free on the image`;
          skipped.push(why);
          progress(`  ${why}`);
          continue;
        }
        const name = `cow_full_${++this.seq}`;
        const before = await this.trimmed();
        const lsn = await this.walLsn();
        const sql =
          strategy === 'WAL_LOG'
            ? `CREATE DATABASE ${name} TEMPLATE ${tpl.name} STRATEGY WAL_LOG`
            : `CREATE DATABASE ${name} TEMPLATE ${tpl.name} STRATEGY FILE_COPY`;
        const createMs = await withClient(this.rt.postgres, 'postgres', async (c) => {
          await c.query('SET file_copy_method = copy');
          const t = performance.now();
          await c.query(sql);
          return performance.now() - t;
        });
        const connectMs = await timeFirstQuery(this.rt.engine, name);
        const walBytes = await this.walSince(lsn);
        const t = performance.now();
        await syncFs(this.img.mountPoint);
        const syncMs = performance.now() - t;
        const after = await this.settled();
        const afterTrimmed = await this.trimmed();
        const c: FullCopy = {
          strategy,
          createMs: Math.round(createMs),
          connectMs: round1(connectMs),
          readyMs: Math.round(createMs + connectMs),
          syncMs: Math.round(syncMs),
          newBytes: after - before,
          newBytesTrimmed: afterTrimmed - before,
          walBytes,
        };
        out.push(c);
        progress(`  full copy, ${strategy}: CREATE DATABASE ${(c.createMs / 1000).toFixed(1)} s + connect ${c.connectMs} ms, writeback ${(c.syncMs / 1000).toFixed(1)} s, new storage ${(c.newBytes / GB).toFixed(2)} GB`);
        await this.admin.query(`DROP DATABASE ${name} WITH (FORCE)`);
        await this.spaceBack(before);
      }
    }
    return out;
  }

  // --- neighbour -----------------------------------------------------------------------------------

  async neighbour(branchTemplate: string, coldReadyMs: number): Promise<NeighbourResult> {
    const o = this.opts;
    progress(`neighbour: ${NEIGHBOUR_TEMPLATE} (pgbench -i -s ${NEIGHBOUR_SCALE}), sealed; a neighbour minted from it runs pgbench -N at ${o.neighbourRate} tps through the engine`);
    await this.admin.query(`CREATE DATABASE ${NEIGHBOUR_TEMPLATE}`);
    await runChecked('pgbench', ['-i', '-q', '-s', String(NEIGHBOUR_SCALE)], { env: pgEnv(this.rt.postgres, NEIGHBOUR_TEMPLATE) });
    await withClient(this.rt.engine, 'postgres', (c) => c.query(`SELECT pgx_seal_template('${NEIGHBOUR_TEMPLATE}')`));
    const engineDb = `tdb_${NEIGHBOUR_TEMPLATE}__neighbour`;
    const directDb = `tdb_${NEIGHBOUR_TEMPLATE}__direct`;
    for (const db of [engineDb, directDb]) {
      await timeFirstQuery(this.rt.engine, db);
      await this.mints.next();
    }
    const logDir = path.join(this.workDir, 'pgbench-log');
    mkdirSync(logDir, { recursive: true });
    const warmupS = 10;
    const seconds = warmupS + WINDOW_KINDS.length * o.neighbourWindows * o.windowSeconds + 30;
    const common = ['-n', '-N', '-T', String(seconds), '-l'];
    const engineArgs = [...common, '-c', String(NEIGHBOUR_CLIENTS), '-j', '2', '-R', String(o.neighbourRate)];
    // A second, smaller neighbour straight on PostgreSQL's socket: if it stalls too, the engine is not the cause.
    const directArgs = [...common, '-c', '2', '-j', '1', '-R', String(Math.max(1, Math.round(o.neighbourRate / 3)))];
    const runs = [
      runCommand('pgbench', [...engineArgs, `--log-prefix=${path.join(logDir, 'engine')}`], { env: pgEnv(this.rt.engine, engineDb) }),
      runCommand('pgbench', [...directArgs, `--log-prefix=${path.join(logDir, 'direct')}`], { env: pgEnv(this.rt.postgres, directDb) }),
    ];
    let ended = false;
    void Promise.race(runs).then(() => (ended = true));
    await sleep(warmupS * 1000);
    if (ended) throw new PgxError('INTERNAL', `pgbench ended early: ${(await Promise.race(runs)).stderr.trim().slice(-1500)}`);
    const windows: NeighbourWindow[] = [];
    const clones: NeighbourResult['clones'] = [];
    const names: string[] = [];
    let failedClones = 0;
    // FILE_COPY checkpoints twice per branch; at the quiet cold rate that is one every readyMs / 2.
    const checkpointEveryMs = Math.max(50, coldReadyMs / 2);
    for (let w = 0; w < o.neighbourWindows; w++) {
      for (const kind of WINDOW_KINDS) {
        const ck0 = await this.checkpointer();
        const io0 = ioCounters(this.img.device);
        const startMs = epochMs();
        const end = startMs + o.windowSeconds * 1000;
        if (kind === 'quiet' || kind === 'after') await sleep(o.windowSeconds * 1000);
        else if (kind === 'checkpoints') {
          for (let next = startMs; next < end; next += checkpointEveryMs) {
            if (next > epochMs()) await sleep(next - epochMs());
            await this.admin.query('CHECKPOINT');
          }
        } else {
          while (epochMs() < end) {
            const name = `tdb_${branchTemplate}__nb${++this.seq}`;
            const s = epochMs();
            try {
              const readyMs = await timeFirstQuery(this.rt.engine, name);
              clones.push({ startMs: s, endMs: epochMs(), readyMs: round1(readyMs) });
              names.push(name);
            } catch (err) {
              failedClones++;
              progress(`  clone ${name} failed: ${(err as Error).message}`);
            }
            await this.mints.next().catch(() => 0);
          }
        }
        const endMs = epochMs();
        const io = ioDelta(io0, ioCounters(this.img.device));
        const ck1 = await this.checkpointer();
        windows.push({ kind, startMs, endMs, checkpoints: ck1.done - ck0.done, buffersWritten: ck1.buffers - ck0.buffers, ...io });
        progress(
          `  round ${w + 1}/${o.neighbourWindows} ${kind}: ${((endMs - startMs) / 1000).toFixed(0)} s, ${ck1.done - ck0.done} checkpoints, ` +
            `${io.xfsTransactions} XFS transactions, ${mbs(io.writtenBytes)} MB written${kind === 'clones' ? `, ${clones.length} branches so far` : ''}`,
        );
      }
    }
    const [engineRun, directRun] = await Promise.all(runs);
    for (const [r, args] of [[engineRun!, engineArgs], [directRun!, directArgs]] as const) {
      if (r.code !== 0) throw new PgxError('INTERNAL', `pgbench ${args.join(' ')} failed (exit ${r.code}): ${(r.stderr + r.stdout).trim().slice(-1500)}`);
    }
    const engineTx = readPgbenchLogs(path.join(logDir, 'engine'));
    const directTx = readPgbenchLogs(path.join(logDir, 'direct'));
    progress(`  pgbench: ${engineTx.length} + ${directTx.length} transactions logged; dropping ${names.length} branches`);
    for (const n of names) await this.rt.api.dropDatabase(n);
    for (const db of [engineDb, directDb]) await this.rt.api.dropDatabase(db);
    await this.dropTemplate(NEIGHBOUR_TEMPLATE);
    const inWindows = (txs: Transaction[], kind: WindowKind): Transaction[] =>
      txs.filter((t) => windows.some((w) => w.kind === kind && t.startMs >= w.startMs && t.endMs <= w.endMs));
    const byKind = Object.fromEntries(
      WINDOW_KINDS.map((kind) => {
        const ws = windows.filter((w) => w.kind === kind);
        const secs = ws.reduce((s, w) => s + (w.endMs - w.startMs) / 1000, 0);
        const sum = (k: keyof IoCounters | 'checkpoints' | 'buffersWritten'): number => ws.reduce((s, w) => s + w[k], 0);
        const summary: WindowSummary = {
          seconds: Math.round(secs),
          checkpoints: sum('checkpoints'),
          buffersWritten: sum('buffersWritten'),
          writtenBytes: sum('writtenBytes'),
          busyMs: sum('busyMs'),
          xfsTransactions: sum('xfsTransactions'),
          xfsLogWrites: sum('xfsLogWrites'),
          engine: latencyStats(inWindows(engineTx, kind), secs),
          direct: latencyStats(inWindows(directTx, kind), secs),
        };
        return [kind, summary];
      }),
    ) as Record<WindowKind, WindowSummary>;
    return {
      template: NEIGHBOUR_TEMPLATE,
      branchTemplate,
      pgbench: { engine: `pgbench ${engineArgs.join(' ')}`, direct: `pgbench ${directArgs.join(' ')}` },
      checkpointEveryMs: Math.round(checkpointEveryMs),
      windows,
      byKind,
      clones,
      overlapping: latencyStats(engineTx.filter((t) => clones.some((c) => t.startMs < c.endMs && t.endMs > c.startMs)), NaN),
      transactions: { engine: engineTx.length, direct: directTx.length },
      failedClones,
    };
  }
}

function round1(v: number): number {
  return Math.round(v * 10) / 10;
}

function pgEnv(ep: Endpoint, database: string): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG')) env[k] = v;
  return { ...env, PGHOST: ep.host, PGPORT: String(ep.port), PGUSER: 'postgres', PGDATABASE: database, PGCONNECT_TIMEOUT: '30' };
}

function latencyStats(txs: Transaction[], seconds: number): LatencyStats {
  const l = txs.map((t) => t.latencyMs);
  const r = (v: number): number => Math.round(v * 100) / 100;
  return { n: l.length, tps: seconds > 0 ? r(l.length / seconds) : NaN, p50: r(median(l)), p90: r(percentile(l, 90)), p99: r(percentile(l, 99)), max: r(l.length ? Math.max(...l) : NaN) };
}

function imageBytes(opts: Options): number {
  const largest = Math.max(...opts.sizes);
  // The template, one full copy of it, WAL (max_wal_size 1 GB, and a WAL_LOG copy's checkpoints),
  // branches, the neighbour's pgbench data, and a margin.
  const need = largest * GB * 2.1 + 4 * GB + (opts.neighbour ? GB : 0);
  return Math.ceil((need * 1.1) / GB) * GB;
}

async function measure(opts: Options, { cleanup, workDir }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  const bytes = imageBytes(opts);
  progress(`making a ${bytes / GB} GB XFS image (mkfs.xfs -m reflink=1) in ${opts.dir}, loop-mounted`);
  const img = await makeXfsImage({ dir: opts.dir, bytes, keep: opts.keepImage, roomHint: 'Point --dir at a filesystem with more room, or measure smaller templates (--sizes).' }, cleanup);
  progress(`  ${img.image} on ${img.device} at ${img.mountPoint}${img.directIo ? ' (direct I/O)' : ''}`);
  const b = new Bench(opts, img, cleanup, workDir);
  const sizes: SizeResult[] = [];
  let neighbour: NeighbourResult | null = null;
  const sorted = [...opts.sizes].sort((x, y) => x - y);
  for (const gb of sorted) {
    const last = gb === sorted.at(-1);
    const loadAverage = Math.round(os.loadavg()[0]! * 100) / 100;
    await b.start(0);
    const template = await b.buildTemplate(gb);
    progress(`${template.name}: ${opts.branches} cold branches (--pool-size 0)`);
    const cold = await b.branches(template.name, 'cold');
    const branchFiles = await b.branchFiles(cold[0]!.name);
    progress(`  ${cold[0]!.name} owns ${mbs(branchFiles.ownBytes)} MB of its ${branchFiles.files} files' blocks: ${branchFiles.top.map((f) => `${f.relation} ${mbs(f.ownBytes)}`).join(', ')}`);
    const updates = await b.updates(cold[0]!.name, template.rows);
    progress(`  ${UPDATED_ROWS} rows in ${updates.heapBlocks} heap blocks updated in ${updates.ms} ms: new storage ${mbs(updates.newBytes)} MB (branch's own blocks ${mbs(updates.ownBefore)} -> ${mbs(updates.ownAfter)} MB)`);
    progress(`${template.name}: profile of a cold branch`);
    const profile = await b.profile(template.name, cold[0]!.name);
    progress(`${template.name}: full copies`);
    const skipped: string[] = [];
    const fullCopies = await b.fullCopies(template, skipped);
    for (const s of cold) await b.rt.api.dropDatabase(s.name);
    if (last && opts.neighbour) neighbour = await b.neighbour(template.name, median(cold.map((x) => x.readyMs)));
    let warm: BranchSample[] = [];
    let warmMints = { warm: 0, cold: 0 };
    if (opts.warm) {
      await b.stop();
      await b.start(WARM_POOL);
      progress(`${template.name}: ${opts.branches} warm branches (--pool-size ${WARM_POOL}, the default); waiting for the pool`);
      await waitForPool(b.rt, 600_000);
      const m0 = (await b.rt.api.status()).mints;
      warm = await b.branches(template.name, 'warm');
      const m1 = (await b.rt.api.status()).mints;
      warmMints = { warm: m1.warm - m0.warm, cold: m1.cold - m0.cold };
      for (const s of warm) await b.rt.api.dropDatabase(s.name);
    }
    await b.dropTemplate(template.name);
    await b.stop();
    sizes.push({ template, loadAverage, cold, warm, warmMints, branchFiles, updates, profile, fullCopies, skipped });
  }
  return {
    options: opts,
    postgresVersion: b.postgresVersion,
    image: { bytes, directIo: img.directIo, xfsInfo: img.xfsInfo, dir: opts.dir },
    storage: b.storage,
    runtimeFlags: b.flags,
    sizes,
    neighbour,
  };
}

// --- rendering ---------------------------------------------------------------------------------------

/** The warm runtime's --pool-size as its flags recorded it (2 in runs before the default became auto). */
function warmPoolSize(r: Body): string {
  const flags = r.runtimeFlags.warm;
  const at = flags.indexOf('--pool-size');
  return at >= 0 ? (flags[at + 1] ?? '?') : 'auto';
}

function render(r: Meta & Body) {
  const ms = (v: number): string => (Number.isFinite(v) ? (v >= 100 ? `${v.toFixed(0)} ms` : `${v.toFixed(1)} ms`) : '-');
  const secs = (v: number): string => (Number.isFinite(v) ? `${(v / 1000).toFixed(1)} s` : '-');
  const mb = (b: number): string => (Number.isFinite(b) ? `${mbs(b)} MB` : '-');
  const gbs = (b: number): string => (Number.isFinite(b) ? `${(b / GB).toFixed(2)} GB` : '-');
  const med = (xs: number[]): number => median(xs);
  const label = (s: SizeResult): string => `${s.template.gb} GB`;
  const range = (xs: number[]): string => (xs.length ? `${Math.min(...xs).toFixed(0)}-${Math.max(...xs).toFixed(0)} ms` : '-');

  const branchHeader = ['template', 'on disk', 'cold ready p50', 'cold range', 'runtime mint p50 (cold)', 'warm ready p50', 'warm range', 'new storage p50 (cold)', 'cold, preallocation trimmed', 'new storage p50 (warm)', `after ${UPDATED_ROWS.toLocaleString('en-US')} updates`, 'updates, trimmed'];
  const branchRows = r.sizes.map((s) => [
    label(s),
    gbs(s.template.bytes),
    ms(med(s.cold.map((x) => x.readyMs))),
    range(s.cold.map((x) => x.readyMs)),
    ms(med(s.cold.map((x) => x.mintMs))),
    s.warm.length ? ms(med(s.warm.map((x) => x.readyMs))) : '-',
    range(s.warm.map((x) => x.readyMs)),
    mb(med(s.cold.map((x) => x.newBytes))),
    mb(med(s.cold.map((x) => x.newBytesTrimmed))),
    s.warm.length ? mb(med(s.warm.map((x) => x.newBytes))) : '-',
    s.updates ? `+${mb(s.updates.newBytes)}` : '-',
    s.updates ? `+${mb(s.updates.newBytesTrimmed)}` : '-',
  ]);

  const copyHeader = ['template', 'full copy', 'CREATE DATABASE', 'connect + SELECT 1', 'ready', 'writeback after (sync)', 'new storage', 'WAL written', 'ready / cold branch', 'storage / cold branch'];
  const copyRows = r.sizes.flatMap((s) => {
    const branchReady = med(s.cold.map((x) => x.readyMs));
    const branchBytes = med(s.cold.map((x) => x.newBytes));
    const strategies = [...new Set(s.fullCopies.map((c) => c.strategy))];
    return strategies.map((st) => {
      const cs = s.fullCopies.filter((c) => c.strategy === st);
      const ready = med(cs.map((c) => c.readyMs));
      const bytes = med(cs.map((c) => c.newBytes));
      return [
        label(s),
        st,
        secs(med(cs.map((c) => c.createMs))),
        ms(med(cs.map((c) => c.connectMs))),
        secs(ready),
        secs(med(cs.map((c) => c.syncMs))),
        gbs(bytes),
        mb(med(cs.map((c) => c.walBytes))),
        `${(ready / branchReady).toFixed(0)}x`,
        `${(bytes / Math.max(branchBytes, 4096)).toFixed(0)}x`,
      ];
    });
  });

  // Where a cold branch's time goes: components down, sizes across.
  const prof = (s: SizeResult) => s.profile;
  const profHeader = ['', ...r.sizes.map(label)];
  const pr = (name: string, f: (s: SizeResult) => string): string[] => [name, ...r.sizes.map(f)];
  const tr = (s: SizeResult, k: keyof TracedCreate): number => med(prof(s).traced.map((t) => t[k]));
  const profRows = [
    pr('template files / FIEMAP extents (largest file)', (s) => `${s.template.files} / ${s.template.extents} (${s.template.largestFileExtents})`),
    pr('template has a relation cache init file (pg_internal.init)', (s) => (s.template.initFile ? 'yes' : 'no')),
    pr('branch ready through the engine, cold (p50)', (s) => ms(med(s.cold.map((x) => x.readyMs)))),
    pr('  of which the runtime mint (queue, CREATE DATABASE, record)', (s) => ms(med(s.cold.map((x) => x.mintMs)))),
    pr('  of which the rest (engine, first backend, SELECT 1)', (s) => ms(med(s.cold.map((x) => x.readyMs - x.mintMs)))),
    pr('the same branch again through the engine (an existing database)', (s) => ms(med(s.cold.map((x) => x.againMs)))),
    pr('CREATE DATABASE ... FILE_COPY (clone), directly', (s) => ms(med(prof(s).direct.map((d) => d.createMs)))),
    pr('  checkpoints it ran / buffers they wrote', (s) => `${med(prof(s).direct.map((d) => d.checkpoints))} / ${med(prof(s).direct.map((d) => d.buffersWritten))}`),
    pr('  XFS transactions it took', (s) => (prof(s).direct[0]?.xfsTransactions !== undefined ? med(prof(s).direct.map((d) => d.xfsTransactions)).toLocaleString('en-US') : '-')),
    pr('CREATE DATABASE traced (perf on copy_file_range)', (s) => (prof(s).traced.length ? ms(tr(s, 'createMs')) : '-')),
    pr('  before the first clone call (checkpoint 1, catalog)', (s) => (prof(s).traced.length ? ms(tr(s, 'beforeCloneMs')) : '-')),
    pr('  cloning: first call to last return', (s) => (prof(s).traced.length ? `${ms(tr(s, 'cloneMs'))} (${tr(s, 'files')} files, ${tr(s, 'calls')} calls, ${ms(tr(s, 'callsMs'))} in the calls)` : '-')),
    pr('  bytes per copy_file_range call, at most', (s) => (prof(s).traced.length && prof(s).traced[0]!.maxCallBytes !== undefined ? mb(tr(s, 'maxCallBytes')) : '-')),
    pr('  after the last clone call (WAL, checkpoint 2, commit)', (s) => (prof(s).traced.length ? ms(tr(s, 'afterCloneMs')) : '-')),
    pr('a CHECKPOINT alone, nothing dirty', (s) => ms(med(prof(s).checkpointMs))),
    pr('cp -a --reflink=always of the template directory (FICLONE, whole files)', (s) => ms(med(prof(s).cpReflinkMs))),
    pr('  XFS transactions it took', (s) => (prof(s).cpReflinkTransactions ? med(prof(s).cpReflinkTransactions).toLocaleString('en-US') : '-')),
    pr('first connect + SELECT 1 to the new database, directly', (s) => ms(med(prof(s).direct.map((d) => d.firstConnectMs)))),
    pr('  the same with the clone\'s catalog files read into the page cache first', (s) => ms(med(prof(s).cachedFirstConnectMs ?? []))),
    pr('  the same for a clone of a database that has pg_internal.init', (s) =>
      prof(s).initFileFirstConnectMs ? `${ms(med(prof(s).initFileFirstConnectMs))} (file ${prof(s).initFileInherited ? 'inherited' : 'not inherited'})` : '-',
    ),
    pr('a later connect + SELECT 1, directly', (s) => ms(med(prof(s).direct.map((d) => d.secondConnectMs)))),
  ];

  const ownLines = r.sizes.flatMap((s) =>
    s.branchFiles
      ? [
          `${label(s)}: ${s.branchFiles.database} owns ${mb(s.branchFiles.ownBytes)} of blocks not shared with its template (${s.branchFiles.files} files, ${gbs(s.branchFiles.sharedBytes)} shared); ` +
            `its df delta was ${mb(s.cold[0]!.newBytes)}. Largest own: ${s.branchFiles.top.map((f) => `${f.relation} ${mbs(f.ownBytes)} MB`).join(', ') || 'none'}.` +
            (s.updates
              ? ` After ${UPDATED_ROWS} updates in ${s.updates.heapBlocks} heap blocks (${s.updates.ms} ms): +${mb(s.updates.newBytes)} used, own blocks ${mb(s.updates.ownBefore)} -> ${mb(s.updates.ownAfter)}, WAL ${mb(s.updates.walBytes)}.`
              : ''),
        ]
      : [],
  );

  const largest = r.sizes.reduce<SizeResult | undefined>((a, s) => (!a || s.template.gb > a.template.gb ? s : a), undefined);
  const bars: Bar[] = [];
  if (largest) {
    const note = largest.template.gb === 10 ? '' : ` (the bar is for 10 GB; largest measured here: ${largest.template.gb} GB)`;
    const coldReady = med(largest.cold.map((x) => x.readyMs));
    const coldBytes = med(largest.cold.map((x) => x.newBytes));
    // Issue 23: a cold branch in <= 150 ms (from 300), and as fast for a 10 GB template as for 1 GB.
    bars.push({
      text: `10 GB branch ready <= 150 ms, cold clone (--pool-size 0)${note}`,
      measured: `${ms(coldReady)} p50 of ${largest.cold.length} (range ${range(largest.cold.map((x) => x.readyMs))}; PGX reference 674 ms)`,
      pass: largest.template.gb >= 10 && coldReady <= 150,
    });
    const flat = r.sizes.filter((s) => [1, 5, 10].includes(s.template.gb) && s.cold.length > 0);
    if (flat.length > 1) {
      const p50s = flat.map((s) => med(s.cold.map((x) => x.readyMs)));
      const spread = Math.max(...p50s) / Math.min(...p50s);
      bars.push({
        text: 'cold branch time flat in the template\'s size: 1, 5 and 10 GB p50 within 1.5x of each other',
        measured: `${flat.map((s, i) => `${s.template.gb} GB ${ms(p50s[i]!)}`).join(', ')}: ${spread.toFixed(2)}x${flat.length < 3 ? ' (not every size measured)' : ''}`,
        pass: flat.length === 3 && spread <= 1.5,
      });
    }
    if (largest.warm.length) {
      const warmReady = med(largest.warm.map((x) => x.readyMs));
      bars.push({
        text: `10 GB branch ready <= 300 ms, warm spare (default pool, --pool-size ${warmPoolSize(r)})${note}`,
        measured: `${ms(warmReady)} p50 of ${largest.warm.length} (${largest.warmMints.warm} warm, ${largest.warmMints.cold} cold by the runtime's counters)`,
        pass: largest.template.gb >= 10 && warmReady <= 300,
      });
    }
    bars.push({
      text: `10 GB branch new storage <= 5 MB (cold; df after CHECKPOINT and sync, WAL excluded)${note}`,
      measured: `${mb(coldBytes)} p50 of ${largest.cold.length} (range ${mbs(Math.min(...largest.cold.map((x) => x.newBytes)))}-${mbs(Math.max(...largest.cold.map((x) => x.newBytes)))} MB; PGX reference 13.6 MB)`,
      pass: largest.template.gb >= 10 && coldBytes <= 5 * MB,
    });
  }

  const n = r.neighbour;
  const KIND_LABEL: Record<WindowKind, string> = {
    quiet: 'quiet: nothing but the neighbours',
    checkpoints: 'CHECKPOINT alone, at the cold clones\' rate',
    clones: 'cold branches minted back to back',
    after: 'quiet, right after the clones',
  };
  const nbHeader = ['window (each ~' + r.options.windowSeconds + ' s, x' + r.options.neighbourWindows + ')', 'engine p50', 'engine p90', 'engine p99', 'engine max', 'direct p50', 'direct p99', 'tps (engine)', 'checkpoints', 'XFS transactions/s', 'device writes', 'device busy'];
  const nbRows = n
    ? WINDOW_KINDS.map((k) => {
        const w = n.byKind[k];
        return [
          KIND_LABEL[k],
          ms(w.engine.p50),
          ms(w.engine.p90),
          ms(w.engine.p99),
          ms(w.engine.max),
          ms(w.direct.p50),
          ms(w.direct.p99),
          w.engine.tps.toFixed(1),
          String(w.checkpoints),
          (w.xfsTransactions / Math.max(1, w.seconds)).toFixed(0),
          `${(w.writtenBytes / MB / Math.max(1, w.seconds)).toFixed(1)} MB/s`,
          `${((w.busyMs / 1000 / Math.max(1, w.seconds)) * 100).toFixed(0)} %`,
        ];
      })
    : [];
  const nbLines = n
    ? [
        `${n.clones.length} branches of ${n.branchTemplate} minted in the clone windows (${n.failedClones} failed), ready ${ms(median(n.clones.map((c) => c.readyMs)))} p50, ${ms(percentile(n.clones.map((c) => c.readyMs), 99))} p99 with the neighbours running. ` +
          `Engine neighbour p99 against the quiet windows: ${(n.byKind.checkpoints.engine.p99 / n.byKind.quiet.engine.p99).toFixed(2)}x with the checkpoints alone, ` +
          `${(n.byKind.clones.engine.p99 / n.byKind.quiet.engine.p99).toFixed(2)}x during the clones (${(n.overlapping.p99 / n.byKind.quiet.engine.p99).toFixed(2)}x for transactions overlapping a mint), ` +
          `${(n.byKind.after.engine.p99 / n.byKind.quiet.engine.p99).toFixed(2)}x in the quiet window after them.`,
        `Neighbours: \`${n.pgbench.engine}\` through the engine on \`tdb_${n.template}__neighbour\`, and \`${n.pgbench.direct}\` directly on PostgreSQL's socket on \`tdb_${n.template}__direct\` ` +
          `(both scale ${NEIGHBOUR_SCALE}; ${n.transactions.engine} + ${n.transactions.direct} transactions logged). Latency runs from each transaction's scheduled start (pgbench --rate), so a stall shows as latency. ` +
          `Checkpoint windows: one CHECKPOINT every ${n.checkpointEveryMs} ms. XFS transactions from /sys/fs/xfs/<dev>/stats, device figures from /sys/block/<dev>/stat of the loop device.`,
      ]
    : [];

  const skipped = r.sizes.flatMap((s) => s.skipped);
  const about = [
    `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.postgresVersion}.`,
    `XFS image of ${r.image.bytes / GB} GB (mkfs.xfs -m reflink=1), loop-mounted${r.image.directIo ? ' with direct I/O' : ''} on the host's ${r.image.dir}; the runtime found: "${r.storage.detail}"`,
    `Runtime flags: cold ${r.runtimeFlags.cold.filter((f) => !f.startsWith('/')).join(' ')}; warm ${r.runtimeFlags.warm.filter((f) => !f.startsWith('/')).join(' ') || '-'}. ` +
      `${r.options.branches} branches per size and path, ${r.options.copies} full copy per size and strategy. GB = 2^30 bytes, MB = 2^20.`,
    ...r.sizes.map(
      (s) =>
        `${s.template.name}: ${s.template.rows.toLocaleString('en-US')} rows, heap ${gbs(s.template.heapBytes)} + primary key ${mb(s.template.indexBytes)}; filled in ${s.template.fillSeconds} s, frozen in ${s.template.vacuumSeconds} s, sealed in ${s.template.sealSeconds} s (${s.template.strategy}); load average ${s.loadAverage ?? '?'} when it started.`,
    ),
    ...skipped,
  ];

  const palette = { cold: '#2f6fb3', warm: '#6aa84f', copy: '#8c8c8c', wal: '#b07aa1', upd: '#d08a2c' };
  const bar = (s: SizeResult, value: number, color: string) => ({ label: label(s), value, color });
  const panels: Panel[] = [
    { title: 'Branch ready, cold', subtitle: 'ms p50, --pool-size 0; bar 150 ms at 10 GB', bars: r.sizes.map((s) => bar(s, med(s.cold.map((x) => x.readyMs)), palette.cold)), format: (v) => v.toFixed(0) },
    ...(r.sizes.some((s) => s.warm.length)
      ? [{ title: 'Branch ready, warm spare', subtitle: `ms p50, --pool-size ${warmPoolSize(r)}`, bars: r.sizes.map((s) => bar(s, med(s.warm.map((x) => x.readyMs)), palette.warm)), format: (v: number) => v.toFixed(0) }]
      : []),
    { title: 'Branch: new storage', subtitle: 'MB p50 (cold); bar 5 MB at 10 GB', bars: r.sizes.map((s) => bar(s, med(s.cold.map((x) => x.newBytes)) / MB, palette.cold)), format: (v) => v.toFixed(1) },
    {
      title: `After ${UPDATED_ROWS} scattered updates`,
      subtitle: 'MB more, XFS preallocation trimmed',
      bars: r.sizes.map((s) => bar(s, (s.updates?.newBytesTrimmed ?? NaN) / MB, palette.upd)),
      format: (v) => v.toFixed(1),
    },
    ...(['FILE_COPY (file_copy_method = copy)', 'WAL_LOG'] as const)
      .filter((st) => r.sizes.some((s) => s.fullCopies.some((c) => c.strategy === st)))
      .flatMap((st): Panel[] => [
        {
          title: `Full copy ready, ${st === 'WAL_LOG' ? 'WAL_LOG' : 'FILE_COPY copy'}`,
          subtitle: 's: CREATE DATABASE + connect',
          bars: r.sizes.map((s) => bar(s, med(s.fullCopies.filter((c) => c.strategy === st).map((c) => c.readyMs)) / 1000, st === 'WAL_LOG' ? palette.wal : palette.copy)),
          format: (v) => v.toFixed(1),
        },
      ]),
    {
      title: 'Full copy: new storage',
      subtitle: 'GB (FILE_COPY copy)',
      bars: r.sizes.map((s) => bar(s, med(s.fullCopies.filter((c) => c.strategy !== 'WAL_LOG').map((c) => c.newBytes)) / GB, palette.copy)),
      format: (v) => v.toFixed(2),
    },
    ...(n
      ? [
          {
            title: 'Neighbour p99 (pgbench -N)',
            subtitle: 'ms, engine: quiet, ckpt, clones, after',
            bars: WINDOW_KINDS.map((k) => ({ label: k === 'checkpoints' ? 'ckpt' : k, value: n.byKind[k].engine.p99, color: k === 'clones' ? palette.cold : k === 'checkpoints' ? palette.upd : palette.copy })),
            format: (v: number) => v.toFixed(0),
          },
        ]
      : []),
  ];

  const terminal = [
    ...about,
    '',
    'Branches (cold: --pool-size 0, a clone per connect; warm: a pool spare claimed):',
    formatTable(branchHeader, branchRows),
    '',
    'Full copies of the same templates, same run:',
    formatTable(copyHeader, copyRows),
    '',
    "Where a cold branch's time goes (medians):",
    formatTable(profHeader, profRows),
    '',
    ...ownLines,
    ...(n ? ['', 'Neighbour write latency while branches are minted:', formatTable(nbHeader, nbRows), ...nbLines] : []),
  ].join('\n');

  return {
    bars,
    terminal,
    svg: { file: 'cow.svg', text: panelGrid(`Copy-on-write branches on XFS reflink, ${r.machine.date.slice(0, 10)}, ${r.machine.nproc} CPUs`, panels, 4) },
    markdown: (raw: string) =>
      [
        `Latest run: ${about.join(' ')}`,
        '',
        `Command: \`npm run bench -- cow${commandFlags(r.options)}\``,
        '',
        '**Branches** (medians; cold = `--pool-size 0`, every connect clones; warm = the default pool, a spare claimed):',
        '',
        markdownTable(branchHeader, branchRows),
        '',
        '**Full copies** of the same templates in the same run:',
        '',
        markdownTable(copyHeader, copyRows, ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'r']),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        '',
        '![Copy-on-write branches against full copies](img/cow.svg)',
        '',
        "**Where a cold branch's time goes** (medians; the direct rows run on PostgreSQL's private socket, without the engine):",
        '',
        markdownTable(profHeader, profRows),
        '',
        '**What a branch owns on disk** (`filefrag -v`: extents not shared with the template):',
        '',
        ...ownLines.map((l) => `- ${l}`),
        ...(n ? ['', '**Neighbour write latency while branches are minted**:', '', markdownTable(nbHeader, nbRows), '', ...nbLines] : []),
        '',
        `Raw results: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

function commandFlags(o: Options): string {
  const d: string[] = [];
  if (o.sizes.join(',') !== '1,2,5,10') d.push(`--sizes ${o.sizes.join(',')}`);
  if (o.branches !== 5) d.push(`--branches ${o.branches}`);
  if (o.copies !== 1) d.push(`--copies ${o.copies}`);
  if (!o.walLog) d.push('--wal-log no');
  if (!o.warm) d.push('--warm no');
  if (!o.neighbour) d.push('--neighbour no');
  if (o.neighbourRate !== 100) d.push(`--neighbour-rate ${o.neighbourRate}`);
  if (o.neighbourWindows !== 3) d.push(`--neighbour-windows ${o.neighbourWindows}`);
  if (o.windowSeconds !== 20) d.push(`--window-seconds ${o.windowSeconds}`);
  return d.length ? ` ${d.join(' ')}` : '';
}

function yesNo(v: Record<string, string | boolean | undefined>, name: string, fallback: boolean): boolean {
  const raw = v[name];
  if (raw === undefined) return fallback;
  if (raw === 'yes') return true;
  if (raw === 'no') return false;
  throw new PgxError('CONFIG_INVALID', `--${name} ${String(raw)}: expected yes or no`);
}

export const main = benchMain<Options, Body>({
  name: 'cow',
  help: HELP,
  options: ['sizes', 'branches', 'copies', 'wal-log', 'warm', 'neighbour', 'neighbour-rate', 'neighbour-windows', 'window-seconds', 'dir', 'keep-image'],
  parse: (v, quick) => {
    const rawSizes = typeof v.sizes === 'string' ? v.sizes : quick ? '0.25' : '1,2,5,10';
    const sizes = rawSizes.split(',').map((s) => Number(s.trim()));
    if (sizes.length === 0 || sizes.some((s) => !Number.isFinite(s) || s <= 0 || s > 1000)) {
      throw new PgxError('CONFIG_INVALID', `--sizes ${rawSizes}: expected GB values above 0, comma-separated (e.g. 1,2,5,10)`);
    }
    if (new Set(sizes).size !== sizes.length) throw new PgxError('CONFIG_INVALID', `--sizes ${rawSizes}: each size once`);
    return {
      sizes,
      branches: intOption(v, 'branches', quick ? 2 : 5, 1),
      copies: intOption(v, 'copies', 1, 0),
      walLog: yesNo(v, 'wal-log', true),
      warm: yesNo(v, 'warm', true),
      neighbour: yesNo(v, 'neighbour', true),
      neighbourRate: intOption(v, 'neighbour-rate', 100, 1),
      neighbourWindows: intOption(v, 'neighbour-windows', quick ? 1 : 3, 1),
      windowSeconds: intOption(v, 'window-seconds', quick ? 8 : 20, 1),
      dir: typeof v.dir === 'string' ? path.resolve(v.dir) : os.tmpdir(),
      keepImage: yesNo(v, 'keep-image', false),
    };
  },
  measure,
  render,
});
