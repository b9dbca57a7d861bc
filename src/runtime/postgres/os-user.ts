// The OS user PostgreSQL runs as. PostgreSQL refuses to run as root, and CI runs as root, so as root we
// run it as an unprivileged system user `pgx` (created on first use); otherwise as ourselves.

import { execFile } from 'node:child_process';
import { constants as fsc, type Stats } from 'node:fs';
import { access, readFile, realpath, stat } from 'node:fs/promises';
import { userInfo } from 'node:os';
import { dirname, resolve, sep } from 'node:path';
import { promisify } from 'node:util';

import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';

const execFileAsync = promisify(execFile);

export interface OsUser {
  uid: number;
  gid: number;
  name: string;
}

/** The system user created for PostgreSQL when we run as root. */
const PG_OS_USER = 'pgx';
/** Used when no user can be created (no useradd) but a distribution package made this one. */
const FALLBACK_OS_USER = 'postgres';

/** The user PostgreSQL should run as: `pgx` (created if absent) when we are root, else ourselves. */
export async function resolvePgOsUser(logger?: Logger): Promise<OsUser> {
  if (process.getuid?.() !== 0) {
    const me = userInfo();
    return { uid: me.uid, gid: me.gid, name: me.username };
  }
  const existing = await lookupUser(PG_OS_USER);
  if (existing) return existing;

  const created = await createSystemUser(PG_OS_USER, logger);
  if (created) return created;

  const fallback = await lookupUser(FALLBACK_OS_USER);
  if (fallback) {
    logger?.warn('pg-os-user-fallback', { user: FALLBACK_OS_USER, reason: `could not create ${PG_OS_USER}` });
    return fallback;
  }
  throw new PgxError('CONFIG_INVALID', `running as root, and there is no unprivileged OS user to run PostgreSQL as`, {
    hint: `Create one (useradd --system --no-create-home --shell /usr/sbin/nologin ${PG_OS_USER}), or run pgx as a non-root user.`,
  });
}

async function createSystemUser(name: string, logger: Logger | undefined): Promise<OsUser | undefined> {
  const args = ['--system', '--no-create-home', '--shell', '/usr/sbin/nologin', name];
  // Non-login root shells may lack /usr/sbin in PATH.
  for (const cmd of ['useradd', '/usr/sbin/useradd']) {
    try {
      await execFileAsync(cmd, args, { timeout: 30_000 });
      logger?.info('pg-os-user-created', { user: name });
      return lookupUser(name);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'ENOENT') continue;
      // Exit 9: created meanwhile by a concurrent pgx; anything else (read-only /etc) falls through.
      const found = await lookupUser(name);
      if (found) return found;
      logger?.warn('pg-os-user-create-failed', { user: name, error: (err as { stderr?: string }).stderr?.trim() ?? String(err) });
      return undefined;
    }
  }
  return undefined;
}

/** The passwd entry for `name` via getent (so NSS sources count), else /etc/passwd. */
async function lookupUser(name: string): Promise<OsUser | undefined> {
  let lines: string[];
  try {
    const { stdout } = await execFileAsync('getent', ['passwd', name], { timeout: 10_000 });
    lines = stdout.split('\n');
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ENOENT') return undefined; // exit 2: no such user
    lines = (await readFile('/etc/passwd', 'utf8')).split('\n');
  }
  for (const line of lines) {
    const [user, , uid, gid] = line.split(':');
    if (user === name && uid !== undefined && gid !== undefined) return { uid: Number(uid), gid: Number(gid), name };
  }
  return undefined;
}

export type PathPurpose = 'data-dir' | 'socket-dir' | 'pg-bin';

function hintFor(purpose: PathPurpose, user: OsUser): string {
  switch (purpose) {
    case 'data-dir':
      return `Choose a --data-dir under a directory the OS user ${user.name} can reach (e.g. /var/lib/pgx); pgx changes permissions only inside its own directories.`;
    case 'socket-dir':
      return `Choose a --socket-dir (or --data-dir) under a directory the OS user ${user.name} can reach (e.g. /run/pgx or /var/lib/pgx); pgx changes permissions only inside its own directories.`;
    case 'pg-bin':
      return `Install pgx (its node_modules) under a directory the OS user ${user.name} can reach, or pass --pg-bin DIR with PostgreSQL binaries that user can run (e.g. /usr/lib/postgresql/18/bin).`;
  }
}

/**
 * Fails unless `user` can reach `path`: every existing directory on the way (as written and after
 * resolving symlinks) must be searchable by it, and `path`, if it is a file, executable. Components that
 * do not exist yet are the caller's to create.
 */
export async function assertReachable(path: string, user: OsUser, purpose: PathPurpose): Promise<void> {
  if (user.uid === 0) return;
  const target = resolve(path);
  const existing = await deepestExisting(target);
  const chain = new Set([...componentsOf(existing), ...componentsOf(await realpath(existing))]);
  // Not switching users: ask the kernel, which knows our groups and ACLs. Switching (we are root):
  // check the mode bits against uid and primary gid only, because spawning with a uid drops the
  // supplementary groups (libuv calls setgroups(0)) and ACLs are rare on such paths.
  const self = user.uid === process.getuid?.();
  for (const p of chain) {
    const st = await stat(p);
    if (!st.isDirectory() && p !== target) continue;
    const ok = self ? await access(p, fsc.X_OK).then(() => true, () => false) : permitsExecute(st, user);
    if (!ok) throw unreachable(p, st, st.isDirectory() ? 'search' : 'execute', path, user, purpose);
  }
}

function unreachable(p: string, st: Stats, what: string, path: string, user: OsUser, purpose: PathPurpose): PgxError {
  const mode = (st.mode & 0o7777).toString(8).padStart(4, '0');
  return new PgxError(
    'CONFIG_INVALID',
    `PostgreSQL runs as OS user ${user.name} (uid ${user.uid}), which cannot ${what} ${p} (mode ${mode}, owner uid ${st.uid} gid ${st.gid}), so it cannot use ${path}`,
    { hint: hintFor(purpose, user) },
  );
}

/** The execute (search) bit of the class `user` falls in: owner, else group, else other. */
function permitsExecute(st: Stats, user: OsUser): boolean {
  if (st.uid === user.uid) return (st.mode & 0o100) !== 0;
  if (st.gid === user.gid) return (st.mode & 0o010) !== 0;
  return (st.mode & 0o001) !== 0;
}

async function deepestExisting(p: string): Promise<string> {
  for (let cur = p; ; cur = dirname(cur)) {
    if (await stat(cur).then(() => true, () => false)) return cur;
    if (dirname(cur) === cur) return cur;
  }
}

/** '/a/b/c' -> ['/', '/a', '/a/b', '/a/b/c']. */
function componentsOf(abs: string): string[] {
  const out: string[] = [sep];
  let cur = '';
  for (const part of abs.split(sep)) {
    if (!part) continue;
    cur += sep + part;
    out.push(cur);
  }
  return out;
}
