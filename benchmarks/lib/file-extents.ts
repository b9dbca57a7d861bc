// What the filesystem says about files' blocks, from `filefrag -v` (FIEMAP): how many extents each file
// has (what a reflink has to remap) and how many of its bytes are shared with another file (a clone's
// blocks still shared with its template) or its own (written since the clone, or never shared).

import { execFile } from 'node:child_process';
import { readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface FileExtents {
  file: string;
  size: number;
  extents: number;
  sharedBytes: number;
  /** Allocated bytes not shared with any other file. */
  ownBytes: number;
}

const HEADER = /^File size of (.+) is (\d+) \((\d+) blocks of (\d+) bytes\)/;
const EXTENT = /^\s*\d+:\s*\d+\.\.\s*\d+:\s*\d+\.\.\s*\d+:\s*(\d+):(.*)$/;

/** filefrag -v over the files, in batches (a database directory has hundreds). */
export async function fileExtents(files: string[]): Promise<FileExtents[]> {
  const out: FileExtents[] = [];
  for (let i = 0; i < files.length; i += 200) {
    const batch = files.slice(i, i + 200);
    const { stdout } = await run('filefrag', ['-v', ...batch], { maxBuffer: 256 * 1024 * 1024 });
    let cur: FileExtents | null = null;
    let blockSize = 4096;
    for (const line of stdout.split('\n')) {
      const h = HEADER.exec(line);
      if (h) {
        cur = { file: h[1]!, size: Number(h[2]), extents: 0, sharedBytes: 0, ownBytes: 0 };
        blockSize = Number(h[4]);
        out.push(cur);
        continue;
      }
      const e = cur ? EXTENT.exec(line) : null;
      if (!e || !cur) continue;
      const bytes = Number(e[1]) * blockSize;
      cur.extents++;
      if (/shared/.test(e[2]!)) cur.sharedBytes += bytes;
      else cur.ownBytes += bytes;
    }
  }
  return out;
}

/** The regular files directly in `dir`. */
export function filesIn(dir: string): string[] {
  return readdirSync(dir)
    .map((f) => path.join(dir, f))
    .filter((f) => statSync(f).isFile());
}
