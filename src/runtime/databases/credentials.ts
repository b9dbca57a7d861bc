// Per-database credentials: a login role that can reach exactly one database, its password handed out
// once (only its SCRAM verifier is stored, in pg_authid). Two walls keep it in its database:
//
// - the engine: route() asks databaseOf(user) and refuses any other database with PostgreSQL's own
//   FATAL 42501 `permission denied for database "B"` / `User does not have CONNECT privilege.`
//   (credentialDenied below), before any minting happens;
// - PostgreSQL: CONNECT and TEMPORARY on the database are revoked from PUBLIC (for every minted
//   database, from the moment it is made: create-database.ts) and granted to the role, so only
//   superusers, the owner and the database's credentials may connect to it.
// The engine's wall is keyed by the name PostgreSQL uses (names cut to 63 bytes at the startup packet,
// wire/identifier.ts), and a member of the group missing from the map cannot log in at all
// (credentials.ts), so a lookup that misses closes the wall instead of opening it.
//
// Rights inside the database: the role is NOT made a member of the owner. Databases minted through the
// API are owned by the superuser postgres, and membership in it would inherit the ownership of every
// catalog and database of the cluster (and, with SET, superuser itself). Instead every credential is a
// member (INHERIT, no SET, no ADMIN) of one NOLOGIN group role, pgx_credentials, and inside the database
// that group has USAGE and CREATE in every non-system schema, read and write on the tables (not
// TRIGGER or MAINTAIN: TABLE_RIGHTS) and ALL on the sequences there (functions: what PUBLIC may
// execute, and no more), and default privileges for what the owner creates there later. A credential
// can read and write the template's tables and create its own; it cannot ALTER or DROP the owner's
// objects, nor put triggers on them.
//
// Those in-database grants are made once per template, when it is sealed (prepareDatabase, from
// templates.ts), so every database copied from it carries them and a new credential needs no connection
// into its database: one statement batch on the admin connection (CREATE ROLE, the membership, the
// database's CONNECT). A database not known to carry them (minted by another owner, from a template
// sealed by an older PGX, found without a record) gets them over a connection of its own at its first
// credential, as every credential did before. The group's rights exist in many databases, but its
// members can connect to their own only (both walls above), and no role but a credential is a member
// (load() revokes any other membership). An unsealed template has the grants taken back (unprepare),
// so a template open for changes holds no rights for the group.
//
// The role -> database map lives in pgx_control (table credentials), so it survives restarts; roles
// whose database is gone are dropped at start. Revoking: NOLOGIN first (the engine refuses new logins:
// it answers a role without a verifier like a wrong password, 28P01), its PostgreSQL backends are
// terminated (its clients read PostgreSQL's FATAL 57P01), objects it created are reassigned to the
// owner (to the group instead when the owner is a superuser, so that nothing a tenant wrote ever runs
// as one), its grants dropped, then the role. Dropping a database drops its credentials.

