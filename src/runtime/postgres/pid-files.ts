// The pid files in the data and socket directories, and the predecessor they reveal: ours
// (pgx-owner.pid keeps two runtimes off one data directory), PostgreSQL's postmaster.pid and socket
// lock (left behind by a runtime killed with SIGKILL, whose postmaster may still run: it is stopped,
// and its backends waited for, before a new one starts). As CloudNativePG's instance manager has pidfile.go.

import { existsSync } from 'node:fs';
import { readFile, realpath, rm } from 'node:fs/promises';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { socketPath } from '../../wire/socket-path.js';
import { writePrivateFile } from './private-files.js';
import { cmdlineOf, commOf, cwdOf, isAlive, postgresProcessesIn, procStat, sendSignal } from './proc.js';

/** Our marker in the data directory: which runtime process (pid and start time) owns it. */
const OWNER_FILE = 'pgx-owner.pid';
/** An orphaned postmaster (not our child) gets this long for fast shutdown before SIGQUIT. */
const ORPHAN_FAST_MS = 10_000;
/** SIGQUIT (immediate shutdown), then SIGKILL, each get this long. */
const ORPHAN_QUIT_MS = 5_000;
/** Backends of a dead postmaster notice its death at once; this long is generous. */
const ORPHAN_BACKENDS_MS = 10_000;
const POLL_MS = 25;

/**
 * Refuses a data directory that another live pgx runtime owns (it would stop our PostgreSQL and we
 * its), else records this process as the owner. A pid alone could be recycled; pid + start time is not.
 */
export async function claimOwnership(dataDir: string): Promise<void> {
  const file = join(dataDir, OWNER_FILE);
  const [pidText, startText] = (await readFile(file, 'utf8').catch(() => '')).trim().split(' ');
  const pid = Number(pidText);
  if (pid > 0 && pid !== process.pid) {
    const st = await procStat(pid);
    if (st && st.state !== 'Z' && String(st.startTime) === startText) {
      throw new PgxError('CONFIG_INVALID', `data directory ${dataDir} is in use by another pgx runtime (pid ${pid})`, {
        hint: 'Stop that runtime first, or give this one its own --data-dir.',
      });
    }
  }
  const me = await procStat(process.pid);
  // In the OS user's directory: never through a symlink it put there (private-files.ts).
  await writePrivateFile(file, `${process.pid} ${me?.startTime ?? 0}\n`, 0o644);
}

export async function releaseOwnership(dataDir: string): Promise<void> {
  const file = join(dataDir, OWNER_FILE);
  const pid = Number((await readFile(file, 'utf8').catch(() => '')).split(' ')[0]);
  if (pid === process.pid) await rm(file, { force: true });
}

/** Where PostgreSQL's leftovers are looked for. */
export interface Leftovers {
  dataDir: string;
  socketDir: string;
  port: number;
  log: Logger;
  clock: Clock;
}

/**
 * A postmaster.pid left behind means our predecessor died without stopping PostgreSQL (its postgres
 * may still run: stop it), or PostgreSQL itself was killed (its backends may still be exiting: wait),
 * or the pid was recycled by an unrelated process (PostgreSQL would refuse to start: remove the file).
 */
