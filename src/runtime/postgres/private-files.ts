// Files and directories the runtime writes where another user has a say. PostgreSQL's data directory
// belongs to its OS user (pgx), and whoever logs in as a superuser acts as that user (COPY ... TO
// PROGRAM; under trust auth, anyone on the machine); the private socket directory sits in /tmp, where
// anyone may create names. A runtime running as root that followed a symlink placed there would write,
// truncate, chown or chmod a file of that user's choice (/etc/ld.so.preload): root for anyone. So here
// the last component of a path is never followed (O_NOFOLLOW), a file the runtime rewrites is made
// anew, one it appends to or reads must have no other link (a hard link to a file elsewhere), and
// ownership and mode are set on the open descriptor, not by path.
// The components above it are the operator's (--data-dir's parents, /tmp itself).

import { constants, promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { PgxError } from '../../errors.js';

export interface Owner {
  uid: number;
  gid: number;
}

const { O_WRONLY, O_RDONLY, O_CREAT, O_EXCL, O_APPEND, O_NOFOLLOW, O_DIRECTORY } = constants;

/**
 * Writes `data` as file `path`, `mode` and `owner` set on it: a new file every time (whatever was at
 * the name, a symlink or a hard link included, is unlinked, never written through), made exclusively.
 */
export async function writePrivateFile(path: string, data: string | Buffer, mode: number, owner?: Owner): Promise<void> {
  await fsp.rm(path, { force: true });
  // Exclusive: a name put back between the unlink and the create makes it fail rather than follow.
  await withPlainFile(path, O_WRONLY | O_CREAT | O_EXCL, mode, async (file) => {
    await file.writeFile(data);
    if (owner) await file.chown(owner.uid, owner.gid);
    await file.chmod(mode);
  });
}

/** Appends `data` to the existing file `path`. */
export async function appendPrivateFile(path: string, data: string): Promise<void> {
  await withPlainFile(path, O_WRONLY | O_APPEND, 0, (file) => file.appendFile(data));
}

/** The contents of file `path`, read without following a symlink. */
export async function readPrivateFile(path: string): Promise<string> {
  return withPlainFile(path, O_RDONLY, 0, (file) => file.readFile('utf8'));
}

/**
 * Makes directory `dir` private: mode 0700 and, given one, `owner`. It must be a directory (not a
 * symlink to one) owned by this process's user or by `owner`: anything else was put there by someone
 * else, and is refused rather than adopted.
 */
export async function makeDirectoryPrivate(dir: string, owner?: Owner): Promise<void> {
  const handle = await open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW, 0);
  try {
    const st = await handle.stat();
    if (st.uid !== process.getuid?.() && st.uid !== owner?.uid) {
      throw new PgxError('CONFIG_INVALID', `${dir} belongs to uid ${st.uid}, not to this runtime: someone else made it`, { hint: `Remove ${dir} (check who made it), then start again.` });
    }
    if (owner) await handle.chown(owner.uid, owner.gid);
    await handle.chmod(0o700);
  } finally {
    await handle.close();
  }
}

async function withPlainFile<T>(path: string, flags: number, mode: number, work: (file: FileHandle) => Promise<T>): Promise<T> {
  const file = await openPrivateFile(path, flags, mode);
  try {
    return await work(file);
  } finally {
    await file.close();
  }
}

/**
 * Opens `path` (fs.constants flags) without following a symlink at it, and only if it is a regular
 * file with no other link; the caller closes it.
 */
export async function openPrivateFile(path: string, flags: number, mode: number): Promise<FileHandle> {
  const file = await open(path, flags | O_NOFOLLOW, mode);
  const st = await file.stat().catch(async (err: unknown) => {
    await file.close();
    throw err;
  });
  if (!st.isFile() || st.nlink > 1) {
    await file.close();
    throw new PgxError('CONFIG_INVALID', `${path} is not a plain file of its own (${st.isFile() ? `${st.nlink} links` : 'not a regular file'}): someone else put it there`, { hint: `Remove ${path}, then start again.` });
  }
  return file;
}

/** fsp.open, with a symlink at the last component (ELOOP, or ENOTDIR for a directory) said plainly. */
async function open(path: string, flags: number, mode: number): Promise<FileHandle> {
  try {
    return await fsp.open(path, flags, mode);
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    if (code === 'ELOOP' || ((flags & O_DIRECTORY) !== 0 && code === 'ENOTDIR')) {
      throw new PgxError('CONFIG_INVALID', `${path} is a symlink or not what the runtime made: it is not followed`, { hint: `Remove ${path} (check who made it), then start again.`, cause: err });
    }
    throw err;
  }
}