import { randomBytes } from 'node:crypto';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { makeVerifier } from '../../wire/scram.js';
import { GUARD_SCHEMA } from '../templates/extension-guard.js';
import type { MetadataStore } from './metadata.js';
import { BOUNDS, checkBound } from './records.js';
import { postgresSqlstate, quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

export interface Credential {
  user: string;
  /** Plain text: returned once to the caller, never stored or logged. */
  password: string;
}

export interface DatabaseCredentialsOptions {
  /** A superuser connection inside the named database, search_path empty (closed after use). */
  connect: (database: string) => Promise<SqlClient>;
  metadata: MetadataStore;
  logger: Logger;
}

const MAX_ROLE_BYTES = 63;
/** The NOLOGIN role whose rights inside a database every credential of it inherits. */
export const CREDENTIALS_GROUP = 'pgx_credentials';
/** Sealed templates carry default privileges for objects this role creates: the API mints as it. */
export const PREPARED_OWNER = 'postgres';
const GROUP_ATTRIBUTES = 'NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS';
const SUFFIX_BYTES = '_u'.length + 4;

/** Exactly what PostgreSQL answers a role without CONNECT on `database`. */
export function credentialDenied(database: string, hint?: string): PgxError {
  return new PgxError('INSUFFICIENT_PRIVILEGE', `permission denied for database "${database}"`, { detail: 'User does not have CONNECT privilege.', ...(hint !== undefined ? { hint } : {}) });
}

export class DatabaseCredentials {
  /** role -> its database. */
  private readonly roles = new Map<string, string>();
  /** Databases given the group's grants over a connection by this process (see grantInside). */
  private readonly granted = new Set<string>();

  constructor(private readonly opts: DatabaseCredentialsOptions) {}

  /** Makes the group role, loads the map; drops credentials whose database no longer exists. */
  async load(): Promise<void> {
    const recorded = await this.opts.metadata.loadCredentials();
    const client = await this.opts.metadata.client();
    await ensureGroup(client, new Set(recorded.keys()), this.opts.logger);
    // One look at pg_database for all of them, not a round trip per credential: with a credential per
    // database (the operator's Branches) that was 10,000 queries before a restart was ready.
    const { rows } = await client.query('SELECT datname FROM pg_catalog.pg_database');
    const existing = new Set(rows.map(([name]) => name));
    for (const [role, database] of recorded) {
      if (existing.has(database)) this.roles.set(role, database);
      else await this.dropRole(role, database, null);
    }
  }

  /** The one database `user` may reach, or undefined when it is not a per-database credential. */
  databaseOf(user: string): string | undefined {
    return this.roles.get(user);
  }

  /** Credentials of `database`. */
  rolesOf(database: string): string[] {
    return [...this.roles].filter(([, db]) => db === database).map(([role]) => role);
  }

  /**
   * A new login role for `database` (which must exist) owned by `owner`; the password is returned once.
   * `prepared`: the database is a copy of a template that carries the group's grants for `owner`
   * (prepareDatabase), so nothing needs doing inside it.
   */
  async create(database: string, owner: string, connectionLimit = -1, prepared = false): Promise<Credential> {
    checkBound('a connection limit', connectionLimit, BOUNDS.credentialConnectionLimit);
    const password = randomBytes(24).toString('base64url');
    const admin = await this.opts.metadata.client();
    const db = quoteIdent(database);
    let user = '';
    for (let attempt = 0; ; attempt++) {
      user = roleNameFor(database);
      const role = quoteIdent(user);
      try {
        // One implicit transaction: the role exists with its membership and CONNECT, or not at all.
        await admin.query(
          `CREATE ROLE ${role} LOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT NOREPLICATION NOBYPASSRLS ` +
            `CONNECTION LIMIT ${connectionLimit} PASSWORD ${quoteLiteral(makeVerifier(password))}; ` +
            `GRANT ${quoteIdent(CREDENTIALS_GROUP)} TO ${role} WITH INHERIT TRUE, SET FALSE, ADMIN FALSE; ` +
            `REVOKE CONNECT, TEMPORARY ON DATABASE ${db} FROM PUBLIC; GRANT CONNECT, TEMPORARY ON DATABASE ${db} TO ${role}`,
        );
        break;
      } catch (err) {
        // 42710: the random suffix is taken; another one.
        if (!(postgresSqlstate(err) === '42710') || attempt >= 4) throw err;
      }
    }
    try {
      await this.opts.metadata.saveCredential(user, database);
      this.roles.set(user, database);
      if (!prepared && !this.granted.has(database)) {
        await this.grantInside(database, owner);
        this.granted.add(database);
      }
    } catch (err) {
      await this.dropRole(user, database, null).catch(() => undefined);
      throw err;
    }
    this.opts.logger.info('credential-created', { database, role: user, connectionLimit, prepared: prepared || this.granted.has(database) });
    return { user, password };
  }

  /**
   * Drops `user`, a credential of `database`; idempotent (a role not recorded for it is no error).
   * `owner` receives what the role created inside the database.
   */
  async revoke(database: string, user: string, owner: string): Promise<boolean> {
    if (this.roles.get(user) !== database) return false;
    await this.dropRole(user, database, owner);
    this.opts.logger.info('credential-revoked', { database, role: user });
    return true;
  }

  /**
   * After `database` was replaced by a copy (a restore): a new database has PUBLIC's default CONNECT,
   * none of the grants, and inside it the snapshot's grants, whatever they were. So both walls are put
   * back for each of its credentials, and a minted database (`minted`) gets the group's grants inside,
   * so that it carries them as its template's copies do.
   */
  async databaseReplaced(database: string, owner: string, minted: boolean): Promise<void> {
    const roles = this.rolesOf(database);
    this.granted.delete(database);
    if (roles.length === 0 && !minted) return;
    if (roles.length > 0) {
      const db = quoteIdent(database);
      const group = quoteIdent(CREDENTIALS_GROUP);
      const grants = roles.map((r) => `GRANT CONNECT, TEMPORARY ON DATABASE ${db} TO ${quoteIdent(r)}; GRANT ${group} TO ${quoteIdent(r)} WITH INHERIT TRUE, SET FALSE, ADMIN FALSE`).join('; ');
      await (await this.opts.metadata.client()).query(`REVOKE CONNECT, TEMPORARY ON DATABASE ${db} FROM PUBLIC; ${grants}`);
    }
    await this.grantInside(database, owner);
    this.granted.add(database);
  }

  /** After `database` was dropped: its credentials go too. */
  async databaseDropped(database: string): Promise<void> {
    this.granted.delete(database);
    for (const role of this.rolesOf(database)) {
      await this.dropRole(role, database, null).catch((err: unknown) => this.opts.logger.warn('credential-not-dropped', { database, role, err }));
    }
  }

  /** The group's grants inside `database`, over a connection of its own. */
  private async grantInside(database: string, owner: string): Promise<void> {
    const client = await this.opts.connect(database);
    try {
      await prepareDatabase(client, owner);
    } finally {
      await client.close();
    }
  }

  /** NOLOGIN, end its backends, hand its objects to `owner` (null: the database is gone), drop it. */
  private async dropRole(user: string, database: string, owner: string | null): Promise<void> {
    const admin = await this.opts.metadata.client();
    const role = quoteIdent(user);
    const { rows } = await admin.query(`SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(user)}`);
    if (rows.length > 0) {
      await admin.query(`ALTER ROLE ${role} NOLOGIN`);
      await admin.query(`SELECT pg_catalog.pg_terminate_backend(pid, 5000) FROM pg_catalog.pg_stat_activity WHERE usename = ${quoteLiteral(user)}`);
      const { rows: exists } = await admin.query(`SELECT 1 FROM pg_catalog.pg_database WHERE datname = ${quoteLiteral(database)}`);
      if (exists.length > 0) {
        const client = await this.opts.connect(database);
        try {
          const named = owner ?? (await client.query(`SELECT pg_catalog.pg_get_userbyid(datdba) FROM pg_catalog.pg_database WHERE datname = current_database()`)).rows[0]![0]!;
          // Never to a superuser: a tenant's SECURITY DEFINER function or view would then run as one
          // (a view over pg_authid, a function that runs COPY ... TO PROGRAM). The group owns them then,
          // which gives the database's other credentials (and only them) the owner's rights.
          const { rows: superuser } = await client.query(`SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(named)} AND rolsuper`);
          const to = superuser.length > 0 ? CREDENTIALS_GROUP : named;
          await client.query(`REASSIGN OWNED BY ${role} TO ${quoteIdent(to)}; DROP OWNED BY ${role}`);
        } finally {
          await client.close();
        }
      }
      await admin.query(`DROP ROLE IF EXISTS ${role}`);
    }
    await this.opts.metadata.deleteCredential(user);
    this.roles.delete(user);
  }
}

/** `<database>_u<4 hex>`, the database part cut so the whole fits PostgreSQL's 63 bytes. */
export function roleNameFor(database: string): string {
  let base = database.toLowerCase().replace(/[^a-z0-9_]/g, '_');
  while (Buffer.byteLength(base) > MAX_ROLE_BYTES - SUFFIX_BYTES) base = base.slice(0, -1);
  if (!/^[a-z_]/.test(base)) base = `u${base}`.slice(0, MAX_ROLE_BYTES - SUFFIX_BYTES);
  return `${base}_u${randomBytes(2).toString('hex')}`;
}

/**
 * What the group may do to the owner's tables: read and write them, not TRIGGER or MAINTAIN. A trigger
 * runs as whoever writes the table, so a credential's trigger on the template's tables would run its
 * function as the developer's app, a superuser's session included (COPY ... TO PROGRAM from an INSERT);
 * MAINTAIN runs the owner's index expressions and materialized views' queries on a credential's word.
 * Revoked explicitly too: a template sealed when ALL was granted is re-prepared in each copy that gets
 * a credential (metadata.ts stops counting it as carrying the grants).
 */
const TABLE_RIGHTS = 'SELECT, INSERT, UPDATE, DELETE, TRUNCATE, REFERENCES';
const TABLE_RIGHTS_WITHHELD = 'TRIGGER, MAINTAIN';

/**
 * Grants the credentials' group its rights in every non-system schema but pgx_guard of the database `client` is
 * connected to (as a superuser), and default privileges for what `owner` creates there later.
 * Idempotent. Run on a template before it is sealed, so its copies carry the grants.
 */
export async function prepareDatabase(client: SqlClient, owner = PREPARED_OWNER): Promise<void> {
  // Not the extension guard's schema: its event trigger function is the superuser's, and nothing of a
  // tenant's belongs beside it.
  const { rows } = await client.query(
    `SELECT nspname FROM pg_catalog.pg_namespace WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\\_%' ` +
      `AND nspname <> ${quoteLiteral(GUARD_SCHEMA)} ORDER BY 1`,
  );
  const role = quoteIdent(CREDENTIALS_GROUP);
  const sql: string[] = [];
  for (const [nsp] of rows) {
    const s = quoteIdent(nsp!);
    sql.push(
      `GRANT USAGE, CREATE ON SCHEMA ${s} TO ${role}`,
      `GRANT ${TABLE_RIGHTS} ON ALL TABLES IN SCHEMA ${s} TO ${role}`,
      `REVOKE ${TABLE_RIGHTS_WITHHELD} ON ALL TABLES IN SCHEMA ${s} FROM ${role}`,
      `GRANT ALL ON ALL SEQUENCES IN SCHEMA ${s} TO ${role}`,
      // Functions are not granted: PUBLIC may execute every function it was not denied, and one it was
      // denied was denied on purpose (dblink_connect_u connects without a password, so as postgres
      // over the private socket). Taken back too from templates sealed when they were granted.
      `REVOKE ALL ON ALL FUNCTIONS IN SCHEMA ${s} FROM ${role}`,
      `ALTER DEFAULT PRIVILEGES FOR ROLE ${quoteIdent(owner)} IN SCHEMA ${s} GRANT ${TABLE_RIGHTS} ON TABLES TO ${role}`,
      `ALTER DEFAULT PRIVILEGES FOR ROLE ${quoteIdent(owner)} IN SCHEMA ${s} REVOKE ${TABLE_RIGHTS_WITHHELD} ON TABLES FROM ${role}`,
      `ALTER DEFAULT PRIVILEGES FOR ROLE ${quoteIdent(owner)} IN SCHEMA ${s} GRANT ALL ON SEQUENCES TO ${role}`,
    );
  }
  if (sql.length > 0) await client.query(sql.join('; '));
}

/**
 * Takes back every right of the group inside the database `client` is connected to (an unsealed
 * template). Objects the group owns there (a snapshot's, made by credentials since revoked) are kept:
 * they are parked with a role of the moment while DROP OWNED takes the grants, then handed back.
 */
export async function unprepareDatabase(client: SqlClient): Promise<void> {
  const group = quoteIdent(CREDENTIALS_GROUP);
  const { rows } = await client.query(
    `SELECT 1 FROM pg_catalog.pg_shdepend WHERE deptype = 'o' AND refobjid = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(CREDENTIALS_GROUP)}) ` +
      `AND dbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()) LIMIT 1`,
  );
  if (rows.length === 0) {
    await client.query(`DROP OWNED BY ${group}`);
    return;
  }
  const holder = quoteIdent(`pgx_holder_${randomBytes(4).toString('hex')}`);
  await client.query(`BEGIN; CREATE ROLE ${holder} NOLOGIN; REASSIGN OWNED BY ${group} TO ${holder}; DROP OWNED BY ${group}; REASSIGN OWNED BY ${holder} TO ${group}; DROP ROLE ${holder}; COMMIT`);
}

/**
 * The group role exists, cannot log in, and has no members but the recorded credentials (`members`):
 * anyone else made a member would inherit the group's rights in every database it may connect to.
 */
async function ensureGroup(admin: SqlClient, members: ReadonlySet<string>, logger: Logger): Promise<void> {
  const group = quoteIdent(CREDENTIALS_GROUP);
  // Looked up first: a CREATE that fails on every start would put an ERROR in PostgreSQL's log each time.
  const { rows: found } = await admin.query(`SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(CREDENTIALS_GROUP)}`);
  try {
    if (found.length === 0) await admin.query(`CREATE ROLE ${group} ${GROUP_ATTRIBUTES}`);
  } catch (err) {
    // 42710: made meanwhile by someone else (its attributes are put right below).
    if (!(postgresSqlstate(err) === '42710')) throw err;
  }
  await admin.query(`ALTER ROLE ${group} ${GROUP_ATTRIBUTES} CONNECTION LIMIT 0 PASSWORD NULL`);
  const { rows } = await admin.query(
    `SELECT m.rolname FROM pg_catalog.pg_auth_members a JOIN pg_catalog.pg_roles m ON m.oid = a.member ` +
      `WHERE a.roleid = (SELECT oid FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(CREDENTIALS_GROUP)})`,
  );
  for (const [member] of rows) {
    if (members.has(member!)) continue;
    logger.warn('credentials-group-member-revoked', { role: member, reason: `only PGX's per-database credentials may be members of ${CREDENTIALS_GROUP}` });
    await admin.query(`REVOKE ${group} FROM ${quoteIdent(member!)} CASCADE`);
  }
}
