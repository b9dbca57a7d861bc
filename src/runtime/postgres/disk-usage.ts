// What a database costs on disk, read from its files (base/<oid>): their apparent size (what
// pg_database_size counts), the blocks allocated to them, and, on a filesystem that clones, how much
// of that is shared with another file (a template and its clones, a snapshot and its database).
//
// PostgreSQL counts apparent sizes only, so a clone of a 200 MB template reads as 200 MB although it
// costs a few blocks. Sharing is an extent flag (FIEMAP_EXTENT_SHARED), which Node cannot ask for:
// `filefrag -v` (e2fsprogs) prints it per extent, for many files in one run. Without filefrag, or on a
// filesystem that does not clone, shared is null: unknown, never a guessed 0.

import { execFile } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import path from 'node:path';

export interface DiskUse {
  /** Sum of the files' sizes: what pg_database_size reports. */
  apparent_bytes: number;
  /** Blocks allocated to the files (st_blocks), shared ones included. */
  allocated_bytes: number;
  /** Of those, bytes in extents shared with another file (a clone); null where this cannot be told. */
  shared_bytes: number | null;
}

/** Files per filefrag run: well inside the kernel's argument limit. */
const FILES_PER_RUN = 256;

/** The disk use of `dir`'s files (one level: a database directory holds no subdirectories). */
export async function directoryUse(dir: string, clones: boolean): Promise<DiskUse> {
  let names: string[];
  try {
    names = await fsp.readdir(dir);
  } catch {
    return { apparent_bytes: 0, allocated_bytes: 0, shared_bytes: clones ? 0 : null };
  }
  const files = names.map((n) => path.join(dir, n));
  let apparent = 0;
  let allocated = 0;
  for (const f of files) {
    // A file may go between readdir and stat (a relation dropped meanwhile): it costs nothing now.
    const st = await fsp.stat(f).catch(() => null);
    if (st === null || !st.isFile()) continue;
    apparent += st.size;
    allocated += st.blocks * 512;
  }
  return { apparent_bytes: apparent, allocated_bytes: allocated, shared_bytes: clones ? await sharedBytes(files) : null };
}

/** Bytes in shared extents of `files`, by filefrag; null when filefrag cannot be run. */
async function sharedBytes(files: string[]): Promise<number | null> {
  let shared = 0;
  for (let i = 0; i < files.length; i += FILES_PER_RUN) {
    const out = await filefrag(files.slice(i, i + FILES_PER_RUN));
    if (out === null) return null;
    shared += sharedInFilefrag(out);
  }
  return shared;
}

function filefrag(files: string[]): Promise<string | null> {
  return new Promise((resolve) => {
    execFile('filefrag', ['-v', ...files], { maxBuffer: 64 * 1024 * 1024, env: { ...process.env, LC_ALL: 'C' } }, (err, stdout) => {
      // Exit 1 also when one file vanished meanwhile: its output for the others is still good.
      if (err && (err as NodeJS.ErrnoException).code === 'ENOENT') resolve(null);
      else resolve(stdout);
    });
  });
}

/**
 * Shared bytes in `filefrag -v` output: each file's header gives its block size ("File size of F is N
 * (B blocks of S bytes)"), each extent line its length in blocks and its flags.
 */
function sharedInFilefrag(out: string): number {
  let blockSize = 4096;
  let shared = 0;
  for (const line of out.split('\n')) {
    const header = /blocks of (\d+) bytes\)/.exec(line);
    if (header) {
      blockSize = Number(header[1]);
      continue;
    }
    const extent = /^\s*\d+:\s+\d+\.\.\s*\d+:\s+\d+\.\.\s*\d+:\s+(\d+):.*\bshared\b/.exec(line);
    if (extent) shared += Number(extent[1]) * blockSize;
  }
  return shared;
}
