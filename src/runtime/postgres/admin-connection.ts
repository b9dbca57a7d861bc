// The runtime's own connection to PostgreSQL for admin queries: opened on first use, reopened after
// PostgreSQL restarts, shared by whoever needs one. An owner whose work comes in bursts (drops) hands
// it back when it has none (closeWhenIdle), so an idle runtime does not keep that backend: each holds
// 2-4 MB of the runtime's memory (its own, and its share of PostgreSQL's mapped files).

import type { SqlClient } from './sql-client.js';

export class AdminConnection {
  private client: Promise<SqlClient> | null = null;
  private idleTimer: NodeJS.Timeout | undefined;

  constructor(private readonly open: () => Promise<SqlClient>) {}

  get(): Promise<SqlClient> {
    this.cancelIdleClose();
    if (this.client === null) {
      const opening = this.open();
      this.client = opening;
      opening.then(
        (c) => c.closed.then(() => {
          if (this.client === opening) this.client = null;
        }),
        () => {
          if (this.client === opening) this.client = null;
        },
      );
    }
    return this.client;
  }

  /**
   * The owner holds no client and has nothing to run: the connection closes after `ms` unless get()
   * is called first (the next use then opens a new one, a few ms).
   */
  closeWhenIdle(ms: number): void {
    this.cancelIdleClose();
    if (this.client === null) return;
    this.idleTimer = setTimeout(() => {
      this.idleTimer = undefined;
      void this.close();
    }, ms);
    this.idleTimer.unref();
  }

  private cancelIdleClose(): void {
    if (this.idleTimer !== undefined) clearTimeout(this.idleTimer);
    this.idleTimer = undefined;
  }

  async close(): Promise<void> {
    this.cancelIdleClose();
    const current = this.client;
    this.client = null;
    if (current) await current.then((c) => c.close(), () => undefined);
  }
}
