// psql as a client: one value from a query, and the wall time of reading a whole result to /dev/null.

import { PgxError } from '../../src/errors.js';
import { runChecked, runCommand } from './exec.js';
import { clientEnv, type Target } from './target.js';

export async function psqlValue(target: Target, sql: string, database?: string): Promise<string> {
  return (await runChecked('psql', ['-XAtqc', sql], { env: clientEnv(target, database) })).stdout.trim();
}

/** Seconds for `psql -Atc SQL > /dev/null`: connect, run, receive every row, print it. */
export async function timeScan(target: Target, sql: string): Promise<number> {
  const result = await runCommand('psql', ['-XAtc', sql], { env: clientEnv(target), discardStdout: true });
  if (result.code !== 0) {
    throw new PgxError('INTERNAL', `psql scan through ${target.name} failed (exit ${result.code}): ${result.stderr.trim().slice(-1500)}`);
  }
  return result.ms / 1000;
}
