// Cancel keys. Each client session gets a key issued by the engine (its pid is the backend's, its
// secret the engine's); a CancelRequest carrying it is sent on to PostgreSQL with the key of the
// backend the session holds at that moment (the backend's own key travels only on PostgreSQL's
// private socket, so its length does not matter). A client that asked for protocol 3.2 gets a
// 32-byte secret, as PostgreSQL 18 gives; a 3.0 client's is 4 bytes, and guessable at network
// speed: CancelFailures throttles wrong guesses of such short keys per source.

import { randomFillSync, randomInt, timingSafeEqual } from 'node:crypto';
import type { Clock } from '../clock.js';

export interface Cancellable {
  /** Sends a cancel for whatever the session's backend is running; no-op when it holds none. */
  cancelBackend(): void;
}

interface Entry {
  secret: Buffer;
  session: Cancellable;
}

/** PostgreSQL 18's secret length for protocol 3.2 clients (MAX_CANCEL_KEY_LENGTH). */
const LONG_SECRET_BYTES = 32;
const SHORT_SECRET_BYTES = 4;

/**
 * Secrets come from blocks of CSPRNG bytes, each byte handed out once: one randomFillSync per 4 kB
 * instead of a crypto call per connection. A secret is a view of its block, which stays allocated
 * while any of its secrets is live (4 kB per 128 to 1,024 sessions).
 */
const RANDOM_BLOCK_BYTES = 4096;
let randomBlock = Buffer.alloc(0);
let randomUsed = 0;

function randomSecret(bytes: number): Buffer {
  if (randomUsed + bytes > randomBlock.length) {
    randomBlock = randomFillSync(Buffer.allocUnsafeSlow(RANDOM_BLOCK_BYTES));
    randomUsed = 0;
  }
  const secret = randomBlock.subarray(randomUsed, randomUsed + bytes);
  randomUsed += bytes;
  return secret;
}

export class CancelKeys {
  private readonly entries = new Map<number, Entry>();
  private nextPid = randomInt(1000, 1 << 30);

  /**
   * Issues a fresh (pid, secret) pair for a session. The pid is `backendPid`, the pid of the backend
   * the session holds, when no live key has it: clients compare it with pg_backend_pid(), with the
   * sender of a notification (to skip their own) and pass it to pg_cancel_backend(), as they would
   * with PostgreSQL's own key. The secret is always the engine's: 4 bytes, or 32 when `long`
   * (protocol 3.2).
   */
  issue(session: Cancellable, backendPid = 0, long = false): { pid: number; secret: Buffer } {
    let pid: number;
    if (backendPid > 0 && !this.entries.has(backendPid)) {
      pid = backendPid;
    } else {
      pid = this.nextPid;
      while (this.entries.has(pid)) pid = pid >= 0x7fffffff ? 1000 : pid + 1;
      this.nextPid = pid >= 0x7fffffff ? 1000 : pid + 1;
    }
    const secret = randomSecret(long ? LONG_SECRET_BYTES : SHORT_SECRET_BYTES);
    this.entries.set(pid, { secret, session });
    return { pid, secret };
  }

  revoke(pid: number): void {
    this.entries.delete(pid);
  }

  /** The session a cancel request names, if the secret matches; unknown keys yield nothing. */
  find(pid: number, secret: Buffer): Cancellable | undefined {
    const entry = this.entries.get(pid);
    if (!entry || entry.secret.length !== secret.length) return undefined;
    return timingSafeEqual(entry.secret, secret) ? entry.session : undefined;
  }

  get size(): number {
    return this.entries.size;
  }
}

/** Wrong short-key cancel requests a source may send at once, and per second after that. */
const FAILED_BURST = 20;
const FAILED_PER_SECOND = 1;
const MAX_SOURCES = 10_000;

/**
 * Wrong cancel requests with a short (3.0, 4-byte) secret, per source address: a bucket of
 * FAILED_BURST, refilled at FAILED_PER_SECOND. While a source's bucket is empty its short-key
 * requests are dropped unread, the right key included (a cancel is best-effort, as in PostgreSQL),
 * so guessing one 32-bit secret takes decades instead of days. Requests with a right key never
 * drain it, so other clients on the address are affected only while a guesser there is at work;
 * 3.2 clients' 32-byte keys are never throttled (they cannot be guessed). Bounded: MAX_SOURCES
 * sources tracked, least recently failed forgotten first.
 */
export class CancelFailures {
  private readonly buckets = new Map<string, { tokens: number; at: number }>();

  constructor(private readonly clock: Clock) {}

  /** May a short-key cancel request from `source` be looked up now? */
  allowed(source: string): boolean {
    const bucket = this.buckets.get(source);
    return bucket === undefined || this.refill(bucket) >= 1;
  }

  /** A wrong short-key request from `source`; true when it empties the bucket (log it then). */
  failed(source: string): boolean {
    const bucket = this.buckets.get(source) ?? { tokens: FAILED_BURST, at: this.clock.monotonic() };
    const tokens = this.refill(bucket) - 1;
    bucket.tokens = tokens;
    this.buckets.delete(source);
    this.buckets.set(source, bucket);
    if (this.buckets.size > MAX_SOURCES) this.buckets.delete(this.buckets.keys().next().value!);
    return tokens < 1;
  }

  private refill(bucket: { tokens: number; at: number }): number {
    const now = this.clock.monotonic();
    bucket.tokens = Math.min(FAILED_BURST, bucket.tokens + ((now - bucket.at) / 1000) * FAILED_PER_SECOND);
    bucket.at = now;
    return bucket.tokens;
  }
}
