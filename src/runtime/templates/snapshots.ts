// Snapshots for agents: pgx_snapshot_database(db, name) turns a database's current state into a new
// sealed template (a copy-on-write clone where the filesystem clones), and pgx_restore_database(db,
// name) puts the database back to that state under the same name. This is what an agent calls before a
// risky migration.
//
// PostgreSQL copies a database only while nobody else is connected to it. So both operations hold new
// connects to `db` at the router, end or refuse the sessions still open (refuse with 55006 unless
// forced; forced sessions get 57P01 naming the operation), close the engine's idle backends on it,
// copy, and let connects through again. A restore builds the copy under a scratch name first: if the
// copy fails, the database is untouched.
//
// A snapshot belongs to its database unless kept (keep): it goes when PGX drops the database
// (disposable-databases.ts), and --snapshot-retention caps how many unkept ones a database has, the
// oldest going first when a new one is taken.

import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { closeToPublicSql, createDatabase, createDatabaseSql, sealSql, terminateBackends } from '../databases/create-database.js';
import type { EngineSessions } from '../databases/dropper.js';
import type { MetadataStore } from '../databases/metadata.js';
import { buildName, controlSqlName, databaseDoesNotExist, isReservedName, isSystemDatabase, templateNameProblem } from '../databases/names.js';
import { functionDenied, snapshotDenied, type Permissions } from '../databases/permissions.js';
import type { TemplateRecord } from '../databases/records.js';
import type { Registry } from '../databases/registry.js';
import { quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

export interface SnapshotCaller {
  user: string;
  /** The database the caller is connected to, or null (the HTTP API). */
  database: string | null;
}

export interface SnapshotsOptions {
  prefix: string;
  /** A connection that may run CREATE DATABASE (file_copy_method set where clones work). */
  connect: () => Promise<SqlClient>;
  registry: Registry;
  metadata: MetadataStore;
  permissions: Permissions;
  engine: EngineSessions;
  /** Runs `work` while new connects to `database` wait at the router. */
  holdConnects: <T>(database: string, work: () => Promise<T>) => Promise<T>;
  /** Scratch names in use, so reconcile leaves them alone. */
  scratches: Set<string>;
  /** After a restore replaced `database` (owned by `owner`): put back what belonged to the old one. */
  replaced: (database: string, owner: string) => Promise<void>;
  /** Unkept snapshots a database keeps at most (--snapshot-retention); null: no cap. */
  retention: number | null;
  /** Databases a tenant role may hold (--max-databases-per-role); a snapshot it owns is one. null: no cap. */
  maxDatabasesPerRole: number | null;
  /** Drops a snapshot past the retention cap (Templates.drop, forced: copies of it keep their data). */
  dropSnapshot: (name: string) => Promise<void>;
  clock: Clock;
  logger: Logger;
}

export class Snapshots {
  constructor(private readonly opts: SnapshotsOptions) {}

  /** `keep`: the snapshot outlives its database and is not counted against --snapshot-retention. */
  async snapshot(db: string, name: string, caller: SnapshotCaller, force: boolean, fn = controlSqlName('snapshot_database'), keep = false): Promise<TemplateRecord> {
    const { registry, metadata, clock, logger } = this.opts;
    await this.checkSource(db, caller, fn, 'snapshot');
    const problem = templateNameProblem(name, this.opts.prefix);
    if (problem !== null || isReservedName(name)) {
      throw new PgxError('INVALID_PARAMETER', `"${name}" cannot name a snapshot: ${problem ?? 'the name is reserved'}`, {
        hint: `Name it like a template: lower-case letters, digits and single underscores, e.g. ${db.slice(0, 20)}_before_migration.`,
      });
    }
    if ((await this.opts.permissions.access(caller.user, name)).exists) {
      throw new PgxError('DUPLICATE_DATABASE', `database "${name}" already exists`, { hint: 'Pick another snapshot name.' });
    }
    const started = clock.monotonic();
    const client = await this.opts.connect();
    try {
      const bytes = await databaseSize(client, db);
      const owner = (await this.opts.permissions.access(caller.user, db)).owner ?? caller.user;
      await this.assertRoleRoom(client, db, owner);
      await this.opts.holdConnects(db, async () => {
        await this.clearSessions(client, db, force, `SELECT ${fn}('${db}', '${name}', true)`, `snapshot "${name}" of database "${db}"`, `Connect again; the snapshot is taken.`);
        await createDatabase(client, createDatabaseSql(name, db, owner));
      });
      // Sealed as it is: no VACUUM FREEZE, which would rewrite every block and undo the sharing. Closed
      // to PUBLIC as its database is (a new database lets every role connect): unsealed, it would
      // otherwise open a tenant's data to every login role. Not IS_TEMPLATE: see sealSql.
      await client.query(`${sealSql(name, true)}; ${closeToPublicSql(name)}`);
      // Its copies carry whatever grants `db` had: a credential of one gets the group's over a connection.
      const record: TemplateRecord = { name, sealed: true, sealedAt: clock.now(), generation: 1, snapshotOf: db, kept: keep, groupGrantsFrom: null };
      await metadata.saveTemplate(record);
      registry.templates.set(name, record);
      logger.info('database-snapshot', { database: db, snapshot: name, kept: keep, mb: Math.round(bytes / 1048576), ms: Math.round(clock.monotonic() - started) });
      await this.retain(record, record.name);
      return record;
    } finally {
      await client.close();
    }
  }

  /**
   * Keeps snapshot `name` past its database (keep), or gives it back to it (its database's drop then
   * takes it, and it counts against --snapshot-retention again).
   */
  async keep(name: string, keep: boolean, user: string, fn = controlSqlName('keep_snapshot')): Promise<TemplateRecord> {
    const { registry, metadata, permissions, logger } = this.opts;
    const record = registry.templates.get(name);
    const access = await permissions.access(user, name);
    if (!record) throw databaseDoesNotExist(name, access.exists ? {} : { hint: `Take one with SELECT pgx_snapshot_database('database', '${name}').` });
    if (record.snapshotOf === null) {
      throw new PgxError('NOT_A_TEMPLATE', `template "${name}" is not a snapshot`, { hint: 'Templates belong to no database: they are always kept.' });
    }
    if (access.exists && !access.ownerOrSuperuser) throw functionDenied(fn, name);
    const updated: TemplateRecord = { ...record, kept: keep };
    await metadata.saveTemplate(updated);
    registry.templates.set(name, updated);
    logger.info('snapshot-kept', { snapshot: name, database: record.snapshotOf, kept: keep, by: user });
    await this.retain(updated);
    return updated;
  }

  /**
   * A snapshot is a database its owner holds, kept ones past their database's life (and writable once
   * unsealed): past --max-databases-per-role databases of any kind the role owns, 53400. Superusers,
   * the runtime's own roles, are not capped.
   */
  private async assertRoleRoom(client: SqlClient, db: string, owner: string): Promise<void> {
    const cap = this.opts.maxDatabasesPerRole;
    if (cap === null) return;
    const { rows } = await client.query(
      `SELECT r.rolsuper, (SELECT count(*) FROM pg_catalog.pg_database d WHERE d.datdba = r.oid) FROM pg_catalog.pg_roles r WHERE r.rolname = ${quoteLiteral(owner)}`,
    );
    const [superuser, held] = rows[0] ?? ['f', '0'];
    if (superuser === 't' || Number(held) < cap) return;
    throw new PgxError('TOO_MANY_DATABASES', `cannot snapshot database "${db}": role "${owner}" already owns its maximum of ${cap} databases`, {
      detail: 'A snapshot is a database its owner holds, as its minted databases and templates are.',
      hint: 'Drop snapshots or databases this role no longer needs (SELECT pgx_drop_template(name), pgx_drop_database(name)), or raise --max-databases-per-role.',
    });
  }

  /** The unkept snapshots of `db`, oldest first. */
  ownedBy(db: string): TemplateRecord[] {
    return [...this.opts.registry.templates.values()]
      .filter((t) => t.snapshotOf === db && !t.kept)
      .sort((a, b) => (a.sealedAt ?? 0) - (b.sealedAt ?? 0) || a.name.localeCompare(b.name));
  }

  /**
   * After `changed` (taken, or given back to its database): drops the oldest unkept snapshots of its
   * database past --snapshot-retention; `protect` (the one just taken) is never among them.
   */
  private async retain(changed: TemplateRecord, protect: string | null = null): Promise<void> {
    const cap = this.opts.retention;
    if (cap === null || changed.kept) return;
    const owned = this.ownedBy(changed.snapshotOf!);
    const excess = owned.length - cap;
    for (const old of owned.filter((t) => t.name !== protect).slice(0, Math.max(0, excess))) {
      await this.opts.dropSnapshot(old.name);
      this.opts.logger.info('snapshot-retired', { database: changed.snapshotOf, snapshot: old.name, retention: cap });
    }
  }

  async restore(db: string, name: string, caller: SnapshotCaller, force: boolean, fn = controlSqlName('restore_database')): Promise<void> {
    const { registry, clock, logger } = this.opts;
    await this.checkSource(db, caller, fn, 'restore');
    const snapshot = registry.templates.get(name);
    if (!snapshot?.sealed) {
      throw databaseDoesNotExist(name, { hint: `There is no sealed snapshot "${name}"; take one with SELECT pgx_snapshot_database('${db}', '${name}').` });
    }
    // A snapshot is its database's data: restoring another tenant's into one's own would read it.
    if (snapshot.snapshotOf !== null && !(await this.opts.permissions.access(caller.user, name)).ownerOrSuperuser) throw snapshotDenied(name);
    const started = clock.monotonic();
    const client = await this.opts.connect();
    const scratch = buildName(await this.opts.metadata.nextSpareNumber());
    const old = buildName(await this.opts.metadata.nextSpareNumber());
    this.opts.scratches.add(scratch);
    this.opts.scratches.add(old);
    const owner = (await this.opts.permissions.access(caller.user, db)).owner ?? caller.user;
    let swapped = false;
    try {
      // The copy first, under a scratch name: if it fails, `db` is as it was. Closed to PUBLIC before
      // it takes the name (a new database lets every role connect), as every minted database is.
      await createDatabase(client, createDatabaseSql(scratch, name, owner));
      await client.query(closeToPublicSql(scratch));
      await this.opts.holdConnects(db, async () => {
        await this.clearSessions(client, db, force, `SELECT ${fn}('${db}', '${name}', true)`, `database "${db}" is being restored to snapshot "${name}"`, `Connect again: "${db}" now holds the state of snapshot "${name}".`);
        // Both renames in one transaction (ALTER DATABASE RENAME is transactional): at every instant
        // the name is the old database or the restored one. A CREATE DATABASE of the name meanwhile
        // waits on pg_database's unique index and then fails with 42P04; it never holds the name.
        // One query string is one (implicit) transaction: all of it, or none and nothing left open.
        await client.query(`ALTER DATABASE ${quoteIdent(db)} RENAME TO ${quoteIdent(old)}; ALTER DATABASE ${quoteIdent(scratch)} RENAME TO ${quoteIdent(db)}`);
        swapped = true;
        // The old database's credentials and grants are put back before anyone is let in.
        await this.opts.replaced(db, owner);
      });
    } catch (err) {
      if (!swapped) await client.query(`DROP DATABASE IF EXISTS ${quoteIdent(scratch)} WITH (FORCE)`).catch(() => undefined);
      this.opts.scratches.delete(scratch);
      this.opts.scratches.delete(old);
      await client.close();
      throw err;
    }
    this.opts.scratches.delete(scratch);
    // The old database goes once clients are let through again; a failure leaves a pgx_build_ orphan
    // that reconcile hands to the janitor.
    await client
      .query(`DROP DATABASE IF EXISTS ${quoteIdent(old)} WITH (FORCE)`)
      .catch((err: unknown) => logger.warn('restore-old-not-dropped', { database: db, old, err }))
      .finally(() => {
        this.opts.scratches.delete(old);
        return client.close();
      });
    logger.info('database-restored', { database: db, snapshot: name, ms: Math.round(clock.monotonic() - started) });
  }

  /** The database exists, the caller may act on it, and is not connected to it. */
  private async checkSource(db: string, caller: SnapshotCaller, fn: string, verb: 'snapshot' | 'restore'): Promise<void> {
    if (isReservedName(db)) throw databaseDoesNotExist(db);
    if (isSystemDatabase(db)) {
      throw new PgxError('INVALID_PARAMETER', `database "${db}" cannot be ${verb === 'snapshot' ? 'snapshotted' : 'restored'}: PGX and PostgreSQL rely on it`, {
        hint: 'Snapshot databases you created or minted.',
      });
    }
    const access = await this.opts.permissions.access(caller.user, db);
    if (!access.exists) throw databaseDoesNotExist(db);
    if (!access.ownerOrSuperuser) throw functionDenied(fn, db);
    if (access.isTemplate || this.opts.registry.templates.get(db)?.snapshotOf != null) {
      throw new PgxError('INVALID_PARAMETER', `database "${db}" is a template`, { hint: `Templates are snapshots already; ${verb} a database minted from it.` });
    }
    if (caller.database === db) {
      throw new PgxError('OBJECT_IN_USE', `cannot ${verb} the currently open database "${db}"`, {
        hint: `Connect to another database (e.g. postgres) and call ${fn}('${db}', ...) there.`,
      });
    }
  }

  /**
   * Leaves `db` with no backend: its client sessions are refused (55006) or, forced, ended with 57P01;
   * then the backends left (the engine's idle pool) are terminated. `forced`: the call that forces it.
   */
  private async clearSessions(client: SqlClient, db: string, force: boolean, forced: string, why: string, hint: string): Promise<void> {
    const open = this.opts.engine.sessionsPerDatabase().get(db) ?? 0;
    if (open > 0 && !force) {
      throw new PgxError('OBJECT_IN_USE', `database "${db}" is being accessed by other users`, {
        detail: `There ${open === 1 ? 'is 1 other session' : `are ${open} other sessions`} using the database.`,
        hint: `Close them, or end them (they get 57P01): ${forced}.`,
      });
    }
    if (open > 0) this.opts.engine.terminateSessions(db, `terminating connection: ${why}`, hint);
    await terminateBackends(client, db);
  }
}

async function databaseSize(client: SqlClient, db: string): Promise<number> {
  const { rows } = await client.query(`SELECT pg_catalog.pg_database_size(${quoteLiteral(db)})`);
  return Number(rows[0]?.[0] ?? 0);
}
