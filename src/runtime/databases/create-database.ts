// How a database is made from a template, claimed from the warm pool, and dropped: the SQL text, and
// the one place the copy strategy is set.

import { MINTERS_GROUP, type ClaimCheck } from './permissions.js';
import { postgresSqlstate, quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

/**
 * How every copy of a template is made: FILE_COPY, a clone where the filesystem clones (storage-probe.ts,
 * file_copy_method = clone), else a plain copy of its files. Never WAL_LOG, which copies each block
 * through shared buffers and writes it twice (WAL and relation): with PGX's profile (fsync off) its
 * avoided checkpoints cost next to nothing, and one cold mint of tpl_small through the engine took
 * 37-41 ms with FILE_COPY against 89-91 ms with WAL_LOG (tpl_big 57 against 123 ms; ext4, 2-core VM,
 * 2026-12-03). WAL_LOG's copies also took the tenants' buffers, and every buffer they dirtied became
 * the checkpointer's and the background writer's to write, so theirs in the runtime's PSS for good.
 * Templates keep no strategy of their own: the API reports this one. Runtimes before 2026-12-03 stored
 * WAL_LOG for small templates where nothing clones; the column is no longer read.
 */
export const COPY_STRATEGY = 'FILE_COPY';

/** The session setting that makes FILE_COPY clone files instead of copying them (PostgreSQL 18). */
export const CLONE_FILES_SQL = 'SET file_copy_method = clone';

export function createDatabaseSql(name: string, template: string, owner: string): string {
  return `CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${quoteIdent(template)} STRATEGY ${COPY_STRATEGY} OWNER ${quoteIdent(owner)}`;
}

/**
 * A warm spare: owned by the runtime's role until a claim hands it over, and closed to connections so
 * nobody (autovacuum aside) touches it, which also keeps its RENAME from waiting on other sessions.
 * With WAL_LOG each spare of an 8 MB template took 987 of the 4,096 buffers (COPY_STRATEGY).
 */
export function createSpareSql(name: string, template: string): string {
  return `CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${quoteIdent(template)} STRATEGY ${COPY_STRATEGY} ALLOW_CONNECTIONS false`;
}

/**
 * A spare becomes the client's database: renamed, given to the client's role, opened for connections.
 * Sent as one query string, which PostgreSQL runs as one transaction: all of it happens or none.
 * `check` 'rename' renames as the new owner, so PostgreSQL's own rule for that (superuser, or CREATEDB)
 * decides whether the role may have it; 'member' refuses a role that is neither a superuser nor a
 * member of MINTERS_GROUP. Refused, the transaction fails with 42501 and the spare stays.
 * Its commit does not wait for the WAL flush (the client's connect would, behind a refill's writes):
 * any later commit in the database flushes it first, and a spare lost to a crash is reconciled at start.
 */
export function claimSpareSql(spare: string, name: string, owner: string, check: ClaimCheck | null): string {
  const target = quoteIdent(name);
  const role = quoteIdent(owner);
  const rename = `ALTER DATABASE ${quoteIdent(spare)} RENAME TO ${target}; `;
  const member =
    check === 'member'
      ? `DO $member$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_catalog.pg_roles r WHERE r.rolname = ${quoteLiteral(owner)} AND (r.rolsuper OR ` +
        `pg_catalog.pg_has_role(r.oid, (SELECT g.oid FROM pg_catalog.pg_roles g WHERE g.rolname = ${quoteLiteral(MINTERS_GROUP)}), 'MEMBER'))) ` +
        `THEN RAISE EXCEPTION 'permission denied to create database' USING ERRCODE = '42501'; END IF; END $member$; `
      : '';
  return (
    `SET LOCAL synchronous_commit = off; ${member}ALTER DATABASE ${quoteIdent(spare)} OWNER TO ${role}; ` +
    (check === 'rename' ? `SET LOCAL ROLE ${role}; ${rename}RESET ROLE; ` : rename) +
    `ALTER DATABASE ${target} ALLOW_CONNECTIONS true`
  );
}

/**
 * Seals a database: nobody connects to it any more, and copies are made of it. A template is also
 * IS_TEMPLATE, which keeps its owner from dropping it by mistake and lets a role with CREATEDB copy
 * it: templates are shared (any role that may mint, mints from any of them). A snapshot is not: it is
 * one tenant's data, and IS_TEMPLATE would let every role with CREATEDB read it (`CREATE DATABASE x
 * TEMPLATE snapshot`). PGX copies it as a superuser, which needs no IS_TEMPLATE.
 */
export function sealSql(name: string, snapshot: boolean): string {
  return `ALTER DATABASE ${quoteIdent(name)} WITH IS_TEMPLATE ${snapshot ? 'false' : 'true'} ALLOW_CONNECTIONS false`;
}

/** sealSql's rule applied to snapshots an older runtime sealed IS_TEMPLATE: run at start. */
export function unmarkSnapshotsSql(snapshots: string[]): string {
  return (
    `DO $unmark$ DECLARE d name; BEGIN FOR d IN SELECT datname FROM pg_catalog.pg_database ` +
    `WHERE datistemplate AND datname = ANY (ARRAY[${snapshots.map(quoteLiteral).join(', ')}]::name[]) ` +
    `LOOP EXECUTE pg_catalog.format('ALTER DATABASE %I WITH IS_TEMPLATE false', d); END LOOP; END $unmark$`
  );
}

/** Terminates every backend on `database` but the caller's own; returns how many. */
export async function terminateBackends(client: SqlClient, database: string): Promise<number> {
  const { rows } = await client.query(
    `SELECT count(pg_catalog.pg_terminate_backend(pid)) FROM pg_catalog.pg_stat_activity ` +
      `WHERE datname = ${quoteLiteral(database)} AND pid <> pg_catalog.pg_backend_pid()`,
  );
  return Number(rows[0]?.[0] ?? 0);
}

/** IF EXISTS makes a repeated drop a no-op; FORCE ends backends left (e.g. the engine's idle pool). */
export function dropDatabaseSql(name: string): string {
  return `DROP DATABASE IF EXISTS ${quoteIdent(name)} WITH (FORCE)`;
}

/** How often a create is retried while the template is briefly in use (55006), e.g. by autovacuum. */
const TEMPLATE_BUSY_RETRIES = 5;
const TEMPLATE_BUSY_WAIT_MS = 50;

/**
 * Runs CREATE DATABASE. A name that exists already fails with PostgreSQL's 42P04: never taken for
 * success, since the database there may be someone else's (a tenant's CREATE DATABASE under the mint
 * prefix or of a spare's name), and adopting it would hand that database to whoever asked for the
 * name. A template some other backend is still connected to is retried briefly.
 */
export async function createDatabase(client: SqlClient, sql: string): Promise<void> {
  for (let attempt = 0; ; attempt++) {
    try {
      await client.query(sql);
      return;
    } catch (err) {
      const busy = postgresSqlstate(err) === '55006';
      if (!busy || attempt >= TEMPLATE_BUSY_RETRIES) throw err;
      await new Promise((resolve) => setTimeout(resolve, TEMPLATE_BUSY_WAIT_MS * (attempt + 1)));
    }
  }
}

/**
 * Closes a database PGX made to PUBLIC: a new database lets every role CONNECT (PostgreSQL's default,
 * and CREATE DATABASE never copies the template's ACL), so without this any login role could reach
 * any minted database whatever the engine's walls said. Its owner keeps CONNECT (an owner's rights are
 * implicit, and follow ALTER DATABASE OWNER), superusers need none, and a credential is granted it.
 */
export function closeToPublicSql(name: string): string {
  return `REVOKE CONNECT, TEMPORARY ON DATABASE ${quoteIdent(name)} FROM PUBLIC`;
}

/**
 * closeToPublicSql for every database under the prefix and every spare still open to PUBLIC, in one
 * statement: run at start, for databases minted by a PGX that did not close them yet.
 */
export function closeAllToPublicSql(prefix: string, sparePrefix: string): string {
  return (
    `DO $close$ DECLARE d name; BEGIN FOR d IN SELECT datname FROM pg_catalog.pg_database ` +
    `WHERE (starts_with(datname::text, ${quoteLiteral(prefix)}) OR starts_with(datname::text, ${quoteLiteral(sparePrefix)})) ` +
    `AND (datacl IS NULL OR EXISTS (SELECT 1 FROM pg_catalog.aclexplode(datacl) a WHERE a.grantee = 0 AND a.privilege_type IN ('CONNECT', 'TEMPORARY'))) ` +
    `LOOP EXECUTE pg_catalog.format('REVOKE CONNECT, TEMPORARY ON DATABASE %I FROM PUBLIC', d); END LOOP; END $close$`
  );
}
