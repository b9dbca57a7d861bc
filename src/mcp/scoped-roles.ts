// The roles the MCP server acts as inside databases. run_sql and the schema resource never connect as
// the runtime's admin (a superuser: COPY ... TO PROGRAM, pg_read_file, dblink into other tenants): for
// each database it touches, the server asks the control API for that database's own credential
// (POST /v1/databases/{name}/credentials, src/runtime/databases/credentials.ts) and connects through
// the engine with it, so an agent meets the same walls as any tenant's connection (42501 from
// PostgreSQL itself). One credential per database, made at first use and kept for the life of this
// server (one `pgx mcp` process: a stdio session, or the HTTP server with all its requests); revoked
// when the server stops, forgotten when the database is dropped (the runtime drops its credentials).
//
// Objects a credential creates are its own until it is revoked; the runtime then hands them to the
// database's owner. So that the next server's credential can still use them, each credential grants,
// by default privileges, everything it creates to the group all of the database's credentials belong to.

import pg from 'pg';
import type { ApiClient } from '../api/client.js';
import { PgxError } from '../errors.js';

/** The NOLOGIN group every per-database credential is a member of (CREDENTIALS_GROUP in runtime/databases/credentials.ts). */
const CREDENTIALS_GROUP = 'pgx_credentials';

const DEFAULT_PRIVILEGES = ['TABLES', 'SEQUENCES', 'FUNCTIONS', 'TYPES', 'SCHEMAS']
  .map((kind) => `ALTER DEFAULT PRIVILEGES GRANT ALL ON ${kind} TO ${CREDENTIALS_GROUP}`)
  .join('; ');

interface Scoped {
  user: string;
  url: string;
}

/** Login failures that mean the credential is gone (revoked, or its database dropped and minted again). */
const STALE_LOGIN = new Set(['28P01', '28000']);

export class ScopedRoles {
  /** database -> its credential, or the request making it (two calls at once make one). */
  private readonly byDatabase = new Map<string, Promise<Scoped>>();
  private closed = false;

  constructor(private readonly api: ApiClient) {}

  /**
   * Runs `use` with a postgresql:// URL that logs in as `database`'s own credential. A credential that
   * no longer logs in is replaced once.
   */
  async withUrl<T>(database: string, use: (url: string) => Promise<T>): Promise<T> {
    const pending = this.credential(database);
    const first = await pending;
    try {
      return await use(first.url);
    } catch (err) {
      if (!STALE_LOGIN.has((err as { code?: string }).code ?? '')) throw err;
      // Unless a call beside this one has replaced it already.
      if (this.byDatabase.get(database) === pending) this.byDatabase.delete(database);
      return use((await this.credential(database)).url);
    }
  }

  /** The database was dropped: the runtime dropped its credentials with it. */
  forget(database: string): void {
    this.byDatabase.delete(database);
  }

  /** Revokes every credential this server made; errors (a runtime gone already) are ignored. */
  async revokeAll(): Promise<void> {
    this.closed = true;
    const held = [...this.byDatabase];
    this.byDatabase.clear();
    await Promise.all(
      held.map(async ([database, pending]) => {
        const scoped = await pending.catch(() => null);
        if (scoped !== null) await this.api.revokeCredential(database, scoped.user).catch(() => undefined);
      }),
    );
  }

  private credential(database: string): Promise<Scoped> {
    if (this.closed) return Promise.reject(new PgxError('ADMIN_SHUTDOWN', 'the MCP server is stopping', { hint: 'Start it again and repeat the call.' }));
    let pending = this.byDatabase.get(database);
    if (pending === undefined) {
      pending = this.make(database);
      this.byDatabase.set(database, pending);
      // A failed request is not kept: the next call asks again.
      pending.catch(() => {
        if (this.byDatabase.get(database) === pending) this.byDatabase.delete(database);
      });
    }
    return pending;
  }

  private async make(database: string): Promise<Scoped> {
    let created;
    try {
      created = await this.api.createCredential(database);
    } catch (err) {
      if (err instanceof PgxError && err.code === 'UNKNOWN_DATABASE') throw await this.notMinted(database, err);
      throw err;
    }
    const scoped = { user: created.user, url: created.url };
    const client = new pg.Client({ connectionString: scoped.url, application_name: 'pgx-mcp', connectionTimeoutMillis: 15_000 });
    client.on('error', () => undefined);
    try {
      await client.connect();
      await client.query(DEFAULT_PRIVILEGES);
    } catch (err) {
      await this.api.revokeCredential(database, scoped.user).catch(() => undefined);
      throw err;
    } finally {
      await client.end().catch(() => undefined);
    }
    return scoped;
  }

  /** Why there is no credential for `database`, and what to do instead. */
  private async notMinted(database: string, cause: PgxError): Promise<PgxError> {
    const templates = await this.api.listTemplates().catch(() => []);
    if (templates.some((t) => t.name === database)) {
      return new PgxError('INSUFFICIENT_PRIVILEGE', `"${database}" is a template: the MCP server runs SQL only in databases PGX minted, as each one's own role`, {
        hint: `create_database {"template": "${database}"} makes a database copied from it to work in; a template itself is changed by its owner with pgx template (unseal, change, seal).`,
        cause,
      });
    }
    return new PgxError('UNKNOWN_DATABASE', `database "${database}" is not one PGX minted: the MCP server runs SQL only in minted databases, as each one's own role`, {
      hint: 'list_databases shows the databases it can use; create_database makes one. Reach any other database with your own client and credentials.',
      cause,
    });
  }
}
