// Can the data directory's filesystem clone files (copy-on-write)? Asked once at start by doing it: a
// probe file is cloned with FICLONE (what `cp --reflink=always` uses; PostgreSQL 18's
// file_copy_method = clone uses copy_file_range, which on these filesystems remaps the same extents),
// and the free space before and after says whether the clone shares blocks or was a full copy.
//
// The space check is what catches the silent fallbacks: copy_file_range on ext4, or OpenZFS 2.2.x
// with zfs_bclone_enabled=0 (its default there), copies every byte without an error.

import { randomBytes } from 'node:crypto';
import { constants, promises as fsp, readFileSync } from 'node:fs';
import path from 'node:path';
import { openPrivateFile } from './private-files.js';

export interface StorageCapability {
  /** xfs, btrfs, zfs, ext4, tmpfs, overlay, ... (from statfs), or 'unknown (0x...)'. */
  filesystem: string;
  /** A clone shares blocks with its source: CREATE DATABASE can use FILE_COPY with file_copy_method = clone. */
  clone: boolean;
  /** What was found, in a sentence a person can act on. */
  detail: string;
}

/** statfs f_type magic numbers (linux/magic.h) of the filesystems worth naming. */
const FILESYSTEMS: Record<number, string> = {
  0x58465342: 'xfs',
  0x9123683e: 'btrfs',
  0x2fc12fc1: 'zfs',
  0xef53: 'ext4',
  0x01021994: 'tmpfs',
  0x794c7630: 'overlay',
  0x6969: 'nfs',
};

/** Big enough that a full copy stands out from other writers' noise, small enough to cost nothing. */
const PROBE_BYTES = 8 * 1024 * 1024;

const HOW_TO_GET_CLONES =
  'For copy-on-write databases put the data directory on XFS (mkfs.xfs -m reflink=1), btrfs, or OpenZFS >= 2.2 with zfs_bclone_enabled=1.';

/**
 * Clones tried before a verdict of "full copy". Another writer on the same filesystem (a second
 * runtime's initdb on a shared volume, or a dataset of the same ZFS pool) can take more than half the
 * probe's size between the two readings of free space and make one clone look like a full copy: two
 * runtimes started side by side on one XFS image had one of them find no clones and copy every
 * database in full. A full copy has to look like one every time; a clone needs to look like one once.
 */
const ATTEMPTS = 3;

/** `free`: the filesystem's free bytes (a parameter so a test can be the other writer). */
export async function probeStorage(dir: string, free: (dir: string) => Promise<number> = freeBytes): Promise<StorageCapability> {
  const stat = await fsp.statfs(dir);
  const filesystem = FILESYSTEMS[stat.type] ?? `unknown (0x${stat.type.toString(16)})`;
  if (filesystem === 'zfs' && zfsCloningDisabled()) {
    return {
      filesystem,
      clone: false,
      detail: `OpenZFS block cloning is off (zfs_bclone_enabled=0): clones would silently be full copies. Set it with: echo 1 > /sys/module/zfs/parameters/zfs_bclone_enabled (and options zfs zfs_bclone_enabled=1 in /etc/modprobe.d/zfs.conf).`,
    };
  }
  const source = path.join(dir, `.pgx-clone-probe-${process.pid}`);
  // A name per try, all removed at the end: a removed copy's blocks may be freed later (XFS and ZFS
  // free in the background) and would make a later try's full copy look smaller than it is.
  const copies = Array.from({ length: ATTEMPTS }, (_, i) => `${source}.clone${i}`);
  try {
    await writeSynced(source, randomBytes(PROBE_BYTES));
    let used = Infinity;
    for (let attempt = 0; attempt < ATTEMPTS && used > PROBE_BYTES / 2; attempt++) {
      const copy = copies[attempt]!;
      const before = await free(dir);
      try {
        // EXCL: a name someone put there (a symlink) is not written through.
        await fsp.copyFile(source, copy, constants.COPYFILE_FICLONE_FORCE | constants.COPYFILE_EXCL);
      } catch (err) {
        const code = (err as NodeJS.ErrnoException).code ?? 'error';
        return { filesystem, clone: false, detail: `${filesystem} cannot clone files here (FICLONE: ${code}). ${HOW_TO_GET_CLONES}` };
      }
      const handle = await openPrivateFile(copy, constants.O_RDWR, 0);
      await handle.sync().finally(() => handle.close());
      used = Math.min(used, before - (await free(dir)));
    }
    if (used > PROBE_BYTES / 2) {
      return {
        filesystem,
        clone: false,
        detail: `${filesystem} accepted a clone but it used ${Math.round(used / 1024)} KiB for ${PROBE_BYTES / 1024} KiB (the least of ${ATTEMPTS} tries): a full copy, not copy-on-write. ${HOW_TO_GET_CLONES}`,
      };
    }
    return { filesystem, clone: true, detail: `${filesystem} clones files copy-on-write: databases are created with STRATEGY FILE_COPY and file_copy_method = clone.` };
  } finally {
    await Promise.all([source, ...copies].map((f) => fsp.rm(f, { force: true })));
  }
}

/** Written in the data directory, which the OS user owns: never through a symlink (private-files.ts). */
async function writeSynced(file: string, data: Buffer): Promise<void> {
  const handle = await openPrivateFile(file, constants.O_WRONLY | constants.O_CREAT, 0o600);
  try {
    await handle.truncate(0);
    await handle.writeFile(data);
    await handle.sync();
  } finally {
    await handle.close();
  }
}

async function freeBytes(dir: string): Promise<number> {
  const s = await fsp.statfs(dir);
  return s.bfree * s.bsize;
}

function zfsCloningDisabled(): boolean {
  try {
    return readFileSync('/sys/module/zfs/parameters/zfs_bclone_enabled', 'utf8').trim() === '0';
  } catch {
    // No such parameter: an OpenZFS without the switch (older: no FICLONE at all, which the probe
    // finds; newer: cloning on by default).
    return false;
  }
}
