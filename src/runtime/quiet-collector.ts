// V8's heap given back when the runtime goes quiet after work.
//
// A burst of work (1,000 databases minted through the API, a flood of connections) grows V8's heap,
// and V8 kept the pages it grew to: measured in a runtime process with 1,000 databases minted and
// then left alone, node's anonymous PSS stayed at 45.5-46.0 MB for 45 s (V8's memory reducer gave
// nothing back), while a full collection took it to 38.7 MB, where it stayed. So once the process has
// been busy and then goes quiet, it collects (twice, as finalizers free more at the second): with it,
// the same runtime read 40.5 MB 8 s after the burst. The pause (a few ms for a heap of 20 MB) lands
// when nothing much is running, and comes again only after the next busy spell.
//
// A second collection follows once the process has stayed quiet a while longer. The first runs as the
// work stops, while the work's last objects are still held: closed sockets' handles, the timers of
// databases' protect windows (5 s after a mint), the pool's prepared backend connections until their
// sweep. Measured after 1,000 API mints: node's anonymous PSS 61.2 MB, 52.0 MB after the first
// collection and still 52.0 MB 27 s later, 37.2 MB after one more full collection then.

import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';

/** How often the process's CPU time is looked at. */
const WINDOW_MS = 2_000;
/** A window with this much CPU time (5 % of a core) is work that may have grown the heap. */
const BUSY_MS = 100;
/** A window with less (1 % of a core) is quiet: an idle runtime with 1,000 databases uses 0.5 %. */
const QUIET_MS = 20;
/** Quiet windows after the first collection before the second (about 12 s: past the 5 s and 10 s timers above). */
const SETTLE_WINDOWS = 6;

export interface QuietCollectorOptions {
  /** A full collection; default V8's own (exposeGc()). */
  gc?: () => void;
  /** CPU time of the process so far, ms (user + system, every thread); default process.cpuUsage(). */
  cpuMs?: () => number;
  windowMs?: number;
}

/**
 * V8's gc(), without starting node with --expose-gc: the flag set now applies to contexts made after
 * it, so a new context hands the function out (as Jest's leak detector gets it). The flag is unset
 * again, so no later context sees a gc global.
 */
export function exposeGc(): () => void {
  const own = (globalThis as { gc?: () => void }).gc;
  if (own) return own;
  v8.setFlagsFromString('--expose-gc');
  try {
    return runInNewContext('gc') as () => void;
  } finally {
    v8.setFlagsFromString('--no-expose-gc');
  }
}

export class QuietCollector {
  private readonly gc: () => void;
  private readonly cpuMs: () => number;
  private last: number;
  /** A busy window came since the last collection. */
  private grown = false;
  /** Quiet windows left before the second collection of a quiet spell; null: none due. */
  private settleIn: number | null = null;
  /** Collections made, for tests. */
  collections = 0;

  constructor(private readonly opts: QuietCollectorOptions = {}) {
    this.gc = opts.gc ?? exposeGc();
    this.cpuMs = opts.cpuMs ?? (() => {
      const { user, system } = process.cpuUsage();
      return (user + system) / 1000;
    });
    this.last = this.cpuMs();
  }

  /** For the process's life (the interval does not keep it alive). */
  start(): void {
    setInterval(() => this.tick(), this.opts.windowMs ?? WINDOW_MS).unref();
  }

  /** One window's end; public for tests. True when it collected. */
  tick(): boolean {
    const now = this.cpuMs();
    const used = now - this.last;
    this.last = now;
    if (used >= BUSY_MS) [this.grown, this.settleIn] = [true, null];
    if (used >= QUIET_MS) return false;
    if (this.grown) {
      [this.grown, this.settleIn] = [false, SETTLE_WINDOWS];
      return this.collect();
    }
    if (this.settleIn === null || --this.settleIn > 0) return false;
    this.settleIn = null;
    return this.collect();
  }

  private collect(): true {
    // Twice: objects with finalizers (sockets, timers' handles) are only freed by the next collection.
    this.gc();
    this.gc();
    this.collections++;
    return true;
  }
}