export async function clearLeftovers(o: Leftovers, signal: AbortSignal): Promise<void> {
  const pidFile = join(o.dataDir, 'postmaster.pid');
  const pidText = await readFile(pidFile, 'utf8').catch(() => undefined);
  if (pidText !== undefined) {
    const pid = Number(pidText.split('\n')[0]);
    if (pid > 0 && (await isOurPostmaster(o.dataDir, pid))) await stopOrphan(o, pid, signal);
    // postmaster.pid is PostgreSQL's interlock against backends still attached to the old shared
    // memory; remove it only once no postgres process works in this data directory any more.
    await waitForOrphanedBackends(o, signal);
    if (existsSync(pidFile)) {
      o.log.warn('postgres-stale-pid-removed', { pid, reason: (await isAlive(pid)) ? 'pid now belongs to another process' : 'process is gone' });
      await rm(pidFile, { force: true });
    }
  }

  // The socket lock names its postmaster too; a recycled pid there also stops PostgreSQL starting.
  const socket = socketPath(o.socketDir, o.port);
  const lock = `${socket}.lock`;
  const lockText = await readFile(lock, 'utf8').catch(() => undefined);
  if (lockText !== undefined) {
    const pid = Number(lockText.split('\n')[0]);
    if (pid > 0 && (await isAlive(pid)) && (await commOf(pid)) === 'postgres') {
      throw new PgxError('CONFIG_INVALID', `${o.socketDir} is in use by another PostgreSQL (pid ${pid})`, {
        hint: 'Give each pgx runtime its own --data-dir and --socket-dir.',
      });
    }
    o.log.warn('postgres-stale-socket-lock-removed', { lock, pid });
    await rm(lock, { force: true });
    await rm(socket, { force: true });
  }
}

/** A live postgres whose command line or working directory is this data directory. */
async function isOurPostmaster(dataDir: string, pid: number): Promise<boolean> {
  if (!(await isAlive(pid)) || (await commOf(pid)) !== 'postgres') return false;
  const dirs = new Set([dataDir, await realpath(dataDir)]);
  if ((await cmdlineOf(pid)).some((a) => dirs.has(a))) return true;
  const cwd = await cwdOf(pid);
  return cwd !== undefined && dirs.has(cwd);
}

async function stopOrphan(o: Leftovers, pid: number, signal: AbortSignal): Promise<void> {
  o.log.warn('postgres-orphan-found', { pid, dataDir: o.dataDir, reason: 'a previous pgx process died without stopping it' });
  const steps: [NodeJS.Signals, number, string][] = [
    ['SIGINT', ORPHAN_FAST_MS, 'fast shutdown'],
    ['SIGQUIT', ORPHAN_QUIT_MS, 'immediate shutdown'],
    ['SIGKILL', ORPHAN_QUIT_MS, 'kill'],
  ];
  for (const [sig, ms, mode] of steps) {
    o.log.warn('postgres-orphan-stop', { pid, signal: sig, mode });
    sendSignal(pid, sig);
    if (await waitGone(o.clock, async () => ((await isAlive(pid)) ? [pid] : []), ms, signal)) {
      o.log.info('postgres-orphan-stopped', { pid });
      return;
    }
  }
  throw new PgxError('POSTGRES_FAILED', `an orphaned PostgreSQL (pid ${pid}) on ${o.dataDir} survived SIGKILL`, {
    hint: `Stop process ${pid} by hand, then start pgx again.`,
  });
}

/** Waits for, then kills, postgres processes still working in the data directory. */
async function waitForOrphanedBackends(o: Leftovers, signal: AbortSignal): Promise<void> {
  const find = (): Promise<number[]> => postgresProcessesIn(o.dataDir);
  const found = await find();
  if (found.length === 0) return;
  o.log.warn('postgres-orphan-backends', { pids: found, reason: 'their postmaster is gone; waiting for them to exit' });
  if (await waitGone(o.clock, find, ORPHAN_BACKENDS_MS, signal)) return;
  const left = await find();
  o.log.warn('postgres-orphan-backends-kill', { pids: left, signal: 'SIGKILL' });
  for (const pid of left) sendSignal(pid, 'SIGKILL');
  if (!(await waitGone(o.clock, find, ORPHAN_QUIT_MS, signal))) {
    throw new PgxError('POSTGRES_FAILED', `postgres processes ${left.join(', ')} still run in ${o.dataDir}`, {
      hint: 'Stop them by hand, then start pgx again.',
    });
  }
}

/** Polls `alive` until it returns nothing (true) or `ms` pass (false). */
async function waitGone(clock: Clock, alive: () => Promise<number[]>, ms: number, signal: AbortSignal): Promise<boolean> {
  const deadline = clock.monotonic() + ms;
  for (;;) {
    if ((await alive()).length === 0) return true;
    if (clock.monotonic() >= deadline) return false;
    await sleep(POLL_MS, undefined, { signal });
  }
}
