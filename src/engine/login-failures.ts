// Failed logins per (source address, user) (--login-failure-limit): a guesser is slowed, nobody is
// switched off. Up to the limit within a minute, attempts go on at once. Past it, that (source, user)'s
// attempts take turns: one password check per turn, a turn `delay` after the previous one, the delay
// doubling with each further failure (250 ms up to 4 s), so parallel connections do not multiply
// the guessing rate. An attempt whose turn is further off than `maxWaitMs` is refused (28000) rather
// than held. Other users from the same address, and the same user from other addresses, are not
// affected; a client that knows its password waits its turn at worst, and the penalty ends a minute
// after the guessing stops. A success does not reset it (a busy app sharing the address and user
// would otherwise hand the guesser a fresh allowance every time).
//
// Bounded: at most MAX_KEYS keys under the limit and MAX_KEYS over it are tracked, least recently
// failed forgotten first; keys over the limit are kept apart, so failures spread over many junk user
// names cannot push the penalised key out.

import type { Clock } from '../clock.js';

const WINDOW_MS = 60_000;
const MAX_KEYS = 10_000;
const BASE_DELAY_MS = 250;
const MAX_DELAY_MS = 4_000;

interface Entry {
  /** Times of recent failures, oldest first; at most the limit plus enough to reach MAX_DELAY_MS. */
  times: number[];
  /** Monotonic time of the next turn of an attempt past the limit. */
  nextAt: number;
}

export class LoginFailures {
  private readonly counting = new Map<string, Entry>();
  private readonly penalised = new Map<string, Entry>();
  private readonly keep: number;

  constructor(
    /** Failures per (source, user) within a minute before attempts take turns; null: no limit. */
    private readonly limit: number | null,
    private readonly clock: Clock,
    /** Longest an attempt is held for its turn; beyond it the attempt is refused. */
    private readonly maxWaitMs: number,
  ) {
    this.keep = (limit ?? 0) + Math.ceil(Math.log2(MAX_DELAY_MS / BASE_DELAY_MS)) + 1;
  }

  /**
   * Takes a turn for an attempt of `user` from `source`: the milliseconds it must wait before its
   * password is asked for (0: now, the case for every key under the limit), or null when its turn is
   * more than maxWaitMs away (refuse it; retryAfterMs says when to come back).
   */
  admit(source: string, user: string): number | null {
    if (this.limit === null || this.penalised.size === 0) return 0;
    const key = keyOf(source, user);
    const entry = this.penalised.get(key);
    if (!entry) return 0;
    const now = this.clock.monotonic();
    const failures = this.prune(key, entry, now);
    if (failures < this.limit) return 0;
    const at = Math.max(now, entry.nextAt);
    if (at - now > this.maxWaitMs) return null;
    entry.nextAt = at + delayFor(failures - this.limit);
    return at - now;
  }

  /** Milliseconds until an attempt refused by admit() would be held rather than refused. */
  retryAfterMs(source: string, user: string): number {
    const entry = this.penalised.get(keyOf(source, user));
    return entry ? Math.max(0, entry.nextAt - this.clock.monotonic() - this.maxWaitMs) : 0;
  }

  /**
   * A failed password for `user` from `source`. Returns the failures counted within the minute and
   * how long the next attempt will wait (0 while under the limit).
   */
  record(source: string, user: string): { failures: number; nextWaitMs: number } {
    if (this.limit === null) return { failures: 0, nextWaitMs: 0 };
    const key = keyOf(source, user);
    const now = this.clock.monotonic();
    const entry = this.penalised.get(key) ?? this.counting.get(key) ?? { times: [], nextAt: 0 };
    this.prune(key, entry, now);
    entry.times.push(now);
    if (entry.times.length > this.keep) entry.times.shift();
    const failures = entry.times.length;
    let nextWaitMs = 0;
    // Re-inserted: each map's order is least recently failed first.
    this.counting.delete(key);
    this.penalised.delete(key);
    if (failures >= this.limit) {
      entry.nextAt = Math.max(entry.nextAt, now + delayFor(failures - this.limit));
      nextWaitMs = entry.nextAt - now;
      setBounded(this.penalised, key, entry);
    } else {
      setBounded(this.counting, key, entry);
    }
    return { failures, nextWaitMs };
  }

  /** Failures of `user` from `source` within the minute. */
  failures(source: string, user: string): number {
    const key = keyOf(source, user);
    const entry = this.penalised.get(key) ?? this.counting.get(key);
    return entry ? this.prune(key, entry, this.clock.monotonic()) : 0;
  }

  /** Drops failures older than the window; forgets the key when none are left. Returns the count. */
  private prune(key: string, entry: Entry, now: number): number {
    const cutoff = now - WINDOW_MS;
    const times = entry.times;
    while (times.length > 0 && times[0]! <= cutoff) times.shift();
    if (times.length === 0 && entry.nextAt <= now) {
      this.counting.delete(key);
      this.penalised.delete(key);
    }
    return times.length;
  }
}

/** The wait between turns after `excess` failures past the limit. */
function delayFor(excess: number): number {
  return Math.min(MAX_DELAY_MS, BASE_DELAY_MS * 2 ** Math.min(excess, 16));
}

function keyOf(source: string, user: string): string {
  return `${source}\0${user}`;
}

function setBounded(map: Map<string, Entry>, key: string, entry: Entry): void {
  map.set(key, entry);
  if (map.size > MAX_KEYS) map.delete(map.keys().next().value!);
}
