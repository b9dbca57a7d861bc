// What the operator reads about runtime pods on every call: the Runtime's API token (from its Secret;
// needed for each call to a pod), kept for a while, and a pod's /v1/status (read by placement for every
// candidate pod), shared by the placements that ask while a read is under way and kept for a moment.
// Without it a burst of N Branches read the same Secret about 10N times and asked every pod for its
// status (a walk of its process tree, 0.3-1.1 s under a burst) N times, each placement waiting for one.
//
// A token is never rotated by the operator (the Secret is made once), so a cached one is only stale when
// a Runtime was deleted and made again under the same name; a call refused for it is retried with
// backoff until the token is read again, at most tokenMaxAgeMs later. A status is kept statusMaxAgeMs
// (2 s), and up to 30 s it is still used while a new read runs in the background: a placement does not
// wait for the pod (a read took 0.3-1.1 s under a burst, and 77-103 ms of the runtime's CPU). What
// placement weighs (databases, memory) moves slowly, and the Branches it places meanwhile are counted by
// the PlacementLedger; a drop made by the operator forgets the pod's status, since a count that still
// includes it would send the next Branches to the other pods. A status can be from before a runtime
// died: a Branch placed on a pod whose API then refuses the connection of its create is placed again
// (branch.ts), and the pod's status is forgotten (forgetStatus), so the next placement asks the pod
// itself and finds it silent.

import type { ApiClient } from '../api/client.js';
import type { Clock } from '../clock.js';
import type { Kube } from './kube.js';
import { runtimeToken } from './pods.js';

export interface PodCacheOptions {
  tokenMaxAgeMs: number;
  /** A status younger than this is used as it is. */
  statusMaxAgeMs: number;
  /** One older, up to this, is used too while a new read runs in the background (0: wait for the read). */
  statusStaleMs: number;
}

type RuntimeStatus = Awaited<ReturnType<ApiClient['status']>>;

const DEFAULTS: PodCacheOptions = { tokenMaxAgeMs: 10_000, statusMaxAgeMs: 2_000, statusStaleMs: 30_000 };

class TimedCache<V> {
  private readonly entries = new Map<string, { value: V; at: number }>();
  private readonly pending = new Map<string, Promise<V>>();

  constructor(
    private readonly clock: Clock,
    private readonly maxAgeMs: number,
    /** Up to this age a value is still answered, while a new read runs in the background. */
    private readonly staleMs = 0,
  ) {}

  forget(key: string): void {
    this.entries.delete(key);
  }

  /** The cached value if young enough, else read (once for all concurrent callers); `keep` decides what is cached. */
  get(key: string, read: () => Promise<V>, keep: (v: V) => boolean = () => true): Promise<V> {
    const hit = this.entries.get(key);
    const age = hit ? this.clock.monotonic() - hit.at : Infinity;
    if (hit && age < this.maxAgeMs) return Promise.resolve(hit.value);
    if (hit && age < this.staleMs) {
      // Answered now; the read refreshes it for later callers (a failed read removes it).
      if (!this.pending.has(key)) this.read(key, read, keep).catch(() => undefined);
      return Promise.resolve(hit.value);
    }
    return this.pending.get(key) ?? this.read(key, read, keep);
  }

  private read(key: string, read: () => Promise<V>, keep: (v: V) => boolean): Promise<V> {
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
    this.statuses = new TimedCache(clock, o.statusMaxAgeMs, o.statusStaleMs);
  }

  /** The Runtime's API token; null (not cached) while its Secret or key is missing. */
  token(namespace: string, runtime: string): Promise<string | null> {
    return this.tokens.get(`${namespace}/${runtime}`, () => runtimeToken(this.kube, namespace, runtime), (t) => t !== null);
  }

  /** The pod's /v1/status: one at most statusMaxAgeMs old, else the read under way if there is one, else a new one; a failed read is not kept. */
  status(namespace: string, pod: string, client: ApiClient): Promise<RuntimeStatus> {
    return this.statuses.get(`${namespace}/${pod}`, () => client.status());
  }

  /** The pod did not answer a call: its kept status (if any) is not used again. */
  forgetStatus(namespace: string, pod: string): void {
    this.statuses.forget(`${namespace}/${pod}`);
  }
}
