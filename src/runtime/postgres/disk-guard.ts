// Disk headroom for the data filesystem. PostgreSQL turns a failed data-file write into an ERROR
// (53100), but a failed WAL write into a PANIC: every session of every tenant ends, and crash recovery
// cannot finish until someone frees space by hand. One tenant filling the disk must not do that to the
// others, so the runtime watches free space (statfs of the data directory) and acts at three lines,
// all derived from one setting, --min-free-disk (M):
//
//   free < M     'low': new work is refused with 53100 (mints, template builds and imports, snapshots,
//                restores, warm spares); a CHECKPOINT hands back WAL PostgreSQL no longer needs.
//   free < M/2   'critical' (or under M and falling fast enough to cross M/2 within 500 ms): tenant
//                statements growing their database, or their temporary files, are canceled with
//                53100 (the engine words the error), so the disk stops filling while M/2 is left for
//                WAL, checkpoints and everyone else's small writes.
//   free < M/4   or PostgreSQL down: the reserve file (pgx-disk-reserve, M/4 at most 64 MB, on the
//                same filesystem) is deleted, giving WAL and crash recovery room at once. The
//                supervisor restarts a crashed PostgreSQL only once that room is there.
//
// When free space is back above M (plus the reserve's size, to recreate it), the runtime recovers by
// itself: the reserve is rewritten, mints and spares resume. Nothing restarts.
//
// Near M free space is read every intervalMs (100 ms), as a bulk load writes 100 MB/s and more. Far
// above it such reads are waste (an idle runtime spent a quarter of its busy time in them): the next
// read comes before a fast writer could eat the headroom above M, and at least once a second.

