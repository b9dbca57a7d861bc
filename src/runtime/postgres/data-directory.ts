// The data directory before PostgreSQL starts: the data and socket directories made and owned by the
// OS user PostgreSQL runs as, initdb on first start (UTF8, no locale, no data checksums), and the PGX
// profile (profile/pgx.conf) copied in at every start, as CloudNativePG's instance manager has initdb.go.

import { spawn, type SpawnOptions } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chmod, lchown, mkdir, readdir, readFile, stat } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { describeExit, type Exit, type LogPipe } from './log-pipe.js';
import { assertReachable, type OsUser } from './os-user.js';
import { appendPrivateFile, makeDirectoryPrivate, readPrivateFile, writePrivateFile } from './private-files.js';

const PROFILE_FILE = 'pgx.conf';

/** What the data-directory work needs from the supervisor. */
export interface DataDirectory {
  dataDir: string;
  socketDir: string;
  binDir: string;
  osUser: OsUser;
  /** Whether PostgreSQL runs as another user (we are root): directories are then chowned to it. */
  switchUser: boolean;
  logs: LogPipe;
  log: Logger;
  clock: Clock;
  /** How PostgreSQL's programs are spawned (user, environment, cwd). */
  spawnOptions(signal?: AbortSignal): SpawnOptions;
}

/** Everything before `postgres` may start: directories, initdb if the cluster is new, the profile. */
export async function prepareDataDirectory(d: DataDirectory, signal: AbortSignal): Promise<void> {
  await prepareDirectories(d);
  if (!existsSync(join(d.dataDir, 'PG_VERSION'))) await initdb(d, signal);
  await installProfile(d);
}

async function prepareDirectories(d: DataDirectory): Promise<void> {
  const { osUser } = d;
  await prepareDataDir(d);
  // The socket directory, in /tmp: made by this runtime (start-plan.ts) and never adopted from anyone
  // else, nor followed through a symlink (private-files.ts).
  try {
    await mkdir(dirname(d.socketDir), { recursive: true, mode: 0o755 });
    await mkdir(d.socketDir, { mode: 0o700 }).catch((err: NodeJS.ErrnoException) => {
      if (err.code !== 'EEXIST') throw err;
    });
    await makeDirectoryPrivate(d.socketDir, d.switchUser ? osUser : undefined);
  } catch (err) {
    if (err instanceof PgxError) throw err;
    throw new PgxError('CONFIG_INVALID', `cannot prepare PostgreSQL's socket directory ${d.socketDir}: ${(err as Error).message}`, {
      hint: 'Point TMPDIR at a directory this process can create in.',
      cause: err,
    });
  }
  await assertReachable(d.socketDir, osUser, 'socket-dir');
  await assertReachable(join(d.binDir, 'postgres'), osUser, 'pg-bin');
  await assertReachable(join(d.binDir, 'initdb'), osUser, 'pg-bin');
}

/** The data directory: made if missing, owned by the OS user (chowned if it was another's), 0700. */
async function prepareDataDir(d: DataDirectory): Promise<void> {
  const { dataDir: dir, osUser } = d;
  // Before creating anything: a path the OS user cannot reach is the user's to move, not ours to fix.
  await assertReachable(dir, osUser, 'data-dir');
  try {
    await mkdir(dirname(dir), { recursive: true, mode: 0o755 });
    await mkdir(dir, { recursive: true, mode: 0o700 });
    if (d.switchUser) {
      const st = await stat(dir);
      if (st.uid !== osUser.uid || st.gid !== osUser.gid) {
        // Ours to fix: e.g. a data dir initialised earlier for another user (postgres vs pgx).
        d.log.info('postgres-chown', { dir, user: osUser.name });
        await chownTree(dir, osUser.uid, osUser.gid);
      }
    }
    // PostgreSQL insists on 0700 (or 0750) for the data directory.
    await chmod(dir, 0o700);
  } catch (err) {
    throw new PgxError('CONFIG_INVALID', `cannot prepare ${dir}: ${(err as Error).message}`, {
      hint: 'Choose a --data-dir this process can create and own.',
      cause: err,
    });
  }
  await assertReachable(dir, osUser, 'data-dir');
}

async function initdb(d: DataDirectory, signal: AbortSignal): Promise<void> {
  const started = d.clock.monotonic();
  d.log.info('initdb', { dataDir: d.dataDir, user: d.osUser.name });
  const args = [
    '-D', d.dataDir, '-U', 'postgres', '--encoding=UTF8', '--no-locale', '--auth=trust',
    // The profile turns fsync off anyway; syncing a fresh cluster would only cost seconds.
    '--no-sync', '--no-instructions',
    // PostgreSQL 18 enables checksums by default. With fsync off we have already accepted that a
    // machine crash can corrupt this disposable cluster; checksums would cost CPU on every page
    // moved between shared buffers and the OS and protect nothing we keep.
    '--no-data-checksums',
  ];
  const proc = spawn(join(d.binDir, 'initdb'), args, d.spawnOptions(signal));
  d.logs.pipe(proc, (line) => d.log.debug('initdb', { line }));
  const exit = await new Promise<Exit & { error?: Error }>((res) => {
    proc.once('error', (error) => res({ code: null, signal: null, error }));
    proc.once('close', (code, sig) => res({ code, signal: sig }));
  });
  signal.throwIfAborted();
  if (exit.code !== 0) {
    throw new PgxError('POSTGRES_FAILED', `initdb failed (${describeExit(exit)}): ${d.logs.tail(8)}`, {
      hint: `initdb needs an empty --data-dir; remove ${d.dataDir} if it is the leftover of a failed first start.`,
      cause: exit.error,
    });
  }
  d.log.info('initdb-done', { dataDir: d.dataDir, ms: Math.round(d.clock.monotonic() - started) });
}

/** Copies the profile in at every start (so updates apply) and includes it from postgresql.conf once. */
async function installProfile(d: DataDirectory): Promise<void> {
  // Files the OS user owns, written as root when the runtime runs as root: never through a symlink.
  await writePrivateFile(join(d.dataDir, PROFILE_FILE), await readFile(profilePath()), 0o600, d.switchUser ? d.osUser : undefined);
  const conf = join(d.dataDir, 'postgresql.conf');
  if (!/^\s*include_if_exists\s*=\s*'pgx\.conf'/m.test(await readPrivateFile(conf))) {
    await appendPrivateFile(conf, `\n# Added by pgx: its PostgreSQL profile, refreshed from the pgx package at every start.\ninclude_if_exists = '${PROFILE_FILE}'\n`);
  }
}

async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await lchown(dir, uid, gid);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(p, uid, gid);
    else await lchown(p, uid, gid);
  }
}

/** src/runtime/postgres/profile/pgx.conf of this package; compiled code runs from dist/src/runtime/postgres/. */
export function profilePath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    if (dirname(dir) === dir) {
      throw new PgxError('INTERNAL', 'cannot find the pgx package root above ' + fileURLToPath(import.meta.url), {
        hint: 'Reinstall pgx; its package.json and src/runtime/postgres/profile/pgx.conf must ship together.',
      });
    }
    dir = dirname(dir);
  }
  return join(dir, 'src', 'runtime', 'postgres', 'profile', PROFILE_FILE);
}
