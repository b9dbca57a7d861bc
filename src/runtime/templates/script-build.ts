// Building a template in a scratch database: from a SQL script (the HTTP API's POST /v1/templates; the
// operator's Template with inline SQL) or from a dump of a source database (import.ts). The
// work runs connected as the template's owner role, never as a superuser unless the owner is one:
// whoever may submit a script gets no more than that role has. Only a build that ran to the end
// replaces anything; a failed one leaves no trace but its error.
//
// The scratch database is named like a spare (pgx_build_<n>): reserved, never routable, and if the
// runtime dies mid-build, reconcile finds it unrecorded and the janitor drops it.

import { PgxError } from '../../errors.js';
import { isOwnershipOrPrivilege, parseScript, type ParsedScript } from './psql-script.js';
import { closeToPublicSql } from '../databases/create-database.js';
import { postgresSqlstate, quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

/** The script itself failed (its SQLSTATE is PostgreSQL's): the caller's fault, not the runtime's. */

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
    throw new PgxError('INVALID_PARAMETER', `role "${o.owner}" does not exist`, { hint: 'Name an existing role as the owner, or leave the owner out.' });
  }
  if (rows[0]![0] !== 't') {
    throw new PgxError('INVALID_PARAMETER', `role "${o.owner}" cannot log in, so it cannot fill the template`, {
      hint: `ALTER ROLE ${quoteIdent(o.owner)} LOGIN, or name a login role as the owner.`,
    });
  }
  const { scratch } = o;
  // Closed to PUBLIC from the start: a template built with seal: false, or unsealed later, is open to
  // connections, and whoever connects reads its catalogs (function bodies, table and column names).
  // Its owner and superusers still connect; copies of it get their own grants (CREATE DATABASE does not copy them).
  await o.admin.query(`CREATE DATABASE ${quoteIdent(scratch)} OWNER ${quoteIdent(o.owner)}`);
  try {
    await o.admin.query(closeToPublicSql(scratch));
    await o.fill(scratch, o.owner);
  } catch (err) {
    await o.admin.query(`DROP DATABASE IF EXISTS ${quoteIdent(scratch)} WITH (FORCE)`).catch(() => undefined);
    throw err;
  }
}

/**
 * Runs a SQL script in `database` as `user`, as psql would run the file (psql-script.ts): statement by
 * statement in one session, COPY ... FROM stdin with its data, pg_dump's meta-commands understood. A
 * pg_dump file's ownership and privilege statements are left out (they name the source's roles). The
 * first failure stops it: PostgreSQL's error comes back as SCRIPT_FAILED (its SQLSTATE kept) naming `what` ("the script
 * for template "x"", or the file) and the line and statement, with the SQLSTATE kept.
 */
export async function runScript(connectAs: (database: string, user: string) => Promise<SqlClient>, database: string, user: string, sql: string, what: string): Promise<ScriptRun> {
  let parsed: ParsedScript;
  try {
    parsed = parseScript(sql);
  } catch (err) {
    if (err instanceof PgxError) throw new PgxError(err.code, `${what}: ${err.message}`, { hint: err.hint ?? 'Fix the script and submit it again; nothing was changed.' });
    throw err;
  }
  const run: ScriptRun = { statements: 0, skipped: 0 };
  const client = await connectAs(database, user);
  try {
    for (const step of parsed.steps) {
      if (parsed.fromPgDump && step.kind === 'sql' && isOwnershipOrPrivilege(step.sql)) {
        run.skipped++;
        continue;
      }
      try {
        if (step.kind === 'copy') await client.copyFrom(step.sql, step.data);
        else await client.query(step.sql);
      } catch (err) {
        const sqlstate = postgresSqlstate(err);
        if (sqlstate === null) throw err;
        const pgErr = err as PgxError;
        throw new PgxError('SCRIPT_FAILED', `${what} failed at line ${step.line}: ${pgErr.message}`, {
          sqlstate,
          detail: [`The statement: ${firstLines(step.sql)}`, pgErr.detail].filter((d) => d !== undefined).join('\n'),
          hint: pgErr.hint ?? 'Fix the script and submit it again; nothing was changed.',
        });
      }
      run.statements++;
    }
  } finally {
    await client.close();
  }
  return run;
}

/** What a script run did: statements run, and pg_dump ownership/privilege statements left out. */
export interface ScriptRun {
  statements: number;
  skipped: number;
}

/** A statement shortened for an error message: its first lines, at most 300 characters. */
function firstLines(sql: string): string {
  const text = sql.trim().split('\n').slice(0, 3).join('\n');
  return text.length > 300 ? `${text.slice(0, 300)}...` : text;
}
