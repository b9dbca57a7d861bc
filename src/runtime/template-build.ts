// Building a template in a scratch database: from a SQL script (the HTTP API's POST /v1/templates; the
// operator's Template with inline SQL) or from a dump of a source database (template-import.ts). The
// work runs connected as the template's owner role, never as a superuser unless the owner is one:
// whoever may submit a script gets no more than that role has. Only a build that ran to the end
// replaces anything; a failed one leaves no trace but its error.
//
// The scratch database is named like a spare (pgx_build_<n>): reserved, never routable, and if the
// runtime dies mid-build, reconcile finds it unrecorded and the janitor drops it.

import { PgxError } from '../errors.js';
import { PostgresError, quoteIdent, quoteLiteral, type SqlClient } from './sql-client.js';

/** The script itself failed (its SQLSTATE is PostgreSQL's): the caller's fault, not the runtime's. */
export class ScriptError extends PostgresError {}

export interface BuildOptions {
  /** The template's name (validated by the caller). */
  name: string;
  /** Role that owns the new database and fills it. */
  owner: string;
  /** A superuser connection to pgx_control (shared catalogs: pg_database, pg_roles). */
  admin: SqlClient;
  /** The scratch database's name, pgx_build_<n> (see buildName()). */
  scratch: string;
  /** Fills the scratch database (a script, a restored dump), acting as `owner`. */
  fill: (scratch: string, owner: string) => Promise<void>;
}

/**
 * Creates the scratch database owned by `owner` and fills it; the caller renames it into place. On
 * failure the scratch database is dropped and the error thrown.
 */
export async function buildScratch(o: BuildOptions): Promise<void> {
  const { rows } = await o.admin.query(`SELECT rolcanlogin FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(o.owner)}`);
  if (rows.length === 0) {
    throw new PgxError('INVALID_PARAMETER', `role "${o.owner}" does not exist`, { hint: 'Name an existing role as the owner, or leave owner out (postgres).' });
  }
  if (rows[0]![0] !== 't') {
    throw new PgxError('INVALID_PARAMETER', `role "${o.owner}" cannot log in, so it cannot fill the template`, {
      hint: `ALTER ROLE ${quoteIdent(o.owner)} LOGIN, or name a login role as the owner.`,
    });
  }
  const { scratch } = o;
  await o.admin.query(`CREATE DATABASE ${quoteIdent(scratch)} OWNER ${quoteIdent(o.owner)}`);
  try {
    await o.fill(scratch, o.owner);
  } catch (err) {
    await o.admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(scratch)} WITH (FORCE)`).catch(() => undefined);
    throw err;
  }
}

/**
 * Runs a SQL script in `database` as `user`, in one simple-protocol query; PostgreSQL's error comes
 * back as a ScriptError naming `what` ("the script for template "x"") with the SQLSTATE kept.
 */
export async function runScript(connectAs: (database: string, user: string) => Promise<SqlClient>, database: string, user: string, sql: string, what: string): Promise<void> {
  try {
    const client = await connectAs(database, user);
    try {
      await client.query(sql);
    } finally {
      await client.close();
    }
  } catch (err) {
    if (err instanceof PostgresError) {
      throw new ScriptError({
        sqlstate: err.sqlstate,
        severity: err.severity,
        message: `${what} failed: ${err.message}`,
        detail: err.detail,
        hint: err.hint ?? 'Fix the script and submit it again; nothing was changed.',
      });
    }
    throw err;
  }
}
