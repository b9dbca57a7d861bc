// A real `pgx start` in a child process, as a user runs it: the flags given, the ready line it prints
// read back, stopped with Ctrl-C (SIGINT). For tests that need what only a whole process shows (its
// RSS, its ready line, files it writes at start, its environment).

import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { createInterface } from 'node:readline';

const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

export interface RuntimeProcess {
  child: ChildProcess;
  /** The line that starts with "PGX ready". */
  readyLine: string;
  /** SIGINT, then waits for the exit. */
  stop(): Promise<void>;
}

/** Starts `pgx start ...args`; rejects with its stderr if it exits or prints no ready line in time. */
export async function startRuntimeProcess(args: string[], env: NodeJS.ProcessEnv = {}, timeoutMs = 60_000): Promise<RuntimeProcess> {
  const child = spawn(process.execPath, ['bin/pgx.js', 'start', ...args], {
    cwd: ROOT,
    stdio: ['ignore', 'pipe', 'pipe'],
    env: { ...process.env, PGX_CONTAINER: '', PGX_API_TOKEN: '', ...env },
  });
  const err: Buffer[] = [];
  child.stderr!.on('data', (b: Buffer) => err.push(b));
  const readyLine = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`pgx start printed no ready line in ${timeoutMs} ms:\n${Buffer.concat(err).toString()}`)), timeoutMs);
    createInterface({ input: child.stdout! }).on('line', (line) => {
      if (line.startsWith('PGX ready')) {
        clearTimeout(timer);
        resolve(line);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`pgx start exited (${code}):\n${Buffer.concat(err).toString()}`));
    });
  });
  return {
    child,
    readyLine,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    },
  };
}

/** Runs `pgx start ...args` expecting it to fail at start: its exit code and standard error. */
export async function failedStart(args: string[], env: NodeJS.ProcessEnv = {}): Promise<{ code: number | null; stderr: string }> {
  const child = spawn(process.execPath, ['bin/pgx.js', 'start', ...args], { cwd: ROOT, stdio: ['ignore', 'ignore', 'pipe'], env: { ...process.env, PGX_CONTAINER: '', ...env } });
  const err: Buffer[] = [];
  child.stderr!.on('data', (b: Buffer) => err.push(b));
  const code = await new Promise<number | null>((resolve) => child.once('exit', resolve));
  return { code, stderr: Buffer.concat(err).toString() };
}
