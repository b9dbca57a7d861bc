// Dropping a database: the engine ends its client sessions first (so clients read why, as FATAL 57P01),
// then DROP DATABASE IF EXISTS ... WITH (FORCE), then the records go. Idempotent, and concurrent
// requests for one name share one drop; route() waits for a drop in progress before minting the name
// again.

import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import { dropDatabaseSql } from './create-database.js';
import type { MetadataStore } from './metadata.js';
import type { Registry } from './registry.js';
import { quoteLiteral, type SqlClient } from '../postgres/sql-client.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long a drop waits for backends to leave before DROP ... WITH (FORCE) ends them itself. */
const BACKEND_EXIT_WAIT_MS = 200;
const BACKEND_EXIT_POLL_MS = 2;

/** What the runtime needs from the engine's session table; the CLI passes the engine's methods. */
export interface EngineSessions {
  /** Ends every client session on `database` with FATAL 57P01 carrying `message`; returns how many. */
  terminateSessions(database: string, message: string, hint?: string): number;
  /** Client sessions per database, as the engine counts them. */
  sessionsPerDatabase(): Map<string, number>;
  /** Closes the engine's idle pooled backends on `database`; returns how many. */
  closeIdleBackends(database: string): number;
}

export interface Termination {
  message: string;
  hint?: string;
}

export class Dropper {
  private readonly conn: AdminConnection;
  private readonly inProgress = new Map<string, Promise<void>>();
  private stopping = false;

  constructor(
    connect: () => Promise<SqlClient>,
    private readonly registry: Registry,
    private readonly metadata: MetadataStore,
    private readonly engine: EngineSessions,
    private readonly log: Logger,
    /** After a drop, before routing may mint the name again: what else goes with it (credentials, a tombstone). */
    private readonly dropped: (name: string, tombstone: string | null) => Promise<void> = async () => undefined,
  ) {
    // Its own connection: a drop may wait on a checkpoint, and must not hold up metadata writes.
    this.conn = new AdminConnection(connect);
  }

  /** The drop in progress for `name`, if any. */
  dropping(name: string): Promise<void> | undefined {
    return this.inProgress.get(name);
  }

  /**
   * Drops `name`. `terminate` is what its client sessions are told; null when it has none to tell
   * (the janitor's idle drops). `reason` is logged and names the setting that caused the drop.
   * `tombstone`: why, for the tombstone it leaves (tombstones.ts); null to leave none.
   */
  drop(name: string, terminate: Termination | null, reason: string, tombstone: string | null = null): Promise<void> {
    const running = this.inProgress.get(name);
    if (running) return running;
    if (this.stopping) {
      return Promise.reject(
        new PgxError('CANNOT_CONNECT_NOW', `database "${name}" was not dropped: the runtime is shutting down`, {
          hint: 'Its record stays: the janitor drops it when the runtime starts again, or drop it then.',
        }),
      );
    }
    const work = this.run(name, terminate, reason, tombstone).finally(() => this.inProgress.delete(name));
    this.inProgress.set(name, work);
    return work;
  }

  /**
   * Begins no new drop. The janitor may have dozens due (seconds each on a busy machine); a stop that
   * waited for them all would outlast a container's grace period. What is left keeps its record and
   * is dropped after the next start.
   */
  stopAccepting(): void {
    this.stopping = true;
  }

  /** Set when the runtime stops: no new drop begins (see stopAccepting). */
  get closing(): boolean {
    return this.stopping;
  }

  /** Waits for the drops already begun, then closes the connection. */
  async close(): Promise<void> {
    this.stopAccepting();
    await Promise.all([...this.inProgress.values()].map((p) => p.catch(() => undefined)));
    await this.conn.close();
  }

  private async run(name: string, terminate: Termination | null, reason: string, tombstone: string | null): Promise<void> {
    const ended = terminate ? this.engine.terminateSessions(name, terminate.message, terminate.hint) : 0;
    const client = await this.conn.get();
    await this.untilNoBackends(client, name);
    await client.query(dropDatabaseSql(name));
    this.registry.forget(name);
    await this.metadata.deleteDatabase(name);
    await this.dropped(name, tombstone);
    this.log.info('database-dropped', { database: name, reason, sessionsEnded: ended });
  }

  /**
   * Closes the engine's idle backends on `name` and waits, briefly, until PostgreSQL has none there.
   * DROP DATABASE ... WITH (FORCE) would end them too, but then it waits for them in steps of 100 ms
   * (CountOtherDBBackends): a drop right after its last session took 100-150 ms instead of 10-30.
   * Sessions the engine just ended go back to the pool after their reset, so it closes again each round.
   */
  private async untilNoBackends(client: SqlClient, name: string): Promise<void> {
    for (let waitedMs = 0; waitedMs < BACKEND_EXIT_WAIT_MS; waitedMs += BACKEND_EXIT_POLL_MS) {
      this.engine.closeIdleBackends(name);
      const { rows } = await client.query(`SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE datname = ${quoteLiteral(name)}`);
      if (Number(rows[0]?.[0] ?? 0) === 0) return;
      await sleep(BACKEND_EXIT_POLL_MS);
    }
    // Someone else is still connected (a direct session): FORCE ends it.
  }
}
