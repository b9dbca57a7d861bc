// V8's young generation, held at a fixed size in a runtime process.
//
// V8 allocates new objects in two semi-spaces that start at 1 MB each and double under allocation up
// to 16 MB each, and no collection gives that back: after a burst of connections a runtime keeps
// 30 MB more resident for the rest of its life, which density and churn count against it (pgbench -C
// -c 4 against two runtimes side by side: RSS 107.7 -> 88.4 MB, V8's heap 47.6 -> 17.3 MB, once it
// was kept at 1 MB). But at 1 MB a connection's objects outlive the scavenges they see and are
// promoted, and the old generation fills: the runtime of `npm run bench -- mint` made 38 full
// collections in 100 s, and a full collection's last step landing inside a warm mint is most of that
// mint's p99 (docs/benchmarks.md, Mint). At 2 MB (as `node --max-semi-space-size=2` would): 3-4 full
// collections, and at 10,000 databases 0.5 MB more anonymous memory.

import v8 from 'node:v8';
import { PerformanceObserver } from 'node:perf_hooks';

/** Each semi-space's size held, MB. */
export const SEMI_SPACE_MB = 2;

/** One semi-space's capacity now, MB (V8 reports it a few pages short of the power of two). */
function semiSpaceMb(): number {
  const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  return young ? Math.max(1, Math.round((young.space_used_size + young.space_available_size) / 2 ** 20)) : SEMI_SPACE_MB;
}

/**
 * Holds the young generation at SEMI_SPACE_MB a semi-space, unless the process was started with a
 * semi-space flag of its own (`node --max-semi-space-size=N`, or in NODE_OPTIONS), which is then left
 * to decide. Returns whether it holds it.
 */
export function capYoungGeneration(execArgv: readonly string[] = process.execArgv, nodeOptions = process.env['NODE_OPTIONS'] ?? ''): boolean {
  if ([...execArgv, ...nodeOptions.split(/\s+/)].some((arg) => arg.includes('semi-space') || arg.includes('semi_space'))) return false;
  // Once V8 is running it no longer reads --max-semi-space-size, but it reads the growth factor at
  // every growth (a doubling by default, after a scavenge that kept as much as a semi-space holds).
  // So after each collection the factor is set to what takes the size to SEMI_SPACE_MB in one step,
  // and to 1 (no growth) once there. It may be past that already, grown while the runtime's modules
  // loaded; V8 shrinks it when the process goes quiet (to 1 MB, from where it grows back).
  const steer = (): void => {
    v8.setFlagsFromString(`--semi-space-growth-factor=${Math.max(1, Math.floor(SEMI_SPACE_MB / semiSpaceMb()))}`);
  };
  steer();
  new PerformanceObserver(steer).observe({ entryTypes: ['gc'] });
  return true;
}
