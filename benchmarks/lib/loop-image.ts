// A filesystem in a loop-mounted image file: XFS with reflink, made the way docs/storage.md says
// (mkfs.xfs -m reflink=1) and test/runtime/copy-on-write.test.ts does it, or ext4 as mkfs.ext4 makes
// it by default (journaled, no clones: the common filesystem of a volume). Needs root. Everything it
// does is registered with the benchmark's Cleanup: unmount, detach the loop device, delete the image,
// on a normal end, an error and Ctrl-C alike.

import { execFile } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, promises as fsp, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { PgxError } from '../../src/errors.js';
import type { Cleanup } from './cleanup.js';
import { progress } from './bench-main.js';

const run = promisify(execFile);

export interface LoopImage {
  /** The image file on the host filesystem. */
  image: string;
  /** /dev/loopN. */
  device: string;
  /** Where the filesystem is mounted (mode 755, so PostgreSQL's OS user reaches it). */
  mountPoint: string;
  bytes: number;
  /** Whether the loop device does direct I/O to the image (no second page cache over the host's). */
  directIo: boolean;
  /** `xfs_info` of an XFS image; empty for ext4. */
  xfsInfo: string;
  /** The host filesystem holding the image, from statfs. */
  hostFree: number;
}

export interface LoopImageOptions {
  /** Directory on the host for the image and its mount point. */
  dir: string;
  bytes: number;
  /** Keep the image file after unmounting it (for a look afterwards). */
  keep: boolean;
  /** The hint when `dir` has too little room: where else, or how to need less, in the benchmark's own options. */
  roomHint: string;
}

async function sh(cmd: string, args: string[]): Promise<string> {
  try {
    return (await run(cmd, args, { maxBuffer: 64 * 1024 * 1024 })).stdout;
  } catch (err) {
    const e = err as Error & { stderr?: string };
    throw new PgxError('INTERNAL', `${cmd} ${args.join(' ')} failed: ${(e.stderr ?? e.message).trim()}`, { cause: err });
  }
}

/** Used bytes of the filesystem holding `dir` (blocks minus free blocks, as df counts them). */
export async function usedBytes(dir: string): Promise<number> {
  const s = await fsp.statfs(dir);
  return (s.blocks - s.bfree) * s.bsize;
}

export async function freeBytes(dir: string): Promise<number> {
  const s = await fsp.statfs(dir);
  return s.bavail * s.bsize;
}

/** Writes the filesystem's dirty pages to its device (sync -f: this filesystem only, not the host's). */
export async function syncFs(dir: string): Promise<void> {
  await sh('sync', ['-f', dir]);
}

async function unmount(mountPoint: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await run('umount', [mountPoint]);
      return;
    } catch (err) {
      const stderr = String((err as { stderr?: unknown }).stderr ?? '');
      if (/not mounted/.test(stderr)) return;
      // A postgres process that has not quite exited still holds a file: give it a moment.
      if (attempt < 20) {
        await sleep(1000);
        continue;
      }
      progress(`cleanup: ${mountPoint} stays busy (${stderr.trim()}); detaching it lazily`);
      await run('umount', ['-l', mountPoint]);
      return;
    }
  }
}

export type LoopFs = 'xfs' | 'ext4';

const MKFS: Record<LoopFs, [string, string[]]> = {
  xfs: ['mkfs.xfs', ['-q', '-m', 'reflink=1']],
  ext4: ['mkfs.ext4', ['-q', '-F']],
};

export function makeXfsImage(opts: LoopImageOptions, cleanup: Cleanup): Promise<LoopImage> {
  return makeLoopImage('xfs', opts, cleanup);
}

export async function makeLoopImage(fs: LoopFs, opts: LoopImageOptions, cleanup: Cleanup): Promise<LoopImage> {
  if (process.getuid?.() !== 0) {
    throw new PgxError('CONFIG_INVALID', `loop-mounting an ${fs} image needs root`, { hint: 'Run the benchmark as root (as CI does).' });
  }
  mkdirSync(opts.dir, { recursive: true });
  const hostFree = await freeBytes(opts.dir);
  const margin = 2 * 2 ** 30;
  if (hostFree < opts.bytes + margin) {
    throw new PgxError('CONFIG_INVALID', `${opts.dir} has ${(hostFree / 2 ** 30).toFixed(1)} GB free; the image needs ${(opts.bytes / 2 ** 30).toFixed(1)} GB and 2 GB to spare`, {
      hint: opts.roomHint,
    });
  }
  const root = mkdtempSync(path.join(opts.dir, `pgx-${fs}-`));
  chmodSync(root, 0o755);
  const image = path.join(root, `${fs}.img`);
  const mountPoint = path.join(root, 'mnt');
  mkdirSync(mountPoint);
  // Registered first, so it runs last: after the unmount and the detach.
  cleanup.add(`image ${image}`, () => {
    if (opts.keep && existsSync(image)) {
      rmSync(mountPoint, { recursive: true, force: true });
      progress(`kept the image: ${image}`);
      return;
    }
    rmSync(root, { recursive: true, force: true });
  });
  const handle = await fsp.open(image, 'w', 0o600);
  await handle.truncate(opts.bytes).finally(() => handle.close());
  const [mkfs, mkfsArgs] = MKFS[fs];
  await sh(mkfs, [...mkfsArgs, image]);
  // Direct I/O: the image's blocks are not cached a second time in the host's page cache, so `sync`
  // reaches the host disk as it would on a real device. Not every kernel/host filesystem allows it.
  let device: string;
  let directIo = true;
  try {
    device = (await sh('losetup', ['--find', '--show', '--direct-io=on', image])).trim();
  } catch {
    directIo = false;
    device = (await sh('losetup', ['--find', '--show', image])).trim();
  }
  cleanup.add(`loop device ${device}`, async () => {
    const attached = await sh('losetup', ['-j', image]).catch(() => '');
    if (attached.includes(device)) await sh('losetup', ['-d', device]);
  });
  await sh('mount', ['-t', fs, device, mountPoint]);
  cleanup.add(`mount ${mountPoint}`, () => unmount(mountPoint));
  chmodSync(mountPoint, 0o755);
  if (fs !== 'xfs') return { image, device, mountPoint, bytes: opts.bytes, directIo, xfsInfo: '', hostFree };
  const xfsInfo = (await sh('xfs_info', [mountPoint])).trim();
  if (!/reflink=1/.test(xfsInfo)) throw new PgxError('INTERNAL', `the XFS image was made without reflink: ${xfsInfo}`);
  return { image, device, mountPoint, bytes: opts.bytes, directIo, xfsInfo, hostFree };
}
