// Loaded by `npm test` (mocha --require) before any test: the suite's scratch files go to a tmpfs.
// Every test runtime's data directory lives under os.tmpdir(), and each mint copies a template file
// by file; on the CI machine's ext4 that copying was most of the suite's time, in the kernel (npm
// test 13.7 min, 8.5 min of it system time; with TMPDIR on /dev/shm 7.9 min and 2.2 min, 2026-12-04).
// A TMPDIR the user set is left alone, as is a machine without a roomy /dev/shm (Docker gives it
// 64 MB). The run's directory is removed when mocha exits; caches stay on disk (scratch.ts).

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

const MEMORY_DIR = '/dev/shm';
const TMPFS_MAGIC = 0x01021994;
/** The suite's peak use was about 0.5 GB; room for four times that, or the disk is used. */
const ROOM_BYTES = 2 * 2 ** 30;

function roomyTmpfs(dir: string): boolean {
  try {
    const s = fs.statfsSync(dir);
    return s.type === TMPFS_MAGIC && s.bavail * s.bsize >= ROOM_BYTES;
  } catch {
    return false;
  }
}

if (!process.env.TMPDIR && roomyTmpfs(MEMORY_DIR)) {
  const run = fs.mkdtempSync(path.join(MEMORY_DIR, 'pgx-test-run-'));
  // The runtimes' PostgreSQL runs as the pgx OS user, which must reach its data directories.
  fs.chmodSync(run, 0o755);
  process.env.PGX_TEST_DISK_TMPDIR = os.tmpdir();
  process.env.TMPDIR = run;
  process.on('exit', () => fs.rmSync(run, { recursive: true, force: true }));
}
