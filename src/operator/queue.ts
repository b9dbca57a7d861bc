// The work queue of a controller, after client-go's workqueue: keys ("namespace/name") not objects, so a
// burst of events for one object is one reconcile; `dirty` + `processing` give one worker per key and a
// rerun when the key is dirtied while it runs; a failing key is retried after a per-key exponential
// backoff (capped), reset when it succeeds; `addAfter` schedules a key (TTLs, polling). Workers run only
// while the queue is active, so a replica that is not the leader keeps its keys without acting on them.

export interface QueueOptions {
  /** Keys reconciled at once (each key by one worker at a time). */
  workers: number;
  /** First retry delay of a failing key; doubles on each failure. */
  baseDelayMs: number;
  maxDelayMs: number;
}

export type Worker = (key: string) => Promise<void>;

export class WorkQueue {
  private readonly queue: string[] = [];
  private readonly dirty = new Set<string>();
  private readonly processing = new Set<string>();
  private readonly failures = new Map<string, number>();
  private readonly timers = new Map<string, { at: number; timer: NodeJS.Timeout }>();
  private running = 0;
  private active = false;
  private stopped = false;
  private idleWaiters: (() => void)[] = [];

  constructor(
    private readonly work: Worker,
    private readonly opts: QueueOptions,
    /** Called when a key's work threw; the key is retried after its backoff. */
    private readonly onError: (key: string, err: unknown, retryInMs: number) => void,
  ) {}

  /** Reconcile `key` soon; a key already waiting is not queued twice. */
  add(key: string): void {
    if (this.stopped || this.dirty.has(key)) return;
    this.dirty.add(key);
    // A key being processed is queued again when its worker finishes (see done()).
    if (!this.processing.has(key)) this.queue.push(key);
    this.pump();
  }

  /** Reconcile `key` after `ms`; an earlier schedule of the same key wins. */
  addAfter(key: string, ms: number): void {
    if (this.stopped) return;
    if (ms <= 0) return this.add(key);
    // setTimeout's limit is about 24.8 days; a later time is reached by rescheduling.
    const delay = Math.min(ms, 2 ** 31 - 1);
    const at = performance.now() + delay;
    const existing = this.timers.get(key);
    if (existing && existing.at <= at) return;
    if (existing) clearTimeout(existing.timer);
    const timer = setTimeout(() => {
      this.timers.delete(key);
      this.add(key);
    }, delay);
    timer.unref();
    this.timers.set(key, { at, timer });
  }

  /** Start or pause the workers (leader election flips this); queued keys wait while paused. */
  setActive(active: boolean): void {
    this.active = active;
    this.pump();
  }

  get length(): number {
    return this.queue.length;
  }

  /** Resolves when no key is queued or running (tests, and a clean stop). */
  idle(): Promise<void> {
    if (this.running === 0 && (this.queue.length === 0 || !this.active)) return Promise.resolve();
    return new Promise((resolve) => this.idleWaiters.push(resolve));
  }

  /** Stops scheduling; running reconciles finish (await idle()). */
  stop(): void {
    this.stopped = true;
    this.active = false;
    for (const t of this.timers.values()) clearTimeout(t.timer);
    this.timers.clear();
    this.queue.length = 0;
    this.dirty.clear();
  }

  private pump(): void {
    while (this.active && this.running < this.opts.workers && this.queue.length > 0) {
      const key = this.queue.shift()!;
      this.dirty.delete(key);
      this.processing.add(key);
      this.running++;
      void this.run(key);
    }
    if (this.running === 0 && (this.queue.length === 0 || !this.active)) {
      const waiters = this.idleWaiters;
      this.idleWaiters = [];
      for (const w of waiters) w();
    }
  }

  private async run(key: string): Promise<void> {
    try {
      await this.work(key);
      this.failures.delete(key);
    } catch (err) {
      const n = (this.failures.get(key) ?? 0) + 1;
      this.failures.set(key, n);
      const delay = Math.min(this.opts.baseDelayMs * 2 ** (n - 1), this.opts.maxDelayMs);
      this.onError(key, err, delay);
      this.addAfter(key, delay);
    } finally {
      this.processing.delete(key);
      this.running--;
      if (this.dirty.has(key)) this.queue.push(key);
      this.pump();
    }
  }
}
