// A real small filesystem for a suite: a tmpfs mounted as root, so free space can run out for real.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import { scratchDir } from './scratch.js';

const MB = 2 ** 20;

/**
 * A tmpfs of `size` mounted for the suite (root only; the suite is skipped otherwise) and unmounted
 * after it. Call it after the suite's own after hooks that need the filesystem: hooks run in order.
 */
export function tmpfsForSuite(prefix: string, size: string): () => string {
  let mountPoint = '';
  before(function () {
    if (process.getuid?.() !== 0) {
      console.log('    (needs root to mount a tmpfs)');
      this.skip();
    }
    mountPoint = scratchDir(prefix);
    execFileSync('mount', ['-t', 'tmpfs', '-o', `size=${size}`, 'tmpfs', mountPoint]);
  });
  after(function () {
    if (mountPoint) {
      execFileSync('umount', [mountPoint]);
      fs.rmSync(mountPoint, { recursive: true, force: true });
    }
  });
  return () => mountPoint;
}

/** Writes to `file` until the filesystem is full (ENOSPC). */
export function fill(file: string): void {
  const chunk = Buffer.alloc(MB, 1);
  const fd = fs.openSync(file, 'a');
  try {
    for (;;) fs.writeSync(fd, chunk);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOSPC') throw err;
  } finally {
    fs.closeSync(fd);
  }
}
