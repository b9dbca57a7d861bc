// Processes as /proc shows them (PostgreSQL and this runtime are Linux-only): the one reader of
// /proc/PID/stat, shared by the supervisor (is a postmaster ours, alive, gone) and memory.ts (the
// process tree whose memory the status document reports).

import { readdir, readFile, readlink, realpath } from 'node:fs/promises';

export interface ProcStat {
  /** R, S, D, Z (zombie), X (dead), ... */
  state: string;
  ppid: number;
  /** Clock ticks since boot: with the pid, it names one process even when pids are recycled. */
  startTime: number;
}

/** State, parent and start time of a process, or undefined if there is none. */
export async function procStat(pid: number): Promise<ProcStat | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  // "pid (comm) state ppid ..." where comm may hold spaces and parentheses: split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '', ppid: Number(fields[1]), startTime: Number(fields[19]) };
}

/** The pids of every live process (the numeric entries of /proc). */
export async function allPids(): Promise<number[]> {
  return (await readdir('/proc')).filter((name) => /^\d+$/.test(name)).map(Number);
}

/** Alive and not a zombie: an orphan re-parented to a PID 1 that does not reap stays a zombie. */
export async function isAlive(pid: number): Promise<boolean> {
  const st = await procStat(pid);
  return st !== undefined && st.state !== 'Z' && st.state !== 'X';
}

export async function commOf(pid: number): Promise<string> {
  return (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim();
}

/** The process's command line arguments, or [] if it is gone. */
export async function cmdlineOf(pid: number): Promise<string[]> {
  return (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
}

/** The process's working directory, or undefined if it is gone (or not ours to read). */
export function cwdOf(pid: number): Promise<string | undefined> {
  return readlink(`/proc/${pid}/cwd`).catch(() => undefined);
}

/** Live postgres processes whose working directory is `dir` (every PostgreSQL process chdirs there). */
export async function postgresProcessesIn(dir: string): Promise<number[]> {
  const dirs = new Set([dir, await realpath(dir)]);
  const found: number[] = [];
  for (const pid of await allPids()) {
    const cwd = await cwdOf(pid);
    if (cwd === undefined || !dirs.has(cwd)) continue;
    if ((await commOf(pid)) === 'postgres' && (await isAlive(pid))) found.push(pid);
  }
  return found;
}

/** Sends `sig`; a process already gone (ESRCH) is not an error. */
export function sendSignal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}
