// Dropping a database: the engine ends its client sessions first (so clients read why, as FATAL 57P01)
// and closes its idle backends there; once PostgreSQL has no backend left on it, one transaction
// closes it to connections, gives it to the runtime and renames it to pgx_trash_<oid>, and the records
// go. The drop answers then (or, with the trash at its bound, once fewer wait): the name is free at
// once, and the DROP DATABASE runs in the background (trash.ts), off the path of drops and mints.
// Measured, a DROP DATABASE in place took 25-150 ms (a buffer scan, a checkpoint request, a barrier
// over every backend, beside the warm pool's CREATE DATABASE); the rename is a catalog update. Where a
// rename cannot be had (a session outside the engine stays, a database with per-database credentials,
// whose roles are dropped after it) the drop runs in place, WITH (FORCE), as before. A database a
// prepared transaction uses is refused at once with 55006, before any session is ended (PostgreSQL can
// neither rename nor drop it; see preparedTransactionsRefusal). Idempotent, and concurrent requests
// for one name share one drop; route() waits for a drop in progress before minting the name again.

import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import { dropDatabaseSql } from './create-database.js';
import type { MetadataStore } from './metadata.js';
import type { Registry } from './registry.js';
import { postgresSqlstate, quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';
import { isTrashName, trashName } from './names.js';
import type { Trash } from './trash.js';
import { setTimeout as sleep } from 'node:timers/promises';

/** How long a drop waits for backends to leave before it drops in place, DROP ... WITH (FORCE) ending them. */
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
  /** The engine's login baseline query for a role (see Minter's loginBaselineSql); none: not read at mint. */
  loginBaselineSql?: (roleName: string) => string;
}

export interface Termination {
  message: string;
  hint?: string;
}

/** Where a drop renames its database to instead of dropping it in place. */
export interface RenameAway {
  trash: Trash;
  /** Databases dropped in place all the same: those with per-database credentials (see credentials.ts). */
  inPlace: (name: string) => boolean;
}

