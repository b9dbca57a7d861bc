// Where tests put their files. npm test loads scratch-in-memory.ts first, which points os.tmpdir()
// at a tmpfs; what must outlive a run (caches) or be on the machine's disk (the tests whose subject
// is the disk's filesystem, or a memory cgroup that would count tmpfs pages as its memory) goes
// under diskTmpDir() instead.

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
