// Concurrently active backends per database (--max-active-per-db). A session is active from the first
// message it sends while idle until PostgreSQL says the transaction is over (ReadyForQuery 'I' with
// nothing in flight): the unit PgBouncer's transaction pooling counts. Beyond the cap, a session's
// next transaction waits in a first-come queue, so a neighbour's 50-connection migration takes turns
// on a few backends instead of pushing every other database's latency up.

import { PgxError } from '../errors.js';

export interface Waiter {
  /** Resolves when the slot is granted; rejects with 53300 when the wait times out. */
  readonly granted: Promise<void>;
  /** The session left while waiting: gives up its place (or the slot, if granted meanwhile). */
  abandon(): void;
}

interface Queued {
  grant(): void;
  timer: NodeJS.Timeout;
  done: boolean;
}

export class ActiveSlots {
  private readonly active = new Map<string, number>();
  private readonly queues = new Map<string, Queued[]>();

  constructor(
    /** Active sessions per database at once; null: no cap. */
    private readonly limit: number | null,
    private readonly waitTimeoutMs: number,
  ) {}

  get enabled(): boolean {
    return this.limit !== null;
  }

  /** Takes a slot on `database`: null when taken at once, else a Waiter for the queue. */
  acquire(database: string): Waiter | null {
    const n = this.active.get(database) ?? 0;
    if (this.limit === null || n < this.limit) {
      this.active.set(database, n + 1);
      return null;
    }
    return this.enqueue(database);
  }

  /** Gives a slot back; the first waiter on the database gets it. */
  release(database: string): void {
    const queue = this.queues.get(database);
    while (queue && queue.length > 0) {
      const next = queue.shift()!;
      if (next.done) continue;
      if (queue.length === 0) this.queues.delete(database);
      next.grant(); // the slot passes on: the count stays
      return;
    }
    this.queues.delete(database);
    const n = this.active.get(database) ?? 0;
    if (n <= 1) this.active.delete(database);
    else this.active.set(database, n - 1);
  }

  /** Sessions waiting for a slot, over all databases (status). */
  get waiting(): number {
    let n = 0;
    for (const q of this.queues.values()) for (const w of q) if (!w.done) n++;
    return n;
  }

  private enqueue(database: string): Waiter {
    let grantedNow = false;
    let entry!: Queued;
    const granted = new Promise<void>((resolve, reject) => {
      entry = {
        done: false,
        grant: () => {
          entry.done = true;
          clearTimeout(entry.timer);
          grantedNow = true;
          resolve();
        },
        timer: setTimeout(() => {
          entry.done = true;
          reject(
            new PgxError('TOO_MANY_CONNECTIONS', `too many active sessions on database "${database}": waited ${this.waitTimeoutMs} ms for one of its ${this.limit} active backends`, {
              hint: 'Other sessions on this database hold long transactions; keep transactions short, or raise --max-active-per-db or --active-wait-timeout.',
            }),
          );
        }, this.waitTimeoutMs),
      };
    });
    const queue = this.queues.get(database);
    if (queue) queue.push(entry);
    else this.queues.set(database, [entry]);
    return {
      granted,
      abandon: () => {
        if (grantedNow) {
          this.release(database);
          return;
        }
        entry.done = true;
        clearTimeout(entry.timer);
      },
    };
  }
}
