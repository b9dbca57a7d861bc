// Building a template from a SQL script (the HTTP API's POST /v1/templates; the operator's Template with
// inline SQL). The script runs in a scratch database, connected as the template's owner role, never as
// a superuser unless the owner is one: whoever may submit a script gets no more than that role has.
// Only a script that ran to the end replaces anything; a failed one leaves no trace but its error.
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
  sql: string;
  /** Role that owns the new database and runs the script. */
  owner: string;
  /** A superuser connection to pgx_control (shared catalogs: pg_database, pg_roles). */
  admin: SqlClient;
  /** A connection to `database` as `user`. */
  connectAs: (database: string, user: string) => Promise<SqlClient>;
  /** The scratch database's name, pgx_build_<n> (see buildName()). */
  scratch: string;
}

/**
 * Creates the scratch database owned by `owner` and runs the script in it as `owner`; the caller
 * renames it into place. On failure the scratch database is dropped and the script's error is thrown
 * with its own SQLSTATE.
 */
export async function buildScratch(o: BuildOptions): Promise<void> {
  const { rows } = await o.admin.query(`SELECT rolcanlogin FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(o.owner)}`);
  if (rows.length === 0) {
    throw new PgxError('INVALID_PARAMETER', `role "${o.owner}" does not exist`, { hint: 'Name an existing role as the owner, or leave owner out (postgres).' });
  }
  if (rows[0]![0] !== 't') {
    throw new PgxError('INVALID_PARAMETER', `role "${o.owner}" cannot log in, so it cannot run the script`, {
      hint: `ALTER ROLE ${quoteIdent(o.owner)} LOGIN, or name a login role as the owner.`,
    });
  }
  const { scratch } = o;
  await o.admin.query(`CREATE DATABASE ${quoteIdent(scratch)} OWNER ${quoteIdent(o.owner)}`);
  try {
    const client = await o.connectAs(scratch, o.owner);
    try {
      await client.query(o.sql);
    } finally {
      await client.close();
    }
  } catch (err) {
    await o.admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(scratch)} WITH (FORCE)`).catch(() => undefined);
    if (err instanceof PostgresError) {
      throw new ScriptError({
        sqlstate: err.sqlstate,
        severity: err.severity,
        message: `the script for template "${o.name}" failed: ${err.message}`,
        detail: err.detail,
        hint: err.hint ?? 'Fix the script and submit it again; nothing was changed.',
      });
    }
    throw err;
  }
}