/** PostgreSQL's 55006: a rename that found a session on the database after all. */
const OBJECT_IN_USE = '55006';

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
    private readonly dropped: (name: string, tombstone: string | null) => Promise<void>,
    /** Null: every drop runs in place. */
    private readonly away: RenameAway | null,
    /** How long its connection stays after the last drop (settings.ts, dropConnectionIdleMs). */
    private readonly idleCloseMs: number,
  ) {
    // Its own connection: a drop may wait on a checkpoint, and must not hold up metadata writes.
    this.conn = new AdminConnection(connect);
  }

  /** Dropped databases whose DROP DATABASE has not run yet (see trash.ts). */
  get trashBacklog(): number {
    return this.away?.trash.backlog ?? 0;
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
    const work = this.run(name, terminate, reason, tombstone).finally(() => {
      this.inProgress.delete(name);
      if (this.inProgress.size === 0) this.conn.closeWhenIdle(this.idleCloseMs);
    });
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
    const client = await this.conn.get();
    // Refused before anyone's session is ended, as PostgreSQL's DROP DATABASE ... WITH (FORCE) does.
    this.engine.closeIdleBackends(name);
    const first = await this.look(client, name);
    const ended = terminate ? this.engine.terminateSessions(name, terminate.message, terminate.hint) : 0;
    const oid = first.oid === null ? null : first.backends === 0 && ended === 0 ? first.oid : await this.untilNoBackends(client, name);
    const trash = oid === null ? null : await this.renameAway(client, name, oid);
    if (trash === null) await this.dropInPlace(client, name);
    this.registry.forget(name);
    await this.metadata.deleteDatabase(name);
    await this.dropped(name, tombstone);
    this.log.info('database-dropped', { database: name, reason, sessionsEnded: ended, ...(trash === null ? {} : { trash }) });
    // A backlog at its bound: the call answers at the pace of DROP DATABASE (trash.ts).
    if (trash !== null) await this.away!.trash.room();
  }

  /**
   * Renames `name` away to pgx_trash_<oid> for the trash to drop, in one transaction that also closes
   * it to connections and gives it to the runtime (its tenant owner could otherwise reopen it). Returns
   * the trash name, or null when the drop must run in place: no trash configured, a database with
   * credentials, or a rename that failed (a session found on it after all, 55006; the trash name taken
   * by a tenant's CREATE DATABASE, 42P04): the transaction changed nothing.
   */
  private async renameAway(client: SqlClient, name: string, oid: string): Promise<string | null> {
    if (this.away === null || this.away.inPlace(name) || isTrashName(name)) return null;
    const trash = trashName(oid);
    const db = quoteIdent(name);
    try {
      await client.query(`ALTER DATABASE ${db} ALLOW_CONNECTIONS false; ALTER DATABASE ${db} OWNER TO CURRENT_USER; ALTER DATABASE ${db} RENAME TO ${quoteIdent(trash)}`);
    } catch (err) {
      const sqlstate = postgresSqlstate(err);
      if (sqlstate === null) throw err;
      const reason = sqlstate === OBJECT_IN_USE ? 'a session outside the engine is still on it' : `the rename to ${trash} failed`;
      this.log.info('database-drop-in-place', { database: name, reason, err });
      return null;
    }
    this.away.trash.add(trash);
    return trash;
  }

  /**
   * What PostgreSQL has on `name` now: its backends, its oid (null: no such database), and, refused
   * at once as 55006, prepared transactions (see preparedTransactionsRefusal).
   */
  private async look(client: SqlClient, name: string): Promise<{ backends: number; oid: string | null }> {
    const literal = quoteLiteral(name);
    const { rows } = await client.query(
      `SELECT (SELECT count(*) FROM pg_catalog.pg_stat_activity WHERE datname = ${literal}), ` +
        `(SELECT oid FROM pg_catalog.pg_database WHERE datname = ${literal}), ` +
        `(SELECT pg_catalog.json_agg(pg_catalog.json_build_array(gid, owner, prepared) ORDER BY prepared) FROM pg_catalog.pg_prepared_xacts WHERE database = ${literal})`,
    );
    const prepared = rows[0]?.[2] ?? null;
    if (prepared !== null) throw preparedTransactionsRefusal(name, JSON.parse(prepared) as PreparedTransaction[]);
    return { backends: Number(rows[0]?.[0] ?? 0), oid: rows[0]?.[1] ?? null };
  }

  /**
   * DROP DATABASE ... WITH (FORCE), where a rename could not be had. A prepared transaction made
   * since the last look makes PostgreSQL refuse it (55006): that refusal names it as look() does.
   */
  private async dropInPlace(client: SqlClient, name: string): Promise<void> {
    try {
      await client.query(dropDatabaseSql(name));
    } catch (err) {
      if (postgresSqlstate(err) === OBJECT_IN_USE) await this.look(client, name);
      throw err;
    }
  }

  /**
   * Closes the engine's idle backends on `name` and waits, briefly, until PostgreSQL has none there.
   * DROP DATABASE ... WITH (FORCE) would end them too, but then it waits for them in steps of 100 ms
   * (CountOtherDBBackends), and a rename would wait up to 5 s and fail: a drop right after its last
   * session took 100-150 ms instead of 10-30. Sessions the engine just ended go back to the pool after
   * their reset, so it closes again each round. Returns the database's oid once no backend is left on
   * it; null when it does not exist or someone else stays connected (a direct session: dropped in
   * place, FORCE ends it).
   */
  private async untilNoBackends(client: SqlClient, name: string): Promise<string | null> {
    for (let waitedMs = 0; waitedMs < BACKEND_EXIT_WAIT_MS; waitedMs += BACKEND_EXIT_POLL_MS) {
      this.engine.closeIdleBackends(name);
      const { backends, oid } = await this.look(client, name);
      if (oid === null) return null;
      if (backends === 0) return oid;
      await sleep(BACKEND_EXIT_POLL_MS);
    }
    return null;
  }
}

/** A row of pg_prepared_xacts: gid, owner, prepared (timestamptz as JSON gives it). */
type PreparedTransaction = [string, string, string];

/**
 * PostgreSQL will not drop (nor rename) a database a prepared transaction uses: its rename waits 5 s
 * for it to go and fails, DROP DATABASE ... WITH (FORCE) fails at once (55006; a prepared transaction
 * has no backend to end). PGX answers as the latter, naming the transactions and how to finish them.
 * It does not roll them back itself: a prepared transaction is a promise to commit made to a client
 * (a transaction manager), and rolling it back would lose its data silently.
 */
export function preparedTransactionsRefusal(name: string, prepared: PreparedTransaction[]): PgxError {
  const n = prepared.length;
  const listed = prepared.slice(0, 5).map(([gid, owner, at]) => `${quoteLiteral(gid)} (prepared by role "${owner}" at ${at})`);
  const gids = prepared.slice(0, 5).map(([gid]) => quoteLiteral(gid));
  return new PgxError('OBJECT_IN_USE', `database "${name}" is being used by prepared transactions`, {
    detail: `There ${n === 1 ? 'is 1 prepared transaction' : `are ${n} prepared transactions`} using the database: ${listed.join(', ')}${n > 5 ? ', ...' : ''}.`,
    hint:
      n === 1
        ? `Connect to "${name}" and finish it: COMMIT PREPARED ${gids[0]} keeps its changes, ROLLBACK PREPARED ${gids[0]} discards them. Then drop the database again.`
        : `Connect to "${name}" and finish each: COMMIT PREPARED or ROLLBACK PREPARED ${gids.join(', ')}${n > 5 ? ' and the rest in pg_prepared_xacts' : ''}. Then drop the database again.`,
  });
}
