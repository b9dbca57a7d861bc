// What the operator reads about runtime pods on every call, kept for a short while: the Runtime's API
// token (from its Secret; needed for each call to a pod) and a pod's /v1/status (read by placement for
// every candidate pod). Without it a burst of N Branches reads the same Secret about 10N times and asks
// every pod for its status (a walk of its process tree) N times. Concurrent misses share one read.
//
// Staleness is bounded and harmless: the operator never rotates a token (the Secret is made once), so a
// cached token is only stale when a Runtime was deleted and made again under the same name, and a call
// refused for it is retried with backoff until the token is read again, at most tokenMaxAgeMs later; placement counts the Branches it placed itself
// (status lags a burst anyway), so a status a second old places as well as a fresh one.

import type { ApiClient } from '../api/client.js';
import type { Clock } from '../clock.js';
import type { Kube } from './kube.js';
import { runtimeToken } from './pods.js';

export interface PodCacheOptions {
  tokenMaxAgeMs: number;
  statusMaxAgeMs: number;
}

type RuntimeStatus = Awaited<ReturnType<ApiClient['status']>>;

const DEFAULTS: PodCacheOptions = { tokenMaxAgeMs: 10_000, statusMaxAgeMs: 1_000 };

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

  /** The pod's /v1/status, at most statusMaxAgeMs old; a failed read is not cached. */
  status(namespace: string, pod: string, client: ApiClient): Promise<RuntimeStatus> {
    return this.statuses.get(`${namespace}/${pod}`, () => client.status());
  }
}
