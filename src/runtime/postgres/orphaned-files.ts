// Database directories PostgreSQL forgot. CREATE DATABASE copies (or clones) the template's files into
// base/<oid> before its catalog row commits; if PostgreSQL dies in between (a PANIC when the disk is
// full, a kill), crash recovery undoes the row but not the files, which then take space forever:
// PostgreSQL never looks at a directory no pg_database row names. At start, before the runtime
// creates anything, those directories are removed. PGX creates databases only in the default
// tablespace, so base/ is the one place to look.
//
// This runs as root in a directory PostgreSQL's OS user owns and can rearrange. A removal follows
// every component of its path but the last, so a base/ that is a symlink would have it delete a
// directory elsewhere (base -> /etc: base/<oid> is /etc/<oid>). So base/ must be a real directory, and
// each candidate too (not a symlink, not a file); otherwise nothing is removed and a warning says why.
// Those checks cannot pin the path until the removal, so the removal itself runs with the OS user's
// rights (`remove`, Supervisor.removeAsOsUser): a path swapped in between leads it only where that
// user could delete anyway.

import { promises as fsp } from 'node:fs';
import path from 'node:path';
import type { Logger } from '../../log.js';
import type { SqlClient } from './sql-client.js';

/**
 * Removes base/<oid> directories with no database with `remove` (the OS user's rights); returns how
 * many. Call only while nothing creates a database.
 */
export async function removeOrphanedDatabaseFiles(dataDir: string, client: SqlClient, logger: Logger, remove: (dir: string) => Promise<void>): Promise<number> {
  const base = path.join(dataDir, 'base');
  const entries = await fsp.readdir(base).catch(() => [] as string[]);
  const candidates = entries.filter((e) => /^[1-9][0-9]*$/.test(e));
  if (candidates.length === 0) return 0;
  if (!(await isRealDirectory(base))) {
    logger.warn('orphaned-database-files-skipped', { dir: base, reason: 'base is not a directory of the data directory (a symlink?): nothing under it is removed' });
    return 0;
  }
  // The engine does not listen yet and the pool has not started: no CREATE DATABASE is under way, so
  // every directory in the listing that a database owns has its committed row here.
  const { rows } = await client.query('SELECT oid FROM pg_catalog.pg_database');
  const known = new Set(rows.map(([oid]) => oid));
  let removed = 0;
  for (const oid of candidates) {
    if (known.has(oid)) continue;
    const dir = path.join(base, oid);
    if (!(await isRealDirectory(dir))) {
      logger.warn('orphaned-database-files-skipped', { dir, reason: 'not a directory (a symlink or a file): left alone' });
      continue;
    }
    const bytes = await directoryBytes(dir);
    const failed = await remove(dir).then(() => null, (err: Error) => err);
    if (failed) {
      logger.warn('orphaned-database-files-not-removed', { dir, reason: `PostgreSQL's OS user could not remove it: ${failed.message.trim()}` });
      continue;
    }
    logger.warn('orphaned-database-files-removed', { dir, mb: Math.round(bytes / 2 ** 20), reason: 'no database in pg_database has this oid: left by a CREATE DATABASE that PostgreSQL did not survive' });
    removed++;
  }
  return removed;
}

/** A directory itself, not a symlink to one (lstat does not follow the last component). */
async function isRealDirectory(p: string): Promise<boolean> {
  return (await fsp.lstat(p).catch(() => null))?.isDirectory() ?? false;
}

async function directoryBytes(dir: string): Promise<number> {
  let total = 0;
  for (const name of await fsp.readdir(dir).catch(() => [] as string[])) {
    total += (await fsp.stat(path.join(dir, name)).catch(() => null))?.blocks ?? 0;
  }
  return total * 512;
}
