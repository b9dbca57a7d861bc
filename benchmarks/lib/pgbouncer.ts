// PgBouncer, the anchor: session pooling in front of the same PostgreSQL socket the engine uses, trust
// authentication, a loopback TCP port and its own Unix socket. PgBouncer refuses to run as root, so as
// root it runs as the runtime's unprivileged OS user (which can also reach PostgreSQL's private socket).

import { spawn } from 'node:child_process';
import { chownSync, mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../../src/clock.js';
import { PgxError } from '../../src/errors.js';
import { resolvePgOsUser } from '../../src/runtime/postgres/os-user.js';
import type { Cleanup } from './cleanup.js';
import { runCommand } from './exec.js';
import { freePort } from './ports.js';
import { clientEnv, type Target } from './target.js';

export interface PgBouncerOptions {
  workDir: string;
  pgSocketDir: string;
  pgPort: number;
  poolSize: number;
  transport: 'tcp' | 'unix';
  /** Users allowed on the admin console (database `pgbouncer`), e.g. for KILL db; none unless given. */
  adminUsers?: string[];
  /** server_lifetime in seconds; 0 uses each server connection once, so every client gets a fresh login. */
  serverLifetime?: number;
}

export interface RunningPgBouncer {
  target: Target;
  pid: number;
  version: string;
}

const READY_TIMEOUT_MS = 15_000;

export async function pgbouncerVersion(): Promise<string> {
  const result = await runCommand('pgbouncer', ['--version'], { env: process.env });
  if (result.code !== 0) {
    throw new PgxError('CONFIG_INVALID', 'pgbouncer --version failed', { hint: 'Install PgBouncer: apt-get install -y pgbouncer.' });
  }
  return result.stdout.split('\n')[0]!.trim();
}

/** pgbouncer.ini for `opts`, with its files in `dir` (also written by benchmarks/profile-engine.sh). */
export function pgbouncerConfig(opts: PgBouncerOptions, dir: string, port: number): string {
  return [
    '[databases]',
    `* = host=${opts.pgSocketDir} port=${opts.pgPort}`,
    '[pgbouncer]',
    'listen_addr = 127.0.0.1',
    `listen_port = ${port}`,
    `unix_socket_dir = ${dir}`,
    'auth_type = trust',
    `auth_file = ${path.join(dir, 'userlist.txt')}`,
    ...(opts.adminUsers?.length ? [`admin_users = ${opts.adminUsers.join(', ')}`] : []),
    'pool_mode = session',
    'max_client_conn = 2000',
    `default_pool_size = ${opts.poolSize}`,
    ...(opts.serverLifetime !== undefined ? [`server_lifetime = ${opts.serverLifetime}`] : []),
    'ignore_startup_parameters = extra_float_digits',
    // The engine logs nothing per connection in this benchmark; neither should PgBouncer.
    'log_connections = 0',
    'log_disconnections = 0',
    'log_stats = 0',
    '',
  ].join('\n');
}

export async function startPgBouncer(opts: PgBouncerOptions, cleanup: Cleanup): Promise<RunningPgBouncer> {
  const version = await pgbouncerVersion();
  const user = await resolvePgOsUser();
  const dir = path.join(opts.workDir, 'pgbouncer');
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const port = await freePort();
  const ini = path.join(dir, 'pgbouncer.ini');
  writeFileSync(ini, pgbouncerConfig(opts, dir, port));
  writeFileSync(path.join(dir, 'userlist.txt'), '"postgres" ""\n');
  for (const f of [dir, ini, path.join(dir, 'userlist.txt')]) chownSync(f, user.uid, user.gid);

  const isRoot = process.getuid?.() === 0;
  const proc = spawn('pgbouncer', [ini], {
    cwd: dir,
    stdio: ['ignore', 'ignore', 'pipe'],
    // Its own process group: a terminal's Ctrl-C reaches us, and we stop it in order.
    detached: true,
    ...(isRoot ? { uid: user.uid, gid: user.gid } : {}),
  });
  let stderr = '';
  proc.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr = (stderr + s).slice(-4000)));
  let exited = false;
  const exit = new Promise<void>((resolve) => proc.once('exit', () => ((exited = true), resolve())));
  proc.once('error', (err) => {
    stderr += `\nspawn failed: ${err.message}`;
  });
  cleanup.add('PgBouncer', async () => {
    if (exited || proc.pid === undefined) return;
    proc.kill('SIGTERM');
    await Promise.race([exit, sleep(5000)]);
    if (!exited) proc.kill('SIGKILL');
    await exit;
  });

  const target: Target = opts.transport === 'tcp' ? { name: 'pgbouncer', host: '127.0.0.1', port } : { name: 'pgbouncer', host: dir, port };
  const deadline = systemClock.monotonic() + READY_TIMEOUT_MS;
  for (;;) {
    if (exited) throw new PgxError('INTERNAL', `PgBouncer exited at start: ${stderr.trim()}`, { hint: `Its config is ${ini}.` });
    const probe = await runCommand('psql', ['-XAtqc', 'SELECT 1'], { env: clientEnv(target, 'postgres') });
    if (probe.code === 0) break;
    if (systemClock.monotonic() > deadline) {
      throw new PgxError('INTERNAL', `PgBouncer did not answer SELECT 1 within ${READY_TIMEOUT_MS / 1000} s: ${probe.stderr.trim()} ${stderr.trim()}`);
    }
    await sleep(100);
  }
  return { target, pid: proc.pid ?? 0, version };
}
