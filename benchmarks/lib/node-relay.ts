// Starts node-relay-main.ts, the bare relay, as the overhead benchmark's `relay` target (run by this
// Node.js) or `bun-relay` target (run by Bun, from its npm package, bun-binary.ts): its
// own process (so its CPU is read from /proc like PgBouncer's, and none of the benchmark's is in it),
// in front of PostgreSQL's Unix socket as the engine and PgBouncer are. It listens on 127.0.0.1 (a port
// the kernel picks, so no race as with freePort()) or, for --transport unix, on a Unix socket in its
// own directory.

import { spawn } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { bunBinary } from './bun-binary.js';
import { PgxError } from '../../src/errors.js';
import type { Cleanup } from './cleanup.js';
import { runCommand } from './exec.js';
import type { Transport } from './runtime.js';
import type { Target } from './target.js';
import { clientEnv } from './target.js';

export interface NodeRelayOptions {
  workDir: string;
  pgSocketDir: string;
  pgPort: number;
  transport: Transport;
  /** The runtime that runs the relay: this Node.js, or Bun. */
  runtime: 'node' | 'bun';
  /** Run the bare session pooler (node-pooler-main.ts, the `pooler` target) instead of the relay; TCP on Node only. */
  pooler?: boolean;
}

export interface RunningNodeRelay {
  target: Target;
  pid: number;
  /** Accepted sockets read with onread (Node), or through 'data' events (Bun: see node-relay-main.ts). */
  onread: boolean;
}

const READY_TIMEOUT_MS = 15_000;
/** Names the relay's Unix socket (.s.PGSQL.N) in its own directory; any number would do. */
const UNIX_PORT = 5432;

export async function startNodeRelay(opts: NodeRelayOptions, cleanup: Cleanup): Promise<RunningNodeRelay> {
  const backend = path.join(opts.pgSocketDir, `.s.PGSQL.${opts.pgPort}`);
  if (opts.pooler && (opts.runtime !== 'node' || opts.transport !== 'tcp')) {
    throw new PgxError('CONFIG_INVALID', 'the pooler target runs on Node over TCP only', { hint: 'Leave out --transport unix, or pooler.' });
  }
  const name = opts.pooler ? 'pooler' : opts.runtime === 'bun' ? 'bun-relay' : 'relay';
  const label = opts.pooler ? 'Node pooler' : opts.runtime === 'bun' ? 'Bun relay' : 'Node relay';
  const execPath = opts.runtime === 'bun' ? bunBinary() : process.execPath;
  const dir = path.join(opts.workDir, name);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const listenAt = opts.transport === 'tcp' ? '127.0.0.1' : path.join(dir, `.s.PGSQL.${UNIX_PORT}`);
  const main = path.join(path.dirname(fileURLToPath(import.meta.url)), opts.pooler ? 'node-pooler-main.js' : 'node-relay-main.js');
  // Its own process group, as PgBouncer: a terminal's Ctrl-C reaches us, and we stop it in order.
  const child = spawn(execPath, [main, backend, listenAt], { stdio: ['ignore', 'ignore', 'pipe', 'ipc'], detached: true });
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr = (stderr + s).slice(-4000)));
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once('exit', () => ((exited = true), resolve())));
  child.once('error', (err) => {
    stderr += `\nspawn failed: ${err.message}`;
  });
  cleanup.add(label, async () => {
    if (exited || child.pid === undefined) return;
    if (child.connected) child.disconnect();
    child.kill('SIGTERM');
    await Promise.race([exit, sleep(5000)]);
    if (!exited) child.kill('SIGKILL');
    await exit;
  });

  const { port, onread } = await new Promise<{ port: number; onread: boolean }>((resolve, reject) => {
    const timer = setTimeout(() => reject(new PgxError('INTERNAL', `the ${label} did not listen within ${READY_TIMEOUT_MS / 1000} s: ${stderr.trim()}`)), READY_TIMEOUT_MS);
    child.once('message', (m) => {
      clearTimeout(timer);
      resolve(m as { port: number; onread: boolean });
    });
    void exit.then(() => {
      clearTimeout(timer);
      reject(new PgxError('INTERNAL', `the ${label} exited at start: ${stderr.trim()}`, { hint: `Run: ${execPath} ${main} ${backend} ${listenAt}` }));
    });
  });
  const target: Target = opts.transport === 'tcp' ? { name, host: '127.0.0.1', port } : { name, host: dir, port: UNIX_PORT };
  const probe = await runCommand('psql', ['-XAtqc', 'SELECT 1'], { env: clientEnv(target, 'postgres') });
  if (probe.code !== 0) throw new PgxError('INTERNAL', `SELECT 1 through the ${label} failed: ${probe.stderr.trim()} ${stderr.trim()}`);
  return { target, pid: child.pid ?? 0, onread };
}
