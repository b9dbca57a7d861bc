// V8's collections taken off the clients' path.
//
// V8 collects when an allocation finds a space full, or finishes a marking it started at the next
// allocation, so its collections land inside the work that allocates: in a runtime, a mint or a login.
// Its memory reducer adds collections when the allocation rate looks idle, which is when a lone client
// connects. Measured with `npm run bench -- mint` (2026-12-06, AMD EPYC VM, a throwaway CPU profile of
// the runtime): 6 of the 7 warm mints over 9 ms had the runtime's main thread in the collector, none
// of the 193 others did. So the runtime collects first: every 50 ms it looks at how far its heap has
// grown since its last collection, and past STEP_BYTES it collects, between clients' requests rather
// than inside one, and the heap never grows far enough for V8 to start a marking of its own. Not while
// the process is busy (more than a fifth of the interval on the CPU): under load the clients' work
// never stops, and V8's own collections, amortised over it, cost less than one full collection per
// step would. The memory reducer is off: this collector and the quiet one (quiet-collector.ts) do its job.
// The same benchmark, uninstrumented, alternating: warm mints over 9 ms 2 of 400 with these
// collections against 34 of 1,000 without (p99 within 2x a plain connect's in both runs with them).

import v8 from 'node:v8';
import { exposeGc } from './quiet-collector.js';

/** How often the heap's growth is looked at. */
const INTERVAL_MS = 50;
/** Growth since the last collection that makes the next one due: a few ms of work on a heap of 20 MB. */
const STEP_BYTES = 3 * 2 ** 20;
/** CPU time in one interval above which the process is busy, and V8 is left to collect. */
const BUSY_SHARE = 0.2;

export interface PacedCollectorOptions {
  /** A full collection; default V8's own (exposeGc()). */
  gc?: () => void;
  /** Bytes used on V8's heap now; default v8.getHeapStatistics().used_heap_size. */
  usedBytes?: () => number;
  /** CPU time of the process so far, ms; default process.cpuUsage(). */
  cpuMs?: () => number;
  /** Sets V8 flags; default v8.setFlagsFromString. */
  setV8Flags?: (flags: string) => void;
  intervalMs?: number;
}

export class PacedCollector {
  private readonly gc: () => void;
  private readonly usedBytes: () => number;
  private readonly cpuMs: () => number;
  private readonly intervalMs: number;
  /** Heap used after the last collection (ours or V8's: it only goes down that way). */
  private base: number;
  private lastCpu: number;
  /** Collections made, for tests. */
  collections = 0;

  constructor(private readonly opts: PacedCollectorOptions = {}) {
    this.gc = opts.gc ?? exposeGc();
    this.usedBytes = opts.usedBytes ?? (() => v8.getHeapStatistics().used_heap_size);
    this.cpuMs = opts.cpuMs ?? (() => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    });
    this.intervalMs = opts.intervalMs ?? INTERVAL_MS;
    this.base = this.usedBytes();
    this.lastCpu = this.cpuMs();
  }

  /** For the process's life (the interval does not keep it alive); V8's memory reducer off from now. */
  start(): void {
    (this.opts.setV8Flags ?? v8.setFlagsFromString)('--no-memory-reducer');
    setInterval(() => this.tick(), this.intervalMs).unref();
  }

  /** One interval's end; public for tests. True when it collected. */
  tick(): boolean {
    const cpu = this.cpuMs();
    const busy = cpu - this.lastCpu > this.intervalMs * BUSY_SHARE;
    this.lastCpu = cpu;
    const used = this.usedBytes();
    // Lower than the base: V8 collected meanwhile.
    if (used < this.base) this.base = used;
    if (busy || used - this.base < STEP_BYTES) return false;
    this.gc();
    this.collections++;
    this.base = this.usedBytes();
    // The collection's own CPU is not the clients'.
    this.lastCpu = this.cpuMs();
    return true;
  }
}
