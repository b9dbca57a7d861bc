// The mint queue: a few worker connections run creates and claims, in arrival order. It is bounded in
// length and in waiting time, so a burst of new names is served at the pace PostgreSQL creates
// databases and the rest are told 57P03 (with what to do) instead of piling up without limit.

import { PgxError } from '../../errors.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import type { SqlClient } from '../postgres/sql-client.js';

export interface MintQueueOptions {
  /** Creates run at once on this many connections: CREATE DATABASE from one template runs concurrently. */
  workers: number;
  /** Requests allowed to wait beyond the running ones; more are refused with 57P03. */
  maxQueued: number;
  /** How long a request may wait for a worker; then 57P03. Once started, a create runs to the end. */
  waitTimeoutMs: number;
  connect: () => Promise<SqlClient>;
}

interface Job {
  label: string;
  /** Runs the job on a worker and settles its promise; never rejects. */
  start(worker: AdminConnection): Promise<void>;
  fail(err: Error): void;
  timer: NodeJS.Timeout;
}

export class MintQueue {
  private readonly free: AdminConnection[] = [];
  private readonly all: AdminConnection[] = [];
  private readonly waiting: Job[] = [];
  private readonly running = new Set<Promise<void>>();
  private stopped = false;

  constructor(private readonly opts: MintQueueOptions) {
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
        timer: setTimeout(() => {
          const i = this.waiting.indexOf(job);
          if (i < 0) return;
          this.waiting.splice(i, 1);
          reject(
            new PgxError('CANNOT_CONNECT_NOW', `timed out after ${this.opts.waitTimeoutMs} ms waiting to create database "${label}"`, {
              hint: 'Retry in a moment. Creation waits at most --mint-timeout seconds; raise it, or --pool-size so more mints are served from spares.',
            }),
          );
        }, this.opts.waitTimeoutMs),
      };
      this.waiting.push(job);
      this.dispatch();
    });
  }

  /** Refuses what still waits, lets running creates finish, closes the worker connections. */
  async stop(): Promise<void> {
    this.stopped = true;
    for (const job of this.waiting.splice(0)) {
      clearTimeout(job.timer);
      job.fail(shuttingDown(job.label));
    }
    await Promise.all([...this.running]);
    await Promise.all(this.all.map((w) => w.close()));
  }

  private dispatch(): void {
    while (this.free.length > 0 && this.waiting.length > 0) {
      const job = this.waiting.shift()!;
      clearTimeout(job.timer);
      const worker = this.free.pop()!;
      const done: Promise<void> = job.start(worker).finally(() => {
        this.running.delete(done);
        this.free.push(worker);
        if (!this.stopped) this.dispatch();
      });
      this.running.add(done);
    }
  }
}

function shuttingDown(label: string): PgxError {
  return new PgxError('CANNOT_CONNECT_NOW', `cannot create database "${label}": the runtime is shutting down`, {
    hint: 'Connect again once the runtime has restarted.',
  });
}
