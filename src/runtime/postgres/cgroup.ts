// The memory limit of the cgroup the runtime runs in (a container's or a systemd unit's), v2 or v1,
// and the memory charged there that reclaim cannot free (anonymous and shared memory: no swap in a
// container). The runtime sets its own memory limit below the cgroup's (memory-watchdog.ts in the
// engine), so that it cancels a runaway statement before the kernel's OOM killer acts on the cgroup.

import { readFile } from 'node:fs/promises';
import path from 'node:path';

/** v1 reports "no limit" as a huge page-rounded number (PAGE_COUNTER_MAX pages); anything past 2^60 is none. */
const V1_UNLIMITED = 2 ** 60;

export interface CgroupFiles {
  /** /proc/self/cgroup */
  membership: string;
  /** Where the cgroup filesystem is mounted. */
  root: string;
}

const SYSTEM: CgroupFiles = { membership: '/proc/self/cgroup', root: '/sys/fs/cgroup' };

/** The tightest limit over this process's cgroup and its ancestors, and the cgroup that sets it. */
export interface CgroupLimit {
  version: 1 | 2;
  bytes: number;
  /** The directory of the cgroup whose limit it is: its memory.stat counts what that limit covers. */
  dir: string;
}

/** The tightest memory limit on this process's cgroup and its ancestors, in bytes; null for none. */
export async function cgroupMemoryLimit(files: CgroupFiles = SYSTEM): Promise<number | null> {
  return (await cgroupLimit(files))?.bytes ?? null;
}

/** The tightest memory limit and where it is set; null for none. */
export async function cgroupLimit(files: CgroupFiles = SYSTEM): Promise<CgroupLimit | null> {
  let membership: string;
  try {
    membership = await readFile(files.membership, 'utf8');
  } catch {
    return null; // not Linux, or no /proc
  }
  for (const line of membership.split('\n')) {
    const [, controllers, cgroupPath] = line.split(':');
    if (cgroupPath === undefined) continue;
    if (controllers === '') {
      // v2 (unified): memory.max along the path; "max" means none at that level.
      const limit = await tightest(files.root, cgroupPath, 'memory.max');
      if (limit !== undefined) return limit && { version: 2, ...limit };
    } else if (controllers!.split(',').includes('memory')) {
      const limit = await tightest(path.join(files.root, 'memory'), cgroupPath, 'memory.limit_in_bytes');
      if (limit !== undefined) return limit && { version: 1, ...limit };
    }
  }
  return null;
}

/**
 * Bytes charged to the cgroup that reclaim cannot free without swap: anonymous memory (heaps, sorts)
 * and shared memory (PostgreSQL's shared buffers), from its memory.stat; page cache is left out, the
 * kernel reclaims it before it kills. v1's total_* counters include the cgroup's descendants, as v2's
 * do. null when the file cannot be read.
 */
export async function unreclaimableBytes(limit: CgroupLimit): Promise<number | null> {
  let text: string;
  try {
    text = await readFile(path.join(limit.dir, 'memory.stat'), 'utf8');
  } catch {
    return null;
  }
  const keys = limit.version === 2 ? ['anon', 'shmem'] : ['total_rss', 'total_shmem'];
  let sum = 0;
  for (const key of keys) {
    const m = new RegExp(`^${key} (\\d+)$`, 'm').exec(text);
    if (!m) return null;
    sum += Number(m[1]);
  }
  return sum;
}

/**
 * The smallest limit in `file` from the cgroup at `cgroupPath` up to the root, and the directory it
 * is in. Inside a container's cgroup namespace the path shown may not exist under the mount (it is
 * then the root itself). null: no limit; undefined: no such file anywhere (the controller is not there).
 */
async function tightest(mount: string, cgroupPath: string, file: string): Promise<{ bytes: number; dir: string } | null | undefined> {
  let found = false;
  let limit: { bytes: number; dir: string } | null = null;
  for (let dir = cgroupPath; ; dir = path.posix.dirname(dir)) {
    const value = await readLimit(path.join(mount, dir, file));
    if (value !== undefined) {
      found = true;
      if (value !== null && (limit === null || value < limit.bytes)) limit = { bytes: value, dir: path.join(mount, dir) };
    }
    if (dir === '/' || dir === '.' || dir === '') break;
  }
  return found ? limit : undefined;
}

async function readLimit(file: string): Promise<number | null | undefined> {
  let text: string;
  try {
    text = (await readFile(file, 'utf8')).trim();
  } catch {
    return undefined;
  }
  if (text === 'max') return null;
  const n = Number(text);
  return Number.isFinite(n) && n > 0 && n < V1_UNLIMITED ? n : null;
}