import { spawn } from 'node:child_process';
import { randomFillSync } from 'node:crypto';
import { constants, promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { AdminConnection } from './admin-connection.js';
import { openPrivateFile } from './private-files.js';
import type { SqlClient } from './sql-client.js';

export type DiskState = 'ok' | 'low' | 'critical';

/** --min-free-disk: MB, or a percentage of the filesystem's size; null: the default. */
export type MinFreeDisk = { mb: number } | { percent: number } | null;

/**
 * The default: 5% of the filesystem, at least 64 MB (four WAL segments) and at most 1 GB, so a
 * developer's nearly full laptop disk still mints while a small volume keeps room for its WAL.
 */
const DEFAULT_PERCENT = 5;
const DEFAULT_FLOOR_BYTES = 64 * 2 ** 20;
const DEFAULT_CEILING_BYTES = 2 ** 30;

export const RESERVE_FILE = 'pgx-disk-reserve';
/** Crash recovery and a checkpoint need a WAL segment or two; four leave room for other tenants' commits. */
const RESERVE_MAX_BYTES = 64 * 2 ** 20;
/** Room crash recovery needs to start: two WAL segments (its end-of-recovery checkpoint writes WAL). */
const RESTART_ROOM_BYTES = 32 * 2 ** 20;
/** A database that grew this much between two checks while critical is one that fills the disk. */
const GROWTH_BYTES = 2 ** 20;
/** A CHECKPOINT while low at most this often (it removes WAL segments older than its redo point). */
const CHECKPOINT_EVERY_MS = 5_000;
/** Critical when free space, falling at its recent rate, would be under half of M this far ahead. */
const PROJECT_MS = 500;
const WRITE_CHUNK = 2 ** 20;
/**
 * The fill rate the cadence assumes of a writer that starts between two reads, 1 GB/s: several bulk
 * loads at once, each writing its rows and as much again in WAL at 100 MB/s and more. A faster one is
 * seen falling at the next read, and the reads after it come sooner.
 */
const WORST_FILL_BYTES_PER_MS = 2 ** 30 / 1_000;
/** The slowest cadence, however much headroom: status shows free space a second old at most. */
const MAX_CHECK_MS = 1_000;

/**
 * Milliseconds to the next read of free space: the time a writer at the larger of the assumed worst
 * rate and the rate free space was seen falling takes to eat the headroom above M, within
 * [intervalMs, MAX_CHECK_MS]. At or under M (or within an interval's worth of it) that is intervalMs.
 */
export function nextCheckDelay(free: number, minFree: number, fallingBytesPerMs: number, intervalMs: number): number {
  const ms = (free - minFree) / Math.max(WORST_FILL_BYTES_PER_MS, fallingBytesPerMs);
  return Math.min(MAX_CHECK_MS, Math.max(intervalMs, ms));
}

export interface DiskGuardOptions {
  dataDir: string;
  minFree: MinFreeDisk;
  /**
   * How often free space is read when it is near the line (a bulk insert writes 100 MB a second and
   * more); with more headroom it is read less often, at least once a second (nextCheckDelay).
   */
  intervalMs: number;
  /** A superuser connection over PostgreSQL's private socket (opened only while space is low). */
  connect: () => Promise<SqlClient>;
  /**
   * Cancels the statement in progress on the client sessions these backends serve, the client reading
   * `error` (SQLSTATE 53100) instead of 57014; returns how many. The engine's session table does it.
   */
  cancelStatements: (pids: ReadonlySet<number>, error: { message: string; detail: string; hint: string }) => number;
  /** True while PostgreSQL answers (the supervisor is ready). */
  postgresUp: () => boolean;
  clock: Clock;
  logger: Logger;
}

/** What pgx status and /metrics show (limits.disk). */
export interface DiskStatus {
  /** Bytes an unprivileged process can still write on the data filesystem, MB (statfs f_bavail). */
  free_mb: number;
  total_mb: number;
  /** The setting in force (--min-free-disk), MB: below it new work is refused. */
  min_free_mb: number;
  state: DiskState;
  /** Size of the reserve file on disk now, MB (0 while it is given to PostgreSQL). */
  reserve_mb: number;
  /** Tenant statements canceled with 53100 for growing their database while critical. */
  writes_canceled: number;
  /** New work refused with 53100 (mints, builds, snapshots, restores). */
  refusals: number;
}

/** What the disposable databases ask before new work. */
export interface DiskRoom {
  /** Throws DISK_FULL (53100) naming the free space and the setting when below --min-free-disk. */
  assertRoom(what: string): void;
  hasRoom(): boolean;
  /** Called when space is back above --min-free-disk (the warm pool resumes). */
  onRoom(listener: () => void): void;
  status(): DiskStatus;
}

interface Reading {
  free: number;
  total: number;
  /** Clock.monotonic() when read. */
  at: number;
}

const mb = (bytes: number): number => Math.round((bytes / 2 ** 20) * 10) / 10;

export class DiskGuard implements DiskRoom {
  private readonly reservePath: string;
  private readonly conn: AdminConnection;
  private readonly checkpointConn: AdminConnection;
  private checkpointing: Promise<void> | null = null;
  private reading: Reading = { free: Infinity, total: 0, at: 0 };
  private current: DiskState = 'ok';
  private reserveBytes = 0;
  private timer: NodeJS.Timeout | null = null;
  private checking: Promise<void> | null = null;
  /** Until the next timed pass, set by each pass. */
  private delay: number;
  private stopped = false;
  private lastCheckpoint = -Infinity;
  /**
   * Sizes of databases with a writer in progress at the last check while critical; kept until space is
   * back, as a CHECKPOINT's freed WAL can lift the state to low for a moment while the writer goes on.
   */
  private readonly sizes = new Map<string, number>();
  /** Temporary-file bytes per backend at the last check while critical (a statement's files go with it). */
  private tempSizes = new Map<number, number>();
  private readonly roomListeners: (() => void)[] = [];
  private canceled = 0;
  private refused = 0;

  constructor(private readonly opts: DiskGuardOptions) {
    this.reservePath = path.join(opts.dataDir, RESERVE_FILE);
    this.conn = new AdminConnection(opts.connect);
    this.checkpointConn = new AdminConnection(opts.connect);
    this.delay = opts.intervalMs;
  }

  get state(): DiskState {
    return this.current;
  }

  /** Bytes below which new work is refused, for the filesystem's size now. */
  get minFreeBytes(): number {
    const m = this.opts.minFree;
    const total = this.reading.total;
    if (m === null) return Math.min(Math.max((total * DEFAULT_PERCENT) / 100, DEFAULT_FLOOR_BYTES), DEFAULT_CEILING_BYTES);
    return 'mb' in m ? m.mb * 2 ** 20 : (total * m.percent) / 100;
  }

  private get reserveTarget(): number {
    return Math.min(RESERVE_MAX_BYTES, Math.floor(this.minFreeBytes / 4 / WRITE_CHUNK) * WRITE_CHUNK);
  }

  /** Reads free space, adopts or writes the reserve, and starts watching. */
  async start(): Promise<void> {
    this.reserveBytes = (await fsp.stat(this.reservePath).catch(() => null))?.size ?? 0;
    await this.check();
    this.schedule();
    this.opts.logger.info('disk-guard', { dataDir: this.opts.dataDir, freeMb: mb(this.reading.free), totalMb: mb(this.reading.total), minFreeMb: mb(this.minFreeBytes), reserveMb: mb(this.reserveBytes) });
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    await this.checking;
    await this.checkpointing;
    await this.conn.close();
    await this.checkpointConn.close();
  }

  hasRoom(): boolean {
    return this.current === 'ok';
  }

  assertRoom(what: string): void {
    if (this.hasRoom()) return;
    this.refused++;
    throw new PgxError('DISK_FULL', `${what}: the data filesystem has ${mb(this.reading.free)} MB free, under the runtime's --min-free-disk of ${mb(this.minFreeBytes)} MB`, {
      hint: 'Free space on the data filesystem (drop databases, snapshots or templates you no longer need) or grow it; new work is accepted again by itself once space is back.',
    });
  }

  onRoom(listener: () => void): void {
    this.roomListeners.push(listener);
  }

  status(): DiskStatus {
    return {
      free_mb: mb(this.reading.free),
      total_mb: mb(this.reading.total),
      min_free_mb: mb(this.minFreeBytes),
      state: this.current,
      reserve_mb: mb(this.reserveBytes),
      writes_canceled: this.canceled,
      refusals: this.refused,
    };
  }

  /**
   * The supervisor's gate before it restarts a PostgreSQL that died: the reserve goes (crash recovery
   * writes WAL), then it waits until there is room for recovery to finish. Resolves at once when there is.
   */
  async roomToRestart(signal: AbortSignal): Promise<void> {
    await this.releaseReserve('PostgreSQL is down; crash recovery needs room for WAL');
    let logged = false;
    for (;;) {
      await this.read();
      const need = Math.min(RESTART_ROOM_BYTES, this.minFreeBytes / 4);
      if (this.reading.free >= need) return;
      if (!logged) this.opts.logger.warn('postgres-restart-waiting-for-disk', { freeMb: mb(this.reading.free), needMb: mb(need), hint: 'Free space on the data filesystem; PostgreSQL restarts as soon as there is room.' });
      logged = true;
      await sleep(this.opts.intervalMs, undefined, { signal });
    }
  }

  /**
   * Before PostgreSQL's first start: a data directory on a filesystem that filled while the runtime
   * was stopped gives its reserve to the startup's crash recovery.
   */
  async releaseIfLow(): Promise<void> {
    const s = await fsp.statfs(this.opts.dataDir).catch(() => null);
    if (s === null) return; // no data directory yet: initdb makes it
    this.reading = { free: s.bavail * s.bsize, total: s.blocks * s.bsize, at: this.opts.clock.monotonic() };
    this.reserveBytes = (await fsp.stat(this.reservePath).catch(() => null))?.size ?? 0;
    if (this.reading.free < this.minFreeBytes / 4) await this.releaseReserve(`${mb(this.reading.free)} MB free at start`);
  }

  /** The next timed pass, after the delay the last pass chose; none once stopped. */
  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.check().then(() => this.schedule()), this.delay);
    this.timer.unref();
  }

  /** One pass; public for tests. Passes never overlap. */
  check(): Promise<void> {
    this.checking ??= this.pass().finally(() => (this.checking = null));
    return this.checking;
  }

  private async pass(): Promise<void> {
    this.delay = this.opts.intervalMs; // a pass that fails is retried soon
    try {
      const previous = this.reading;
      await this.read();
      const min = this.minFreeBytes;
      const { free } = this.reading;
      // Where free space will be in PROJECT_MS at the rate it fell since the last pass: a pass can lag
      // by hundreds of ms on a loaded machine, and a bulk load writes (data and WAL) 100 MB/s and more.
      const fell = Math.max(0, previous.free - free) / Math.max(1, this.reading.at - previous.at);
      const projected = free - fell * PROJECT_MS;
      const next: DiskState = free < min && projected < min / 2 ? 'critical' : free < min ? 'low' : 'ok';
      this.setState(next);
      this.delay = nextCheckDelay(free, min, fell, this.opts.intervalMs);
      if (free < min / 4 || !this.opts.postgresUp()) {
        if (free < min / 4) await this.releaseReserve(`${mb(free)} MB free, under a quarter of --min-free-disk`);
      } else if (next === 'ok' && this.reserveBytes < this.reserveTarget && free >= min + this.reserveTarget) {
        await this.writeReserve();
      }
      if (next !== 'ok' && this.opts.postgresUp()) await this.relieve(next);
    } catch (err) {
      if (!this.stopped) this.opts.logger.warn('disk-guard-pass-failed', { err });
    }
  }

  private async read(): Promise<void> {
    const s = await fsp.statfs(this.opts.dataDir);
    this.reading = { free: s.bavail * s.bsize, total: s.blocks * s.bsize, at: this.opts.clock.monotonic() };
  }

  private setState(next: DiskState): void {
    const previous = this.current;
    if (previous === next) return;
    this.current = next;
    const fields = { state: next, previous, freeMb: mb(this.reading.free), minFreeMb: mb(this.minFreeBytes) };
    if (next === 'ok') {
      this.opts.logger.info('disk-space-back', fields);
      this.sizes.clear();
      this.tempSizes.clear();
      for (const listener of this.roomListeners) listener();
    } else if (previous === 'critical') {
      this.opts.logger.info('disk-space-low', fields);
    } else {
      this.opts.logger.warn('disk-space-low', { ...fields, hint: 'New databases, template builds and snapshots are refused (53100) until space is freed; below half of --min-free-disk, statements growing a database are canceled.' });
    }
  }

  /**
   * Critical: stop what grows. Low or critical: a CHECKPOINT now and then (WAL behind it is removed),
   * on a connection of its own and not awaited: it can take a second under load, and the checks that
   * stop a writer must not wait for it.
   */
  private async relieve(state: DiskState): Promise<void> {
    const now = this.opts.clock.monotonic();
    if (this.checkpointing === null && now - this.lastCheckpoint >= CHECKPOINT_EVERY_MS) {
      this.lastCheckpoint = now;
      this.checkpointing = this.checkpointConn
        .get()
        .then((c) => c.query('CHECKPOINT'))
        .then(
          () => undefined,
          (err: unknown) => {
            if (!this.stopped) this.opts.logger.warn('disk-checkpoint-failed', { err });
          },
        )
        .finally(() => (this.checkpointing = null));
    }
    // Sizes are sampled while low too, so the first critical pass can already tell who grows.
    await this.stopGrowingWriters(await this.conn.get(), state === 'critical');
  }

  private async stopGrowingWriters(client: SqlClient, cancel: boolean): Promise<void> {
    // Client backends inside a statement that has a transaction id: writing now.
    const { rows } = await client.query(
      `SELECT a.pid, a.datname, pg_catalog.pg_database_size(a.datid) FROM pg_catalog.pg_stat_activity a ` +
        `WHERE a.backend_type = 'client backend' AND a.state = 'active' AND a.backend_xid IS NOT NULL AND a.pid <> pg_catalog.pg_backend_pid()`,
    );
    const sizes = new Map<string, number>();
    const pidsOf = new Map<string, Set<number>>();
    for (const [pid, datname, size] of rows) {
      sizes.set(datname!, Number(size));
      const set = pidsOf.get(datname!) ?? new Set<number>();
      set.add(Number(pid));
      pidsOf.set(datname!, set);
    }
    for (const [database, size] of sizes) {
      const before = this.sizes.get(database);
      if (!cancel || before === undefined || size - before < GROWTH_BYTES) continue;
      this.cancel(pidsOf.get(database)!, database, `Database "${database}" grew by ${mb(size - before)} MB since the last check.`, size - before);
    }
    for (const [database, size] of sizes) this.sizes.set(database, size);

    // A sort or hash spilling to temporary files grows no database (and has no transaction id when
    // it only reads), but fills the same filesystem: the files are named pgsql_tmp<pid>.<n>.
    const { rows: temp } = await client.query(
      `SELECT a.pid, a.datname, sum(t.size) FROM pg_catalog.pg_ls_tmpdir() t ` +
        `JOIN pg_catalog.pg_stat_activity a ON a.pid = substring(t.name from '^pgsql_tmp([0-9]+)[.]')::int ` +
        `WHERE a.backend_type = 'client backend' AND a.state = 'active' GROUP BY a.pid, a.datname`,
    );
    const tempSizes = new Map<number, number>();
    for (const [pidText, datname, bytesText] of temp) {
      const pid = Number(pidText);
      const bytes = Number(bytesText);
      tempSizes.set(pid, bytes);
      const before = this.tempSizes.get(pid);
      if (!cancel || before === undefined || bytes - before < GROWTH_BYTES) continue;
      this.cancel(new Set([pid]), datname!, `The statement's temporary files grew by ${mb(bytes - before)} MB since the last check (${mb(bytes)} MB in all).`, bytes - before);
    }
    this.tempSizes = tempSizes;
  }

  private cancel(pids: ReadonlySet<number>, database: string, detail: string, grew: number): void {
    const n = this.opts.cancelStatements(pids, {
      message: `canceling statement: the data filesystem is nearly full (${mb(this.reading.free)} MB free, under the runtime's --min-free-disk of ${mb(this.minFreeBytes)} MB)`,
      detail,
      hint: 'Free space on the data filesystem (drop tables or databases you no longer need), then retry; reads and small writes go on meanwhile.',
    });
    this.canceled += n;
    if (n > 0) this.opts.logger.warn('disk-write-canceled', { database, statements: n, grewMb: mb(grew), freeMb: mb(this.reading.free) });
  }

  private async releaseReserve(reason: string): Promise<void> {
    if (this.reserveBytes === 0) return;
    await fsp.rm(this.reservePath, { force: true });
    this.opts.logger.warn('disk-reserve-released', { reserveMb: mb(this.reserveBytes), reason });
    this.reserveBytes = 0;
    await this.read();
  }

  /**
   * Real blocks, not a sparse file: fallocate(1) reserves them at once where the filesystem can
   * (XFS, ext4, btrfs); elsewhere (ZFS) random bytes are written, which compression cannot shrink.
   * The file is in the OS user's directory: opened without following a symlink (private-files.ts),
   * and both ways write through that open file.
   */
  private async writeReserve(): Promise<void> {
    const target = this.reserveTarget;
    try {
      const file = await openPrivateFile(this.reservePath, constants.O_RDWR | constants.O_CREAT, 0o600);
      try {
        if (!(await fallocate(file, target))) await writeRandom(file, target);
      } finally {
        await file.close();
      }
    } catch (err) {
      await fsp.rm(this.reservePath, { force: true });
      this.reserveBytes = 0;
      throw err;
    }
    this.reserveBytes = target;
    this.opts.logger.info('disk-reserve-written', { reserveMb: mb(target), path: this.reservePath });
  }
}

/** fallocate -l BYTES on the open file (its standard input); false when the tool or the filesystem cannot. */
function fallocate(file: FileHandle, bytes: number): Promise<boolean> {
  return new Promise((resolve) => {
    const child = spawn('fallocate', ['-l', String(bytes), '/dev/stdin'], { stdio: [file.fd, 'ignore', 'ignore'] });
    child.once('error', () => resolve(false));
    child.once('close', (code) => resolve(code === 0));
  });
}

async function writeRandom(file: FileHandle, bytes: number): Promise<void> {
  const chunk = randomFillSync(Buffer.allocUnsafe(WRITE_CHUNK));
  await file.truncate(0);
  for (let written = 0; written < bytes; written += WRITE_CHUNK) await file.write(chunk, 0, WRITE_CHUNK, written);
  await file.sync();
}
