// The mint queue: a few worker connections run creates and claims, in arrival order. It is bounded in
// length, and a request waits as long as the queue moves: a burst of hundreds of new names is served
// at the pace PostgreSQL creates databases, however long that takes in all. Only when no request has
// finished for --mint-timeout (a create stuck on a busy template, a stalled PostgreSQL) are the waiting
// ones told 57P03 with what to do, instead of piling up without limit.

import { systemClock, type Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import type { SqlClient } from '../postgres/sql-client.js';

export interface MintQueueOptions {
  /** Creates run at once on this many connections: CREATE DATABASE from one template runs concurrently. */
  workers: number;
  /**
   * Worker connections kept open while nothing waits (default: all): the others are opened by a burst
   * and closed when it has passed, so an idle runtime holds no more backends than it needs.
   */
  keepOpen?: number;
  /** Requests allowed to wait beyond the running ones; more are refused with 57P03. */
  maxQueued: number;
  /**
   * A waiting request is refused with 57P03 once it has waited this long and no request finished
   * meanwhile: the queue is stuck, not slow. Once started, a create runs to the end.
   */
  waitTimeoutMs: number;
  connect: () => Promise<SqlClient>;
  clock?: Clock;
}

interface Job {
  label: string;
  /** Runs the job on a worker and settles its promise; never rejects. */
  start(worker: AdminConnection): Promise<void>;
  fail(err: Error): void;
  /** clock.monotonic() when it was queued. */
  since: number;
}

export class MintQueue {
  private readonly free: AdminConnection[] = [];
  private readonly all: AdminConnection[] = [];
  private readonly waiting: Job[] = [];
  private readonly running = new Set<Promise<void>>();
  private readonly clock: Clock;
  /** clock.monotonic() when a request last finished (or the queue was made). */
  private lastProgress: number;
  private stallTimer: NodeJS.Timeout | undefined;
  private stopped = false;

  constructor(private readonly opts: MintQueueOptions) {
    this.clock = opts.clock ?? systemClock;
    this.lastProgress = this.clock.monotonic();
    for (let i = 0; i < opts.workers; i++) {
      const worker = new AdminConnection(opts.connect);
      this.all.push(worker);
      this.free.push(worker);
    }
  }

  /** Requests waiting or running. */
  get pending(): number {
    return this.waiting.length + this.running.size;
  }

  /** Requests waiting for a worker (all workers busy). */
  get queued(): number {
    return this.waiting.length;
  }

  submit<T>(label: string, run: (client: SqlClient) => Promise<T>): Promise<T> {
    if (this.stopped) return Promise.reject(shuttingDown(label));
    if (this.free.length === 0 && this.waiting.length >= this.opts.maxQueued) {
      return Promise.reject(
        new PgxError('CANNOT_CONNECT_NOW', `cannot create database "${label}" now: the mint queue is full (${this.waiting.length} waiting)`, {
          hint: `Retry in a moment. The mint queue holds --mint-queue-size (${this.opts.maxQueued}) requests; a larger --pool-size keeps more spares ready for bursts.`,
        }),
      );
    }
    return new Promise<T>((resolve, reject) => {
      const job: Job = {
        label,
        start: (worker) => worker.get().then(run).then(resolve, reject),
        fail: reject,
        since: this.clock.monotonic(),
      };
      this.waiting.push(job);
      this.dispatch();
      if (this.waiting.length > 0 && this.stallTimer === undefined) this.armStallTimer();
    });
  }

  /** Refuses what still waits, lets running creates finish, closes the worker connections. */
  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
    for (const job of this.waiting.splice(0)) job.fail(shuttingDown(job.label));
    await Promise.all([...this.running]);
    await Promise.all(this.all.map((w) => w.close()));
  }

  private dispatch(): void {
    while (this.free.length > 0 && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      const worker = this.free.pop()!;
      const done: Promise<void> = job.start(worker).finally(() => {
        this.running.delete(done);
        this.free.push(worker);
        this.lastProgress = this.clock.monotonic();
        if (this.stopped) return;
        this.dispatch();
        this.armStallTimer();
        if (this.waiting.length === 0 && this.free.length > (this.opts.keepOpen ?? this.opts.workers)) void worker.close();
      });
      this.running.add(done);
    }
  }

  /** When the oldest waiting request runs out of patience: --mint-timeout after it came or the last progress. */
  private deadline(job: Job): number {
    return Math.max(job.since, this.lastProgress) + this.opts.waitTimeoutMs;
  }

  private armStallTimer(): void {
    clearTimeout(this.stallTimer);
    this.stallTimer = undefined;
    const oldest = this.waiting[0];
    if (!oldest) return;
    const wait = Math.max(0, this.deadline(oldest) - this.clock.monotonic());
    this.stallTimer = setTimeout(() => this.refuseStalled(), wait);
  }

  /** Refuses the requests that waited --mint-timeout with no request finishing meanwhile. */
  private refuseStalled(): void {
    this.stallTimer = undefined;
    const now = this.clock.monotonic();
    const stalledFor = Math.round(now - this.lastProgress);
    while (this.waiting.length > 0 && this.deadline(this.waiting[0]!) <= now) {
      const job = this.waiting.shift()!;
      job.fail(
        new PgxError('CANNOT_CONNECT_NOW', `timed out waiting to create database "${job.label}": no database was created for ${stalledFor} ms`, {
          hint: `Retry in a moment. A mint waits while creations progress, and at most --mint-timeout seconds (${this.opts.waitTimeoutMs / 1000}) without one finishing; look for a session holding the template, or raise --mint-timeout.`,
        }),
      );
    }
    this.armStallTimer();
  }
}

function shuttingDown(label: string): PgxError {
  return new PgxError('CANNOT_CONNECT_NOW', `cannot create database "${label}": the runtime is shutting down`, {
    hint: 'Connect again once the runtime has restarted.',
  });
}
