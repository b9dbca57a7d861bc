// Preloaded (`node --expose-gc --import heap-probe.js bin/pgx.js start ...`) into a runtime the
// benchmark runs as its own process, so the benchmark can ask that process for its V8 heap after a
// full collection. It adds one IPC message listener and nothing else; the runtime's code is untouched.
// Without --expose-gc the numbers come without a collection first (`gc: false`).

import { getHeapSpaceStatistics } from 'node:v8';

export interface HeapReport {
  gc: boolean;
  heapUsed: number;
  heapTotal: number;
  external: number;
  rss: number;
  /** Bytes used per V8 heap space (old_space, code_space, ...), after the collection. */
  spaces: Record<string, number>;
}

process.on('message', (msg: unknown) => {
  if (msg !== 'heap') return;
  const gc = globalThis.gc;
  // Two passes: the first may only move objects with finalizers to the next.
  if (gc) {
    gc();
    gc();
  }
  const m = process.memoryUsage();
  const spaces = Object.fromEntries(getHeapSpaceStatistics().map((s) => [s.space_name, s.space_used_size]));
  const report: HeapReport = { gc: gc !== undefined, heapUsed: m.heapUsed, heapTotal: m.heapTotal, external: m.external, rss: m.rss, spaces };
  process.send?.(report);
});
