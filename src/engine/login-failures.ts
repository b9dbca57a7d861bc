// Failed logins per source address (--login-failure-limit): past the limit within a minute, the
// source's next logins are refused before any password is checked, until the oldest failure ages out.
// It slows password guessing to the limit's pace; a client that knows its password is not affected
// unless its address is shared with a guesser. Bounded: at most MAX_SOURCES addresses are tracked.

import type { Clock } from '../clock.js';

const WINDOW_MS = 60_000;
const MAX_SOURCES = 10_000;

export class LoginFailures {
  /** Times of recent failures per source, oldest first. */
  private readonly recent = new Map<string, number[]>();

  constructor(
    /** Failures per source allowed within a minute; null: no limit. */
    private readonly limit: number | null,
    private readonly clock: Clock,
  ) {}

  /** Milliseconds until `source` may try again; 0 when it may now. */
  blockedFor(source: string): number {
    if (this.limit === null) return 0;
    const times = this.prune(source);
    if (times.length < this.limit) return 0;
    return times[times.length - this.limit]! + WINDOW_MS - this.clock.monotonic();
  }

  /** A failed password from `source`. */
  record(source: string): void {
    if (this.limit === null) return;
    const times = this.prune(source);
    times.push(this.clock.monotonic());
    this.recent.delete(source); // re-insert: the map's order is least recently failed first
    this.recent.set(source, times.slice(-this.limit));
    if (this.recent.size > MAX_SOURCES) this.recent.delete(this.recent.keys().next().value!);
  }

  private prune(source: string): number[] {
    const times = this.recent.get(source);
    if (!times) return [];
    const cutoff = this.clock.monotonic() - WINDOW_MS;
    while (times.length > 0 && times[0]! <= cutoff) times.shift();
    if (times.length === 0) this.recent.delete(source);
    return times;
  }
}
