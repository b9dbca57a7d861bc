// Disk per database, as `du` would split it on a filesystem that clones: the bytes of a database's
// directory (base/<oid>) still shared with another file (its template, or a sibling cloned from the
// same) and the bytes it owns. Read with FIEMAP (file-extents.ts) over a sample of the databases, spread
// evenly over the list, and averaged: reading all of 10,000 directories would take minutes.

import path from 'node:path';
import { fileExtents, filesIn } from './file-extents.js';
import { queryOnce, quoteLiteral, type Endpoint } from './pg-connect.js';

export interface DatabaseDisk {
  /** How many databases were read. */
  sampled: number;
  /** Per database, averaged over the sample (bytes). */
  fileBytes: number;
  sharedBytes: number;
  ownBytes: number;
  files: number;
}

/** Up to `n` names spread evenly over `names`. */
export function spread<T>(names: readonly T[], n: number): T[] {
  if (names.length <= n) return [...names];
  return Array.from({ length: n }, (_, i) => names[Math.floor((i * names.length) / n)]!);
}

/** The average split of the sampled databases' directories, read under `dataDir` of the PostgreSQL at `ep`. */
export async function databaseDisk(ep: Endpoint, dataDir: string, names: readonly string[], sample: number): Promise<DatabaseDisk> {
  const picked = spread(names, sample);
  const list = picked.map(quoteLiteral).join(', ');
  const rows = picked.length === 0 ? [] : await queryOnce(ep, 'postgres', `SELECT oid::text AS oid FROM pg_database WHERE datname IN (${list})`);
  const sum = { fileBytes: 0, sharedBytes: 0, ownBytes: 0, files: 0 };
  for (const row of rows) {
    for (const e of await fileExtents(filesIn(path.join(dataDir, 'base', String(row.oid))))) {
      sum.fileBytes += e.size;
      sum.sharedBytes += e.sharedBytes;
      sum.ownBytes += e.ownBytes;
      sum.files++;
    }
  }
  const n = Math.max(1, rows.length);
  return {
    sampled: rows.length,
    fileBytes: Math.round(sum.fileBytes / n),
    sharedBytes: Math.round(sum.sharedBytes / n),
    ownBytes: Math.round(sum.ownBytes / n),
    files: Math.round(sum.files / n),
  };
}
