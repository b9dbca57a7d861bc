// A list+watch cache of one resource, on client-node's makeInformer, made to survive: client-node stops an
// informer for good on 'error' (a failed list, a refused watch), so it is restarted here with a capped
// backoff; `synced` resolves after the first complete list (a controller must not act on an empty cache
// that only looks empty); every change calls `onChange`, and `resync()` replays every cached object, the
// periodic safety net for events a silently stalled watch never delivered.

import { makeInformer, type KubeConfig, type KubernetesListObject, type KubernetesObject } from '@kubernetes/client-node';
import type { Logger } from '../log.js';

export interface CacheOptions<T extends KubernetesObject> {
  kc: KubeConfig;
  /** The watch path, e.g. /apis/pgx.dev/v1alpha1/namespaces/default/branches. */
  path: string;
  /** The list call; it must apply labelSelector itself (makeInformer applies it to the watch only). */
  list: () => Promise<KubernetesListObject<T>>;
  labelSelector?: string;
  onChange: (obj: T, kind: 'add' | 'update' | 'delete') => void;
  logger: Logger;
  maxRestartDelayMs?: number;
}

export class ResourceCache<T extends KubernetesObject> implements ObjectCache<T> {
  private readonly informer;
  private stopped = false;
  private restartDelayMs = 0;
  private restartTimer: NodeJS.Timeout | null = null;
  private resolveSynced!: () => void;
  /** Resolves once the first list has filled the cache. */
  readonly synced: Promise<void>;

  constructor(private readonly opts: CacheOptions<T>) {
    this.synced = new Promise((resolve) => (this.resolveSynced = resolve));
    const list = async (): Promise<KubernetesListObject<T>> => {
      const result = await opts.list();
      // The informer fills its cache from this list right after it resolves; mark synced a turn later.
      setImmediate(() => this.resolveSynced());
      return result;
    };
    this.informer = makeInformer<T>(opts.kc, opts.path, list, opts.labelSelector);
    this.informer.on('add', (o) => opts.onChange(o, 'add'));
    this.informer.on('update', (o) => opts.onChange(o, 'update'));
    this.informer.on('delete', (o) => opts.onChange(o, 'delete'));
    this.informer.on('connect', () => (this.restartDelayMs = 0));
    this.informer.on('error', (err: unknown) => this.restart(err));
  }

  async start(): Promise<void> {
    await this.informer.start();
  }

  get(name: string, namespace: string): T | undefined {
    return this.informer.get(name, namespace);
  }

  /** Every cached object, in one namespace or (undefined) all. */
  list(namespace?: string): T[] {
    return [...this.informer.list(namespace)];
  }

  /** Calls onChange for every cached object, as a periodic resync. */
  resync(): void {
    for (const o of this.informer.list()) this.opts.onChange(o, 'update');
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.restartTimer) clearTimeout(this.restartTimer);
    await this.informer.stop();
  }

  private restart(err: unknown): void {
    if (this.stopped) return;
    this.restartDelayMs = Math.min(Math.max(this.restartDelayMs * 2, 250), this.opts.maxRestartDelayMs ?? 30_000);
    this.opts.logger.warn('informer stopped; restarting', { path: this.opts.path, error: err instanceof Error ? err.message : String(err), retry_ms: this.restartDelayMs });
    this.restartTimer = setTimeout(() => {
      this.restartTimer = null;
      if (!this.stopped) this.informer.start().catch((e: unknown) => this.restart(e));
    }, this.restartDelayMs);
    this.restartTimer.unref();
  }
}

/** What the controllers and the operator use of a cache: one namespace, all, or a list of them. */
export interface ObjectCache<T extends KubernetesObject> {
  readonly synced: Promise<void>;
  start(): Promise<void>;
  stop(): Promise<void>;
  get(name: string, namespace: string): T | undefined;
  list(namespace?: string): T[];
  resync(): void;
}

/**
 * One cache per namespace behind the interface of one, for an operator watching a list of namespaces
 * (--namespace a,b,c): each is a list and watch of that namespace only, so the operator needs rights
 * in those namespaces and nowhere else.
 */
export class NamespacesCache<T extends KubernetesObject> implements ObjectCache<T> {
  readonly synced: Promise<void>;

  constructor(private readonly caches: ReadonlyMap<string, ResourceCache<T>>) {
    this.synced = Promise.all([...caches.values()].map((c) => c.synced)).then(() => undefined);
  }

  async start(): Promise<void> {
    await Promise.all([...this.caches.values()].map((c) => c.start()));
  }

  async stop(): Promise<void> {
    await Promise.all([...this.caches.values()].map((c) => c.stop()));
  }

  get(name: string, namespace: string): T | undefined {
    return this.caches.get(namespace)?.get(name, namespace);
  }

  list(namespace?: string): T[] {
    if (namespace !== undefined) return this.caches.get(namespace)?.list(namespace) ?? [];
    return [...this.caches.values()].flatMap((c) => c.list());
  }

  resync(): void {
    for (const c of this.caches.values()) c.resync();
  }
}
