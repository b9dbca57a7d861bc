// Runs the real client programs (psql, pgbench, `node bin/pgx.js`) for end-to-end tests, and gives
// the settings to reach the runtime's PostgreSQL directly on its private socket, so a test can compare
// what a client sees through the engine with what it sees from PostgreSQL itself.

import { execFileSync, spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { readdir, readFile, readlink, realpath } from 'node:fs/promises';
import net from 'node:net';
import type { TestRuntime } from './runtime.js';

export interface CommandResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface CommandOptions {
  env?: NodeJS.ProcessEnv;
  cwd?: string;
  input?: string | Buffer;
  /** The child is killed (by its pid) after this long; the result then carries the signal. */
  timeoutMs?: number;
}

/** Runs a program to completion and collects its output. Never rejects on a non-zero exit. */
export function runCommand(cmd: string, args: string[], opts: CommandOptions = {}): Promise<CommandResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, { env: opts.env ?? process.env, cwd: opts.cwd, stdio: ['pipe', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    child.stdin.on('error', () => {});
    child.stdin.end(opts.input ?? '');
    const timer = setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs ?? 60_000);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code, signal) => {
      clearTimeout(timer);
      resolve({ code, signal, stdout: Buffer.concat(out).toString('utf8'), stderr: Buffer.concat(err).toString('utf8') });
    });
  });
}

/** Where the runtime's PostgreSQL listens: its private Unix socket directory and port. */
export function backendAddress(rt: TestRuntime): { socketDir: string; port: number } {
  return rt.runtime.engine.options.backend;
}

/** node-postgres / postgres.js settings that bypass the engine: PostgreSQL's private socket. */
export function directConnection(rt: TestRuntime, database = 'postgres', user = 'postgres'): { host: string; port: number; user: string; database: string } {
  const { socketDir, port } = backendAddress(rt);
  return { host: socketDir, port, user, database };
}

/** psql/pgbench environment that bypasses the engine; otherwise the same as rt.env(). */
export function directEnv(rt: TestRuntime, database = 'postgres', user = 'postgres'): NodeJS.ProcessEnv {
  const { socketDir, port } = backendAddress(rt);
  return { ...rt.env(database, user), PGHOST: socketDir, PGPORT: String(port) };
}

/** A TCP port nobody listens on right now (bound, then released). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = net.createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      const port = typeof address === 'object' && address ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

export interface ProcInfo {
  pid: number;
  ppid: number;
  comm: string;
  /** Its nice value (field 19 of /proc/PID/stat). */
  nice: number;
}

/** A live process's /proc/PID/stat, or undefined if there is none (or a zombie). */
export async function procInfo(pid: number): Promise<ProcInfo | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  const open = text.indexOf('(');
  const close = text.lastIndexOf(')');
  const fields = text.slice(close + 2).split(' ');
  if (fields[0] === 'Z' || fields[0] === 'X') return undefined;
  return { pid, ppid: Number(fields[1]), comm: text.slice(open + 1, close), nice: Number(fields[16]) };
}

/** True while the process exists and is not a zombie. */
export async function processAlive(pid: number): Promise<boolean> {
  return (await procInfo(pid)) !== undefined;
}

/** Live postgres processes working in a data directory (each one chdirs there). */
export async function postgresProcessesIn(dataDir: string): Promise<ProcInfo[]> {
  const dirs = new Set([dataDir, await realpath(dataDir)]);
  const found: ProcInfo[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cwd = await readlink(`/proc/${name}/cwd`).catch(() => undefined);
    if (cwd === undefined || !dirs.has(cwd)) continue;
    const info = await procInfo(Number(name));
    if (info && info.comm === 'postgres') found.push(info);
  }
  return found;
}

/** The postmasters among a data directory's postgres processes: those whose parent is not one of them. */
export async function postmastersIn(dataDir: string): Promise<ProcInfo[]> {
  const all = await postgresProcessesIn(dataDir);
  const pids = new Set(all.map((p) => p.pid));
  return all.filter((p) => !pids.has(p.ppid));
}

/** Polls until `check` holds, or throws naming `what` after `ms`. */
export async function waitFor(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

/** This process's open-file limit (soft and hard), as /proc shows it. */
export function openFileLimit(): { soft: number; hard: number } {
  const line = readFileSync('/proc/self/limits', 'utf8')
    .split('\n')
    .find((l) => l.startsWith('Max open files'));
  const [soft, hard] = (line ?? '').split(/\s+/).slice(3, 5).map((v) => (v === 'unlimited' ? Infinity : Number(v)));
  return { soft: soft ?? 0, hard: hard ?? 0 };
}

/**
 * Raises this process's open-file limit to at least `wanted` with prlimit(1) (util-linux), which can
 * change a running process's limits: up to the hard limit for anyone, beyond it as root. Node has no
 * setrlimit of its own. Returns the soft limit in force afterwards.
 */
export function raiseOpenFileLimit(wanted: number): number {
  const { soft, hard } = openFileLimit();
  if (soft >= wanted) return soft;
  const newHard = hard >= wanted ? hard : wanted;
  try {
    execFileSync('prlimit', ['--pid', String(process.pid), `--nofile=${wanted}:${newHard === Infinity ? 'unlimited' : newHard}`], { stdio: 'ignore' });
  } catch {
    // Not permitted (beyond the hard limit without root) or no prlimit: the caller sees the old limit.
  }
  return openFileLimit().soft;
}
