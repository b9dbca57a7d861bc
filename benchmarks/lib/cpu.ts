// CPU time spent by the proxy under test during a run: the engine runs in this process, PgBouncer in
// its own. Divided by the transactions of the run it says how much CPU each proxy spends per query.

import { readFileSync } from 'node:fs';

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
