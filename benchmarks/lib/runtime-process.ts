// A PGX runtime as its own process (`node bin/pgx.js start ...`), as it runs in production. The mint,
// burst, density and churn benchmarks use it rather than startRuntime() in this process, because they
// measure the runtime's memory and CPU (PSS and /proc times of node plus every postgres process) and
// the benchmark's own clients must not be part of that tree. Flags are pgx start's own; the defaults
// are the runtime's defaults unless a benchmark passes something else. With runtime 'bun' the same
// bin/pgx.js runs under Bun (no flag needed: the code base is the same), started directly so
// the pid is Bun's own (the overhead benchmark's pgx-bun target reads its CPU); no heap probe there.

import { spawn, type ChildProcess } from 'node:child_process';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { ApiClient } from '../../src/api/client.js';
import { bunBinary } from './bun-binary.js';
import { systemClock } from '../../src/clock.js';
import { PgxError } from '../../src/errors.js';
import type { Cleanup } from './cleanup.js';
import type { HeapReport } from './heap-probe.js';
import { packageRoot } from './paths.js';
import type { Endpoint } from './pg-connect.js';
import { portInUse } from './ports.js';
import { privateSocketDir } from './runtime.js';

/** The status document, as the API client types it (not imported from src/runtime, which may move). */
type RuntimeStatus = Awaited<ReturnType<ApiClient['status']>>;

/** start.ts's PG_PORT: the runtime's PostgreSQL listens on it (socket name, and TCP when asked). */
const PG_PORT = 5432;
const READY_TIMEOUT_MS = 180_000;
const STOP_TIMEOUT_MS = 60_000;

export interface RuntimeProcessOptions {
  /** The runtime's data directory lives here; the directory must be reachable by the `pgx` OS user. */
  workDir: string;
  /** Extra `pgx start` flags, e.g. ['--pool-size', '0']. */
  flags?: string[];
  /** Give PostgreSQL a 127.0.0.1:5432 listener, so direct clients use TCP like clients of the engine. */
  tcpPostgres?: boolean;
  /** The engine's Unix socket directory (--socket-dir); none unless given. */
  socketDir?: string;
  /** Another built checkout to run (bin/pgx.js under it), for an A/B of two commits; default this one. */
  root?: string;
  /** Each line the runtime writes to stderr (its JSON log), e.g. to read PostgreSQL's statement durations. */
  onStderrLine?: (line: string) => void;
  /** The JavaScript runtime that runs pgx start: this Node.js (default), or Bun (no heap probe). */
  runtime?: 'node' | 'bun';
}

export interface RuntimeProcess {
  /** The node (or bun) process; PostgreSQL's processes are below it. */
  pid: number;
  engine: Endpoint;
  /** The engine's Unix socket, when started with socketDir. */
  engineSocket: Endpoint | null;
  /** PostgreSQL directly: TCP when tcpPostgres, else its private socket. */
  postgres: Endpoint;
  /** PostgreSQL's private Unix socket (there whether or not it also listens on TCP). */
  postgresSocket: Endpoint;
  api: ApiClient;
  dataDir: string;
  /** The flags it was started with. */
  flags: string[];
  /** The postmaster's pid, from postmaster.pid. */
  postmasterPid(): number;
  /** The node process's V8 heap after a full GC (see heap-probe.ts). */
  heap(): Promise<HeapReport>;
  stop(): Promise<void>;
}

function distFile(rel: string): string {
  return path.join(path.dirname(fileURLToPath(import.meta.url)), rel);
}

