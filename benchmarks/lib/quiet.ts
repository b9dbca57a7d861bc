// Waiting for a quiet machine. The reference machine is shared: other jobs' bursts land on whichever
// target happens to run. Between runs the benchmark's own processes are idle, so the machine's idle
// share over the last second says whether someone else is busy; a workload's runs start only after a
// quiet second (or after a bounded wait, noted in the samples).

import { readFileSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { systemClock } from '../../src/clock.js';

function cpuTimes(): { idle: number; total: number } {
  const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0]!;
  const fields = line.trim().split(/\s+/).slice(1).map(Number);
  // user nice system idle iowait irq softirq steal ...
  const idle = (fields[3] ?? 0) + (fields[4] ?? 0);
  return { idle, total: fields.slice(0, 8).reduce((a, b) => a + b, 0) };
}

/** The machine's idle share (0..1) over the next `ms` milliseconds. */
export async function idleShare(ms: number): Promise<number> {
  const a = cpuTimes();
  await sleep(ms);
  const b = cpuTimes();
  return b.total > a.total ? (b.idle - a.idle) / (b.total - a.total) : 1;
}

/** Waits up to `maxMs` for a second in which at least `threshold` of the CPUs were idle; returns the last share seen. */
export async function waitForQuiet(maxMs: number, threshold = 0.85): Promise<number> {
  const deadline = systemClock.monotonic() + maxMs;
  let share = await idleShare(1000);
  while (share < threshold && systemClock.monotonic() < deadline) share = await idleShare(1000);
  return share;
}
