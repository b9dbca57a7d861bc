// A new spare's catalogs, read into the OS page cache before a client claims it. On XFS and btrfs the
// page cache belongs to a file, not to the blocks it shares with others: a clone of a template whose
// catalogs are cached starts cold, and its first client reads a hundred or so catalog pages from disk,
// one at a time, in its first statements. Measured (XFS with reflink on a loop device doing direct
// I/O, 2-core VM, 2026-12-06): a migration of three CREATE TABLE and an index took 19-22 ms on a fresh
// clone against 10-13 ms once its catalog files had been read, and four clients looping lifecycles
// spent most of their first CREATE TABLE waiting in IO:DataFileRead. Reading each catalog file once
// costs more disk operations than the client's own reads would (all of them, where the client needs a
// third), but off its path: one query on a connection of its own at the lowest CPU priority.
// (Read from node instead, the same files cost 16 ms of node's CPU per spare in file-handle overhead.)
// ZFS needs none of it: its ARC caches blocks, which clones share.

import type { Logger } from '../../log.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import { quoteLiteral, type SqlClient } from '../postgres/sql-client.js';
import { atLowestPriority } from './background-work.js';

/** Filesystems whose clones share blocks but not the page cache. */
export function clonesStartCold(filesystem: string): boolean {
  return filesystem === 'xfs' || filesystem === 'btrfs';
}

/** How long the pool must stay at rest, no spare claimed, before its spares' catalogs are read. */
const QUIET_MS = 1000;
/** The connection closes this long after the last read: an idle runtime keeps no backend for it. */
const IDLE_CLOSE_MS = 5000;

/**
 * The named databases' catalog files, each read once: the system catalogs' main forks and free space
 * maps (file numbers below FirstNormalObjectId, 16384), never a template's own tables; at most 1 MB
 * each. A database or file gone meanwhile (a spare claimed and dropped) is skipped.
 */
export function readCatalogsSql(databases: string[]): string {
  const dir = `'base/' || d.oid || '/'`;
  return (
    `SELECT count(pg_catalog.pg_read_binary_file(${dir} || f, 0, 1048576, true)) ` +
    `FROM pg_catalog.pg_database d, pg_catalog.pg_ls_dir(${dir}, true, false) f ` +
    `WHERE d.datname IN (${databases.map(quoteLiteral).join(', ')}) AND f ~ '^[0-9]+(_fsm)?$' AND pg_catalog.split_part(f, '_', 1)::bigint < 16384`
  );
}

/**
 * Reads spares' catalogs once the warm pool has been at rest (every template's spares made) for a
 * second with no spare claimed. Not while mints keep coming: a loop of mints claims each spare within
 * a few hundred ms of its making, sooner than one connection reads 200 files from a cold disk
 * (measured, one client looping lifecycles: the reads stayed behind, its migrations gained nothing,
 * and its queries and drops took 1.3-1.4x as long beside them).
 */
export class CatalogPrefetch {
  private readonly conn: AdminConnection;
  /** Spares whose catalogs were read (or are being read): each is read once. */
  private read = new Set<string>();
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> | null = null;
  private stopped = false;

  constructor(
    connect: () => Promise<SqlClient>,
    /** The names of the spares ready now. */
    private readonly spares: () => string[],
    private readonly logger: Logger,
  ) {
    this.conn = new AdminConnection(async () => atLowestPriority(await connect(), logger, 'prefetch-priority-not-lowered'));
  }

  /** The warm pool is at rest: in QUIET_MS, if none of its spares was claimed meanwhile, reads those not read before. */
  atRest(): void {
    clearTimeout(this.timer);
    if (this.stopped) return;
    const atRest = this.spares();
    this.timer = setTimeout(() => {
      const now = new Set(this.spares());
      if (this.running !== null || !atRest.every((s) => now.has(s))) return;
      this.running = this.readUnread([...now]).finally(() => {
        this.running = null;
        this.conn.closeWhenIdle(IDLE_CLOSE_MS);
      });
    }, QUIET_MS);
    this.timer.unref();
  }

  private async readUnread(spares: string[]): Promise<void> {
    const unread = spares.filter((s) => !this.read.has(s));
    // Only the current spares are remembered: the set stays the pool's size.
    this.read = new Set(spares);
    if (unread.length === 0) return;
    try {
      await (await this.conn.get()).query(readCatalogsSql(unread));
      this.logger.debug('spare-catalogs-read', { spares: unread.length });
    } catch (err) {
      this.logger.debug('catalog-prefetch-failed', { spares: unread.length, err });
    }
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    await this.running;
    await this.conn.close();
  }
}
