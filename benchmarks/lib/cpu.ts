// CPU time spent by the proxy under test during a run: the engine runs in this process, PgBouncer in
// its own. Divided by the transactions of the run it says how much CPU each proxy spends per query.

import { readFileSync } from 'node:fs';
import { processTree } from '../../src/runtime/postgres/memory.js';

/** Clock ticks per second for /proc/PID/stat; 100 on every Linux build we run on. */
const CLK_TCK = 100;

/** User + system CPU milliseconds of another process so far, or NaN if it is gone. */
export function processCpuMs(pid: number): number {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    return ((Number(fields[11]) + Number(fields[12])) * 1000) / CLK_TCK;
  } catch {
    return NaN;
  }
}

/** User + system CPU milliseconds of this process so far. */
export function ownCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

/**
 * CPU milliseconds of a whole process tree so far: every live process's own user + system time, plus
 * the times of children it has reaped (cutime + cstime). Short-lived processes (autovacuum workers,
 * backends of closed sessions) are gone from /proc by the next reading, but the postmaster has reaped
 * them, so the difference of two readings counts their CPU too.
 */
export async function treeCpuMs(root: number): Promise<number> {
  let ticks = 0;
  for (const pid of await processTree(root)) {
    try {
      const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
      const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
      // Fields 14-17 of stat (utime stime cutime cstime), counted from the state field as 0 here.
      ticks += Number(f[11]) + Number(f[12]) + Number(f[13]) + Number(f[14]);
    } catch {
      // Ended meanwhile: its parent's cutime/cstime carries it from now on.
    }
  }
  return (ticks * 1000) / CLK_TCK;
}