export async function startRuntimeProcess(opts: RuntimeProcessOptions, cleanup: Cleanup): Promise<RuntimeProcess> {
  const dataDir = path.join(opts.workDir, 'data');
  if (opts.tcpPostgres && (await portInUse(PG_PORT))) {
    throw new PgxError('CONFIG_INVALID', `127.0.0.1:${PG_PORT} is taken, and the runtime's PostgreSQL can only listen there`, {
      hint: 'Stop the server on port 5432 (another benchmark still running?).',
    });
  }
  const flags = [
    '--data-dir', dataDir, '--host', '127.0.0.1', '--port', '0', '--socket-dir', opts.socketDir ?? '', '--auth', 'trust', '--api-port', '0',
    ...(opts.tcpPostgres ? ['-c', 'listen_addresses=127.0.0.1'] : []),
    ...(opts.flags ?? []),
  ];
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG')) env[k] = v;
  const pgxBin = path.join(opts.root ?? packageRoot(), 'bin', 'pgx.js');
  const onBun = opts.runtime === 'bun';
  const [execPath, args] = onBun
    ? [bunBinary(), [pgxBin, 'start', ...flags]]
    : [process.execPath, ['--expose-gc', '--import', distFile('heap-probe.js'), pgxBin, 'start', ...flags]];
  const child: ChildProcess = spawn(execPath, args, { stdio: ['ignore', 'pipe', 'pipe', 'ipc'], env });
  let tail = '';
  let stdout = '';
  let partLine = '';
  child.stderr?.setEncoding('utf8').on('data', (s: string) => {
    tail = (tail + s).slice(-4000);
    if (!opts.onStderrLine) return;
    const lines = (partLine + s).split('\n');
    partLine = lines.pop()!;
    for (const line of lines) opts.onStderrLine(line);
  });
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once('exit', () => ((exited = true), resolve())));
  child.on('message', () => undefined);

  const postmasterPid = (): number => Number(readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n', 1)[0]);
  let pgSocketDir: string | undefined;
  const stop = async (): Promise<void> => {
    if (exited) return;
    if (child.connected) child.disconnect();
    child.kill('SIGTERM');
    // Unref'd: a pending timer would keep the benchmark alive for the whole deadline after a quick stop.
    await Promise.race([exit, sleep(STOP_TIMEOUT_MS, undefined, { ref: false })]);
    if (!exited) {
      // Stuck: take PostgreSQL down too (its own process group), then node.
      try {
        process.kill(postmasterPid(), 'SIGQUIT');
      } catch {
        // Already gone.
      }
      child.kill('SIGKILL');
      await exit;
    }
    // A runtime stopped by force leaves its PostgreSQL socket directory (known once it was ready).
    if (pgSocketDir !== undefined) rmSync(pgSocketDir, { recursive: true, force: true });
  };
  cleanup.add(`PGX runtime in ${opts.workDir}`, stop);

  const deadline = systemClock.monotonic() + READY_TIMEOUT_MS;
  let ready: RegExpExecArray | null = null;
  while (!(ready = /PGX ready: postgresql:\/\/postgres@127\.0\.0\.1:(\d+)\/postgres .*API (http:\/\/127\.0\.0\.1:\d+)\/v1/.exec(stdout))) {
    if (exited) throw new PgxError('INTERNAL', `pgx start exited before it was ready: ${tail.trim().slice(-1500)}`);
    if (systemClock.monotonic() > deadline) throw new PgxError('INTERNAL', `pgx start was not ready within ${READY_TIMEOUT_MS / 1000} s: ${tail.trim().slice(-1500)}`);
    await sleep(50);
  }
  pgSocketDir = privateSocketDir(dataDir);
  const heap = (): Promise<HeapReport> =>
    new Promise((resolve, reject) => {
      if (onBun) return reject(new PgxError('INTERNAL', 'the heap probe runs on Node.js only (the runtime runs on Bun)'));
      const timer = setTimeout(() => reject(new PgxError('INTERNAL', 'the runtime did not answer the heap probe')), 30_000);
      child.once('message', (m) => {
        clearTimeout(timer);
        resolve(m as HeapReport);
      });
      child.send('heap');
    });
  return {
    pid: child.pid ?? 0,
    engine: { host: '127.0.0.1', port: Number(ready[1]) },
    engineSocket: opts.socketDir ? { host: opts.socketDir, port: Number(ready[1]) } : null,
    postgres: opts.tcpPostgres ? { host: '127.0.0.1', port: PG_PORT } : { host: pgSocketDir, port: PG_PORT },
    postgresSocket: { host: pgSocketDir, port: PG_PORT },
    api: new ApiClient({ url: ready[2]!, timeoutMs: 120_000 }),
    dataDir,
    flags,
    postmasterPid,
    heap,
    stop,
  };
}

/**
 * Waits until every sealed template's warm pool is full again (refills run in the background), or,
 * given `stallMs`, has made no spare for that long.
 */
export async function waitForPool(rt: RuntimeProcess, maxMs = 120_000, stallMs: number | null = null): Promise<void> {
  const deadline = systemClock.monotonic() + maxMs;
  let refills = -1;
  let since = systemClock.monotonic();
  for (;;) {
    const pools = Object.values((await rt.api.status()).pool);
    if (pools.every((p) => p.ready >= p.size)) return;
    // A pool that made no spare for `stallMs` is held where it is by the runtime (warm-pool.ts: where
    // files are copied, a grown pool's extra spares stop at a tenth of the free space).
    const made = pools.reduce((sum, p) => sum + p.refills, 0);
    if (made !== refills) [refills, since] = [made, systemClock.monotonic()];
    else if (stallMs !== null && systemClock.monotonic() - since > stallMs) return;
    if (systemClock.monotonic() > deadline) throw new PgxError('INTERNAL', `the warm pool did not refill within ${maxMs / 1000} s`);
    await sleep(25);
  }
}

/** Polls the status document until `done` holds for it; `what` names the wait in the error. */
export async function untilStatus(rt: RuntimeProcess, done: (s: RuntimeStatus) => boolean, what: string, maxMs = 300_000, pollMs = 100): Promise<RuntimeStatus> {
  const deadline = systemClock.monotonic() + maxMs;
  let s = await rt.api.status();
  while (!done(s)) {
    if (systemClock.monotonic() > deadline) throw new PgxError('INTERNAL', `${what}: not within ${maxMs / 1000} s`);
    await sleep(pollMs);
    s = await rt.api.status();
  }
  return s;
}
