// The watch echoes of the operator's own writes. A Branch pass that adds the finalizer, places the
// Branch, creates its database and writes Ready does it all in one go, writing the object three times;
// each write comes back as a watch event that queues the key again. Without this, each echo ran a pass:
// one on an object older than what the operator had already written (its status write then failed with
// 409 and was retried), and one that asked the runtime for the database and the API server for the Secret
// that the pass before had made a millisecond earlier.
//
// So the controller records the resourceVersion of each of its writes per key. When the cache shows one
// of them that is not the last, the cache is behind this operator: the last echo is on its way and
// queues the key again, so there is nothing to do yet. When it shows exactly the last, nothing was
// changed by anyone else since that pass looked. Only the newest write of a key is trusted for a while
// (maxAgeMs): a watch that stalls would otherwise keep a key waiting for an echo that never comes.

import type { Clock } from '../clock.js';

export type Echo = 'none' | 'stale' | 'latest';

export class OwnWrites {
  private readonly keys = new Map<string, { latest: string; earlier: Set<string>; at: number }>();

  constructor(
    private readonly clock: Clock,
    private readonly maxAgeMs = 60_000,
  ) {}

  /** This operator wrote `key`, and the API server stored it as `resourceVersion`. */
  wrote(key: string, resourceVersion: string | undefined): void {
    if (resourceVersion === undefined) return this.forget(key);
    const at = this.clock.monotonic();
    const entry = this.keys.get(key);
    if (entry && at - entry.at < this.maxAgeMs) {
      entry.earlier.add(entry.latest);
      entry.latest = resourceVersion;
      entry.at = at;
    } else {
      this.keys.set(key, { latest: resourceVersion, earlier: new Set(), at });
    }
  }

  /**
   * What the cached `resourceVersion` of `key` is to this operator: 'stale' (one of its own writes, not
   * the last), 'latest' (its last write; said once, then forgotten), or 'none' (someone else's, or
   * nothing recorded).
   */
  classify(key: string, resourceVersion: string | undefined): Echo {
    const entry = this.keys.get(key);
    if (!entry || resourceVersion === undefined) return 'none';
    const fresh = this.clock.monotonic() - entry.at < this.maxAgeMs;
    if (fresh && entry.earlier.has(resourceVersion)) return 'stale';
    // The last write, or something newer (someone else's) or too old: either way the record has served.
    this.keys.delete(key);
    return fresh && resourceVersion === entry.latest ? 'latest' : 'none';
  }

  forget(key: string): void {
    this.keys.delete(key);
  }

  get size(): number {
    return this.keys.size;
  }
}
