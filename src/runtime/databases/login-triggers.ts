// Whether any database in the cluster has a login event trigger (pg_database.dathasloginevt). While
// none has, a warm mint sends the client's login beside its claim (mint.ts ClaimSent, engine/ports.ts
// Route.made), and that login can reach a database of the name made outside PGX before the claim fails
// on it. Such a login is closed unserved, and the one thing it could run as the client's role on the
// way is a login event trigger there (with that database's owner's settings, search_path included).
// Only a superuser creates one, but a tenant with CREATEDB copies it with a template that has one. So
// with any in the cluster, the login waits for the claim, as before. Read by each refill after its
// spare (so after every warm mint, off the client's path); not yet read counts as some.

import type { SqlClient } from '../postgres/sql-client.js';

export class LoginTriggers {
  private some = true;

  /** No database had a login event trigger at the last read. */
  get none(): boolean {
    return !this.some;
  }

  /** A read that fails counts as some (the refill's next statement meets the same trouble and reports it). */
  async read(client: SqlClient): Promise<void> {
    const { rows } = await client.query('SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_database WHERE dathasloginevt)').catch(() => ({ rows: [] }));
    this.some = rows[0]?.[0] !== 'f';
  }
}
