// Request ids for creates: the same id with the same body answers the first result (even while the
// first is still running); the same id with another body is refused with 409. Failures are not kept,
// so a failed create can be retried under its id. Kept in memory for a day, at most MAX_KEYS ids.

import type { Clock } from '../clock.js';
import { PgxError } from '../errors.js';
import { ApiError } from './errors.js';

const KEEP_MS = 24 * 3600 * 1000;
const MAX_KEYS = 10_000;

interface Entry<T> {
  fingerprint: string;
  result: Promise<T>;
  at: number;
}

export class IdempotencyStore<T> {
  private readonly entries = new Map<string, Entry<T>>();

  constructor(private readonly clock: Clock) {}

  run(key: string, body: unknown, work: () => Promise<T>): Promise<T> {
    this.expire();
    const fingerprint = canonical(body);
    const seen = this.entries.get(key);
    if (seen) {
      if (seen.fingerprint !== fingerprint) {
        // The one 409 that is not about the database: the request, not its object, conflicts.
        throw new ApiError(
          409,
          new PgxError('INVALID_PARAMETER', `request id "${key}" was already used with a different body`, {
            hint: 'Use a new Idempotency-Key (or request_id) for a different request.',
          }),
        );
      }
      return seen.result;
    }
    const result = work();
    this.entries.set(key, { fingerprint, result, at: this.clock.monotonic() });
    result.catch(() => {
      if (this.entries.get(key)?.result === result) this.entries.delete(key);
    });
    return result;
  }

  private expire(): void {
    const now = this.clock.monotonic();
    for (const [key, e] of this.entries) {
      if (now - e.at < KEEP_MS && this.entries.size < MAX_KEYS) break;
      this.entries.delete(key);
    }
  }
}

/** JSON with object keys sorted, so key order does not make two bodies differ. */
export function canonical(value: unknown): string {
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`;
  if (value !== null && typeof value === 'object') {
    const obj = value as Record<string, unknown>;
    return `{${Object.keys(obj)
      .filter((k) => obj[k] !== undefined)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(obj[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(value) ?? 'null';
}
