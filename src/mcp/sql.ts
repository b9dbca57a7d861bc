// run_sql: one statement on one minted database, for an agent that has no psql. It connects with
// node-postgres to a URL that logs in as the database's own credential (scoped-roles.ts), runs the statement through a cursor so that at most max_rows + 1
// rows ever cross the wire (a SELECT of a billion rows costs one page, not the server's memory), and
// sets statement_timeout for the session so a runaway statement ends on its own.

import pg from 'pg';
import Cursor from 'pg-cursor';
import { PgxError } from '../errors.js';

export const DEFAULT_MAX_ROWS = 100;
export const MAX_MAX_ROWS = 1000;
export const DEFAULT_TIMEOUT_SECONDS = 10;

export interface SqlOptions {
  /** Rows returned at most; more are cut and `truncated` is true. */
  maxRows: number;
  /** statement_timeout for the session, in seconds. */
  timeoutSeconds: number;
}

export interface SqlColumn {
  name: string;
  /** PostgreSQL's name for the type, as format_type() prints it (e.g. integer, text, timestamp with time zone). */
  type: string;
}

export interface SqlResult {
  /** The command tag's verb: SELECT, INSERT, DROP, ... (null for an empty statement, or when cut short). */
  command: string | null;
  /** Rows the statement affected or returned, as PostgreSQL counts them; null when cut short. */
  rowCount: number | null;
  columns: SqlColumn[];
  /** Each row an array in `columns` order: booleans and small integers as JSON, every other value as the text PostgreSQL prints. */
  rows: unknown[][];
  truncated: boolean;
}

/**
 * Values as PostgreSQL prints them, except booleans and 2/4-byte integers: JSON cannot hold every
 * bigint or numeric exactly, and text keeps timestamps in the session's own time zone.
 */
const TYPES = {
  getTypeParser(oid: number): (value: string) => unknown {
    switch (oid) {
      case 16: // bool
        return (v) => v === 't';
      case 21: // int2
      case 23: // int4
      case 26: // oid
        return (v) => Number(v);
      default:
        return (v) => v;
    }
  },
};

/**
 * pg-cursor lacks the COPY handlers node-postgres calls, and the TypeError would escape from a socket
 * callback and end the whole MCP server. COPY FROM STDIN is refused (there is no data to send); COPY
 * TO STDOUT keeps its first lines as rows of one text column, within the same cap as a SELECT.
 */
class SqlCursor extends Cursor<unknown[]> {
  copyLines: string[] | null = null;
  copyTruncated = false;
  /** A COPY FROM STDIN was refused: the 57014 PostgreSQL answers is run_sql's doing, not a timeout. */
  copyInRefused = false;

  constructor(
    text: string,
    private readonly maxLines: number,
  ) {
    super(text, undefined, { rowMode: 'array', types: TYPES });
  }

  handleCopyInResponse(connection: { sendCopyFail(message: string): void }): void {
    this.copyInRefused = true;
    connection.sendCopyFail('run_sql has no data to send for COPY FROM STDIN; use INSERT ... VALUES, or COPY from a client with the database URL');
  }

  handleCopyData(msg: { chunk: Buffer }): void {
    this.copyLines ??= [];
    for (const line of msg.chunk.toString('utf8').split('\n')) {
      if (line.length === 0) continue;
      if (this.copyLines.length < this.maxLines) this.copyLines.push(line);
      else this.copyTruncated = true;
    }
  }
}

export async function runSql(url: string, statement: string, opts: SqlOptions): Promise<SqlResult> {
  const client = new pg.Client({ connectionString: url, application_name: 'pgx-mcp', connectionTimeoutMillis: 15_000 });
  // A restore or drop with force ends this session from the server side; without a listener the
  // 'error' event would crash the MCP server instead of failing this one call.
  client.on('error', () => undefined);
  try {
    await client.connect();
  } catch (err) {
    await client.end().catch(() => undefined);
    // PostgreSQL's own refusal (3D000, 28P01, 53300) passes on as it came; anything else is not reaching it.
    if (err instanceof pg.DatabaseError) throw err;
    const database = decodeURIComponent(new URL(url).pathname.slice(1));
    throw new PgxError('CANNOT_CONNECT_NOW', `cannot connect to database ${database}: ${(err as Error).message}`, {
      hint: 'The runtime answers its API but not on its PostgreSQL address; runtime_status shows whether PostgreSQL is up.',
      cause: err,
    });
  }
  try {
    await client.query(`SET statement_timeout = ${Math.round(opts.timeoutSeconds * 1000)}`);
    const cursor = client.query(new SqlCursor(statement, opts.maxRows));
    const { rows, result } = await readPage(cursor, opts.maxRows + 1).catch((err: unknown) => {
      if (!cursor.copyInRefused) throw err;
      throw new PgxError('FEATURE_NOT_SUPPORTED', 'run_sql cannot run COPY FROM STDIN: it has no data to send', {
        hint: 'Use INSERT ... VALUES, or COPY from a client of your own with the database URL.',
        cause: err,
      });
    });
    if (cursor.copyLines !== null) {
      await cursor.close();
      return {
        command: result.command ?? 'COPY',
        rowCount: result.rowCount ?? null,
        columns: [{ name: 'copy', type: 'text' }],
        rows: cursor.copyLines.map((line) => [line]),
        truncated: cursor.copyTruncated,
      };
    }
    const truncated = rows.length > opts.maxRows;
    // Closing the portal early is what stops PostgreSQL from producing the rows nobody will read.
    await cursor.close();
    const columns = await columnTypes(client, result.fields ?? []);
    return {
      // Cut short, PostgreSQL never sent the command tag, so the verb and count are unknown.
      command: truncated ? null : (result.command ?? null),
      rowCount: truncated ? null : (result.rowCount ?? rows.length),
      columns,
      rows: truncated ? rows.slice(0, opts.maxRows) : rows,
      truncated,
    };
  } finally {
    await client.end().catch(() => undefined);
  }
}

function readPage(cursor: SqlCursor, n: number): Promise<{ rows: unknown[][]; result: pg.QueryResult }> {
  return new Promise((resolve, reject) => {
    cursor.read(n, (err, rows, result) => (err ? reject(err) : resolve({ rows, result })));
  });
}

/** Names the result's column types in one query (format_type), so an agent reads `integer`, not 23. */
async function columnTypes(client: pg.Client, fields: pg.FieldDef[]): Promise<SqlColumn[]> {
  if (fields.length === 0) return [];
  const oids = [...new Set(fields.map((f) => f.dataTypeID))];
  const named = await client.query<{ oid: number; name: string }>('SELECT oid::int AS oid, format_type(oid, NULL) AS name FROM unnest($1::oid[]) AS t(oid)', [oids]);
  const byOid = new Map(named.rows.map((r) => [r.oid, r.name]));
  return fields.map((f) => ({ name: f.name, type: byOid.get(f.dataTypeID) ?? `oid ${f.dataTypeID}` }));
}
