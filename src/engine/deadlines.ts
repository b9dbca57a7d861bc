// Deadlines of one fixed length for many items, on one timer. Every client session has a login
// deadline (--login-timeout) and, once authenticated, a short hold on its AuthenticationOk; a
// setTimeout and clearTimeout for each cost a Timeout object and two list operations per connection,
// on the path that bounds connections per second. Items added with the same length expire in the
// order they were added, so a Map in insertion order is the queue: adding and removing are one Map
// operation, and the one timer always waits for the oldest item.

import { systemClock, type Clock } from '../clock.js';

export class Deadlines<T> {
  /** Item -> when it expires (monotonic ms), oldest first. */
  private readonly due = new Map<T, number>();
  private timer: NodeJS.Timeout | null = null;

  constructor(
    /** How long after add() an item expires. */
    private readonly lengthMs: number,
    private readonly expire: (item: T) => void,
    /** The timer runs on real time, so the deadlines do too. */
    private readonly clock: Pick<Clock, 'monotonic'> = systemClock,
  ) {}

  add(item: T): void {
    this.due.delete(item);
    this.due.set(item, this.clock.monotonic() + this.lengthMs);
    if (this.timer === null) this.arm(this.lengthMs);
  }

  /** The item leaves before its deadline; nothing happens for it. */
  delete(item: T): void {
    this.due.delete(item);
    // The timer is left running: when it fires it finds the next item, or none, and rearms or stops.
  }

  /** Stops the timer; items not yet expired never will. */
  clear(): void {
    this.due.clear();
    if (this.timer !== null) clearTimeout(this.timer);
    this.timer = null;
  }

  private arm(ms: number): void {
    this.timer = setTimeout(this.fire, Math.max(0, ms));
    // A pending deadline must not keep the process alive on its own (as the per-session timers did not).
    this.timer.unref();
  }

  private readonly fire = (): void => {
    this.timer = null;
    const now = this.clock.monotonic();
    for (const [item, at] of this.due) {
      if (at > now) {
        this.arm(at - now);
        return;
      }
      this.due.delete(item);
      this.expire(item);
    }
  };
}
