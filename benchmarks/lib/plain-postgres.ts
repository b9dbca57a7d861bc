// A stock PostgreSQL 18 (the same embedded binaries the runtime uses, initdb's defaults, none of the
// PGX profile) for comparisons where the runtime's own, tuned PostgreSQL is not the fair baseline:
// memory and idle CPU of "the same databases on plain PostgreSQL". One change from stock: fsync=off,
// so creating a thousand databases takes a minute instead of many; it changes no memory or idle CPU.

import { execFile, spawn } from 'node:child_process';
import { chownSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';
import { systemClock } from '../../src/clock.js';
import { PgxError } from '../../src/errors.js';
import { locatePgBinaries } from '../../src/runtime/postgres/pg-binaries.js';
import { resolvePgOsUser } from '../../src/runtime/postgres/os-user.js';
import type { Cleanup } from './cleanup.js';
import { queryOnce, type Endpoint } from './pg-connect.js';
import { freePort } from './ports.js';

export interface PlainPostgres {
  endpoint: Endpoint;
  dataDir: string;
  /** The postmaster. */
  pid: number;
  version: string;
  settings: string[];
  stop(): Promise<void>;
}

export async function startPlainPostgres(workDir: string, cleanup: Cleanup): Promise<PlainPostgres> {
  const bin = await locatePgBinaries();
  const user = await resolvePgOsUser();
  const asUser = process.getuid?.() === 0 ? { uid: user.uid, gid: user.gid } : {};
  const dataDir = path.join(workDir, 'plain-data');
  const sockDir = path.join(workDir, 'plain-sock');
  for (const d of [dataDir, sockDir]) {
    mkdirSync(d, { mode: 0o700 });
    chownSync(d, user.uid, user.gid);
  }
  const env = { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C' };
  await promisify(execFile)(path.join(bin.binDir, 'initdb'), ['-D', dataDir, '-U', 'postgres', '--auth=trust', '--encoding=UTF8', '--no-sync', '--no-instructions'], {
    ...asUser,
    env,
    cwd: '/',
  });
  const port = await freePort();
  const settings = ['listen_addresses=127.0.0.1', 'fsync=off'];
  const proc = spawn(path.join(bin.binDir, 'postgres'), ['-D', dataDir, '-k', sockDir, '-p', String(port), ...settings.flatMap((s) => ['-c', s])], {
    ...asUser,
    env,
    cwd: '/',
    stdio: ['ignore', 'ignore', 'pipe'],
    detached: true,
  });
  let tail = '';
  proc.stderr?.setEncoding('utf8').on('data', (s: string) => (tail = (tail + s).slice(-3000)));
  let exited = false;
  const exit = new Promise<void>((resolve) => proc.once('exit', () => ((exited = true), resolve())));
  const stop = async (): Promise<void> => {
    if (exited) return;
    proc.kill('SIGINT');
    await Promise.race([exit, sleep(30_000, undefined, { ref: false })]);
    if (!exited) proc.kill('SIGQUIT');
    await exit;
  };
  cleanup.add('plain PostgreSQL', stop);
  const endpoint = { host: '127.0.0.1', port };
  const deadline = systemClock.monotonic() + 60_000;
  for (;;) {
    if (exited) throw new PgxError('INTERNAL', `plain PostgreSQL exited at start: ${tail.trim()}`);
    try {
      await queryOnce(endpoint, 'postgres', 'SELECT 1');
      break;
    } catch (err) {
      if (systemClock.monotonic() > deadline) throw new PgxError('INTERNAL', `plain PostgreSQL did not start: ${(err as Error).message} ${tail.trim()}`);
      await sleep(100);
    }
  }
  return { endpoint, dataDir, pid: proc.pid ?? 0, version: bin.version, settings, stop };
}
