// The runtime's own connection to PostgreSQL for admin queries: opened on first use, reopened after
// PostgreSQL restarts, shared by whoever needs one.

import type { SqlClient } from './sql-client.js';

export class AdminConnection {
  private client: Promise<SqlClient> | null = null;

  constructor(private readonly open: () => Promise<SqlClient>) {}

  get(): Promise<SqlClient> {
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

  async close(): Promise<void> {
    const current = this.client;
    this.client = null;
    if (current) await current.then((c) => c.close(), () => undefined);
  }
}
