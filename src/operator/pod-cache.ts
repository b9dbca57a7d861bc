// What the operator reads about runtime pods on every call: the Runtime's API token (from its Secret;
// needed for each call to a pod), kept for a while, and a pod's /v1/status (read by placement for every
// candidate pod), shared by the placements that ask while a read is under way. Without it a burst of N
// Branches read the same Secret about 10N times and asked every pod for its status (a walk of its
// process tree, 0.3-0.7 s under a burst) N times.
//
// A token is never rotated by the operator (the Secret is made once), so a cached one is only stale when
// a Runtime was deleted and made again under the same name; a call refused for it is retried with
// backoff until the token is read again, at most tokenMaxAgeMs later. A status is not kept after its
// read by default (statusMaxAgeMs 0): an answer from before a runtime died would place a Branch on it.

import type { ApiClient } from '../api/client.js';
import type { Clock } from '../clock.js';
import type { Kube } from './kube.js';
import { runtimeToken } from './pods.js';

export interface PodCacheOptions {
  tokenMaxAgeMs: number;
  statusMaxAgeMs: number;
}

type RuntimeStatus = Awaited<ReturnType<ApiClient['status']>>;

const DEFAULTS: PodCacheOptions = { tokenMaxAgeMs: 10_000, statusMaxAgeMs: 0 };

class TimedCache<V> {
  private readonly entries = new Map<string, { value: V; at: number }>();
  private readonly pending = new Map<string, Promise<V>>();

  constructor(
    private readonly clock: Clock,
    private readonly maxAgeMs: number,
  ) {}

  /** The cached value if young enough, else read (once for all concurrent callers); `keep` decides what is cached. */
  get(key: string, read: () => Promise<V>, keep: (v: V) => boolean = () => true): Promise<V> {
    const hit = this.entries.get(key);
    if (hit && this.clock.monotonic() - hit.at < this.maxAgeMs) return Promise.resolve(hit.value);
    const inFlight = this.pending.get(key);
    if (inFlight) return inFlight;
    const p = read().then(
      (value) => {
        this.pending.delete(key);
        if (keep(value)) this.entries.set(key, { value, at: this.clock.monotonic() });
        else this.entries.delete(key);
        return value;
      },
      (err: unknown) => {
        this.pending.delete(key);
        this.entries.delete(key);
        throw err;
      },
    );
    this.pending.set(key, p);
    return p;
  }
}

export class PodCache {
  private readonly tokens: TimedCache<string | null>;
  private readonly statuses: TimedCache<RuntimeStatus>;

  constructor(
    private readonly kube: Kube,
    clock: Clock,
    opts: Partial<PodCacheOptions> = {},
  ) {
    const o = { ...DEFAULTS, ...opts };
    this.tokens = new TimedCache(clock, o.tokenMaxAgeMs);
    this.statuses = new TimedCache(clock, o.statusMaxAgeMs);
  }

  /** The Runtime's API token; null (not cached) while its Secret or key is missing. */
  token(namespace: string, runtime: string): Promise<string | null> {
    return this.tokens.get(`${namespace}/${runtime}`, () => runtimeToken(this.kube, namespace, runtime), (t) => t !== null);
  }

  /** The pod's /v1/status: the read under way if there is one, else a new one (or one at most statusMaxAgeMs old); a failed read is not kept. */
  status(namespace: string, pod: string, client: ApiClient): Promise<RuntimeStatus> {
    return this.statuses.get(`${namespace}/${pod}`, () => client.status());
  }
}
