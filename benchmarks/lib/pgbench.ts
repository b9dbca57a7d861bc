// pgbench: initialising the scale-10 data set, and one fixed-work run (-t N per client) with its tps.

import { PgxError } from '../../src/errors.js';
import { runChecked, runCommand } from './exec.js';
import { clientEnv, type Target } from './target.js';

export interface PgbenchRun {
  clients: number;
  threads: number;
  protocol: 'simple' | 'prepared';
  /** -C: a new connection for every transaction. */
  connectEach: boolean;
  /** -t: transactions per client (fixed work), or -T seconds when `seconds` is set instead. */
  transactionsPerClient?: number;
  seconds?: number;
}

export interface PgbenchResult {
  tps: number;
  processed: number;
  latencyMs: number;
  /** Wall time of the pgbench process, connections included. */
  wallMs: number;
}

export async function pgbenchVersion(): Promise<string> {
  return (await runChecked('pgbench', ['--version'], { env: process.env })).stdout.trim();
}

/** pgbench -i -s SCALE, then VACUUM ANALYZE so no run pays for it (runs use -n). */
export async function initPgbench(target: Target, scale: number): Promise<void> {
  await runChecked('pgbench', ['-i', '-q', '-s', String(scale)], { env: clientEnv(target) });
  await runChecked('psql', ['-XAtqc', 'VACUUM ANALYZE'], { env: clientEnv(target) });
}

export function pgbenchArgs(run: PgbenchRun): string[] {
  const args = ['-n', '-S', '-M', run.protocol, '-c', String(run.clients), '-j', String(run.threads)];
  if (run.connectEach) args.push('-C');
  if (run.seconds !== undefined) args.push('-T', String(run.seconds));
  else args.push('-t', String(run.transactionsPerClient ?? 1000));
  return args;
}

export async function runPgbench(target: Target, run: PgbenchRun): Promise<PgbenchResult> {
  const args = pgbenchArgs(run);
  const result = await runCommand('pgbench', args, { env: clientEnv(target) });
  const out = result.stdout;
  const tps = /^tps = ([\d.]+)/m.exec(out);
  const processed = /^number of transactions actually processed: (\d+)(?:\/(\d+))?/m.exec(out);
  const latency = /^latency average = ([\d.]+) ms/m.exec(out);
  const failed = /^number of failed transactions: (\d+)/m.exec(out);
  const complete = processed && (processed[2] === undefined || processed[1] === processed[2]);
  if (result.code !== 0 || !tps || !processed || !complete || (failed && failed[1] !== '0')) {
    throw new PgxError('INTERNAL', `pgbench ${args.join(' ')} against ${target.name} failed (exit ${result.code}): ${(result.stderr + out).trim().slice(-1500)}`);
  }
  return { tps: Number(tps[1]), processed: Number(processed[1]), latencyMs: latency ? Number(latency[1]) : NaN, wallMs: result.ms };
}
