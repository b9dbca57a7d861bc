// Runs the client programs a benchmark drives (pgbench, psql) and times them. Every child started here
// is remembered until it exits, so an interrupted run can kill whatever is still going.

import { spawn, type ChildProcess } from 'node:child_process';
import { openSync, closeSync } from 'node:fs';
import { systemClock } from '../../src/clock.js';
import { PgxError } from '../../src/errors.js';

export interface CommandResult {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Wall time from spawn to exit. */
  ms: number;
}

export interface CommandOptions {
  env: NodeJS.ProcessEnv;
  /** Send stdout to /dev/null instead of capturing it (large result sets). */
  discardStdout?: boolean;
}

const running = new Set<ChildProcess>();

/** Runs a program to completion; never rejects for a non-zero exit (the caller decides). */
export function runCommand(cmd: string, args: string[], opts: CommandOptions): Promise<CommandResult> {
  const devNull = opts.discardStdout ? openSync('/dev/null', 'w') : undefined;
  const started = systemClock.monotonic();
  const child = spawn(cmd, args, { env: opts.env, stdio: ['ignore', devNull ?? 'pipe', 'pipe'] });
  running.add(child);
  let stdout = '';
  let stderr = '';
  child.stdout?.setEncoding('utf8').on('data', (s: string) => (stdout += s));
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  return new Promise((resolve, reject) => {
    child.once('error', (err) => {
      running.delete(child);
      if (devNull !== undefined) closeSync(devNull);
      reject(new PgxError('CONFIG_INVALID', `cannot run ${cmd}: ${err.message}`, { hint: `Install ${cmd} (Debian: apt-get install -y postgresql-client pgbouncer).`, cause: err }));
    });
    child.once('close', (code) => {
      const ms = systemClock.monotonic() - started;
      running.delete(child);
      if (devNull !== undefined) closeSync(devNull);
      resolve({ code, stdout, stderr, ms });
    });
  });
}

/** Like runCommand, but a non-zero exit is an error carrying the program's stderr. */
export async function runChecked(cmd: string, args: string[], opts: CommandOptions): Promise<CommandResult> {
  const result = await runCommand(cmd, args, opts);
  if (result.code !== 0) {
    throw new PgxError('INTERNAL', `${cmd} ${args.join(' ')} failed (exit ${result.code}): ${result.stderr.trim().slice(-2000)}`);
  }
  return result;
}

/** Kills every client program still running (interrupted benchmark). */
export function killRunningCommands(): void {
  for (const child of running) child.kill('SIGKILL');
  running.clear();
}
