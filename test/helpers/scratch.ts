// Where tests put their files. npm test loads scratch-in-memory.ts first, which points os.tmpdir()
// at a tmpfs; what must outlive a run (caches) or be on the machine's disk (the tests whose subject
// is the disk's filesystem, or a memory cgroup that would count tmpfs pages as its memory) goes
// under diskTmpDir() instead.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

/** The machine's temporary directory on disk, as os.tmpdir() gave it before npm test moved it to memory. */
export function diskTmpDir(): string {
  return process.env.PGX_TEST_DISK_TMPDIR || os.tmpdir();
}

/** Kept across runs: the initdb'd seed cluster, helm and kubectl unpacked. */
export function testCacheDir(): string {
  return path.join(diskTmpDir(), 'pgx-test-cache');
}

const made = new Set<string>();

/**
 * A new directory under `parent` that the pgx OS user (PostgreSQL's) can pass through. Recorded, so
 * that the suite's end can name any left behind (no-leftovers.ts): a runtime's data directory is
 * 47 MB, and a developer's /tmp kept every one a test forgot.
 */
export function scratchDir(prefix: string, parent = os.tmpdir()): string {
  const dir = fs.mkdtempSync(path.join(parent, prefix));
  fs.chmodSync(dir, 0o755);
  made.add(dir);
  return dir;
}

/** Directories made by scratchDir that still exist. */
export function scratchLeftBehind(): string[] {
  return [...made].filter((dir) => fs.existsSync(dir));
}
