// A minimal SQL client for the runtime's own admin work (readiness probes, CREATE/DROP DATABASE,
// reading catalogs) over PostgreSQL's private Unix socket. Trust authentication only, the simple query
// protocol, text values. Queries are pipelined: each goes on the wire at once and PostgreSQL answers
// them in order, each in its own implicit transaction, so callers sharing a connection (a burst of
// mints recording their databases) wait one round trip, not one per query ahead of them. Client
// traffic never goes through here.

import { connect as netConnect, type Socket } from 'node:net';

import { serialize } from 'pg-protocol';
import type {
  BackendMessage,
  CommandCompleteMessage,
  DatabaseError,
  DataRowMessage,
  RowDescriptionMessage,
} from 'pg-protocol/dist/messages.js';
// The package's entry point exports only serialize and a stream helper; its Parser lives here.
import { Parser } from 'pg-protocol/dist/parser.js';

import { PgxError } from '../../errors.js';
import { socketPath } from '../../wire/socket-path.js';

export interface QueryResult {
  /** Rows of the last statement, values in PostgreSQL's text format; NULL is null. */
  rows: (string | null)[][];
  /** Column names of the last statement. */
  fields: string[];
  /** The last statement's command tag, e.g. "SELECT 1" or "CREATE DATABASE". */
  command: string;
}

export interface ConnectOptions {
  socketDir: string;
  port: number;
  user: string;
  database: string;
  applicationName?: string;
  /** Settings the session starts with, sent as startup parameters (PostgreSQL applies them at login). */
  settings?: SessionSettings;
  /** For the connection and startup handshake, and for close(); queries themselves have no timeout. */
  timeoutMs?: number;
}

/** Configuration parameters by name, applied at login. */
export type SessionSettings = Readonly<Record<string, string>>;

/**
 * For the runtime's superuser inside a database whose objects others own (a tenant's database, a
 * template, a spare): an empty search_path, so its statements there resolve operators and functions
 * in pg_catalog alone. With the default path an operator a tenant put in public is found too, and
 * wins where it matches the argument types exactly and pg_catalog's needs a cast: a tenant's
 * public.*(numeric, real) and public.>(bigint, numeric) were called, as superuser, by the activity
 * vacuum's "n_dead_tup > 50 + 0.2 * ...", and a public.!~~(name, name) by the credentials' NOT LIKE.
 */
export const CATALOG_ONLY: SessionSettings = { search_path: '' };

/**
 * The SQLSTATE PostgreSQL answered with, when `err` is its ErrorResponse (a PgxError POSTGRES_FAILED
 * carrying PostgreSQL's own SQLSTATE, e.g. 42P04); null for anything else, this client's own failures
 * (a closed connection, a timeout: POSTGRES_FAILED with the code's 58000) included. Callers tell
 * "already exists" from a real failure by it, and the API passes the SQLSTATE on.
 */
export function postgresSqlstate(err: unknown): string | null {
  if (!(err instanceof PgxError) || err.code !== 'POSTGRES_FAILED' || err.sqlstate === OWN_FAILURE) return null;
  return err.sqlstate;
}

/** The SQLSTATE of POSTGRES_FAILED when it is this client's own failure, not PostgreSQL's answer. */
const OWN_FAILURE = new PgxError('POSTGRES_FAILED', '').sqlstate;

interface Pending {
  /** null for the startup handshake, which completes like a query: at ReadyForQuery. */
  sql: string | null;
  /** For COPY ... FROM STDIN: the data to send when the server asks for it. */
  copyData?: Buffer;
  resolve: (result: QueryResult) => void;
  reject: (err: Error) => void;
}

const DEFAULT_TIMEOUT_MS = 10_000;
/** COPY data goes out in CopyData messages of at most this many bytes. */
const COPY_CHUNK = 1 << 20;

export class SqlClient {
  private readonly socket: Socket;
  private readonly parser = new Parser();
  private readonly queue: Pending[] = [];
  private readonly path: string;
  private readonly timeoutMs: number;
  /** Settles (never rejects) once the connection is gone, whoever closed it; e.g. PostgreSQL restarted. */
  readonly closed: Promise<void>;
  private isClosed = false;
  private ending = false;
  /** Why the socket failed or timed out, reported to whatever is still pending when it closes. */
  private socketError: Error | undefined;
  private timer: NodeJS.Timeout | undefined;

  // Results of the query at the head of the queue, as its messages arrive.
  private fields: string[] = [];
  private rows: (string | null)[][] = [];
  private last: QueryResult = { rows: [], fields: [], command: '' };
  private error: PgxError | undefined;

  private constructor(opts: ConnectOptions) {
    this.path = socketPath(opts.socketDir, opts.port);
    this.timeoutMs = opts.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    this.socket = netConnect(this.path);
    this.closed = new Promise((resolve) => {
      this.socket.on('close', () => {
        this.onClose();
        resolve();
      });
    });
    // Errors are recorded and reported through the pending promises when 'close' follows.
    this.socket.on('error', (err) => {
      this.socketError ??= err;
    });
    const onMessage = (msg: BackendMessage): void => this.onMessage(msg);
    this.socket.on('data', (chunk: Buffer) => {
      try {
        this.parser.parse(chunk, onMessage);
      } catch (err) {
        // Bytes we cannot parse: the connection is unusable, and socket callbacks must not throw.
        this.socketError ??= err instanceof Error ? err : new Error(String(err));
        this.socket.destroy();
      }
    });
  }

  /** Connects and completes the startup handshake; rejects if PostgreSQL does not accept the session. */
  static connect(opts: ConnectOptions): Promise<SqlClient> {
    const client = new SqlClient(opts);
    return new Promise<SqlClient>((resolve, reject) => {
      client.startTimer(`connecting to PostgreSQL at ${client.path}`);
      client.queue.push({
        sql: null,
        resolve: () => {
          client.stopTimer();
          resolve(client);
        },
        reject,
      });
      const params: Record<string, string> = { ...opts.settings, user: opts.user, database: opts.database, client_encoding: 'UTF8' };
      if (opts.applicationName !== undefined) params.application_name = opts.applicationName;
      client.socket.write(serialize.startup(params));
    });
  }

  /** Runs `sql` (one or more statements) with the simple query protocol; resolves with the last result. */
  query(sql: string): Promise<QueryResult> {
    if (this.isClosed || this.ending) {
      return Promise.reject(
        new PgxError('POSTGRES_FAILED', `query on a closed connection to PostgreSQL at ${this.path}`, {
          hint: 'Open a new connection; PostgreSQL may have restarted (see pgx status and the runtime log).',
        }),
      );
    }
    return new Promise<QueryResult>((resolve, reject) => {
      this.queue.push({ sql, resolve, reject });
      // Until the handshake's ReadyForQuery the server may still ask for a password; finishHead sends these.
      if (this.queue[0]!.sql !== null) this.socket.write(serialize.query(sql));
    });
  }

  /** Runs a `COPY ... FROM STDIN` statement, sending `data` (COPY's text format) as its input. */
  copyFrom(sql: string, data: string): Promise<QueryResult> {
    if (this.isClosed || this.ending || this.queue.length > 0) {
      return Promise.reject(new PgxError('INTERNAL', 'copyFrom needs an open, idle connection'));
    }
    return new Promise<QueryResult>((resolve, reject) => {
      this.queue.push({ sql, copyData: Buffer.from(data, 'utf8'), resolve, reject });
      this.socket.write(serialize.query(sql));
    });
  }

  /** Sends Terminate and waits for the socket to close; queries not yet answered are rejected. */
  async close(): Promise<void> {
    if (!this.isClosed && !this.ending) {
      this.ending = true;
      this.startTimer('closing the connection to PostgreSQL');
      this.socket.end(serialize.end());
    }
    await this.closed;
  }

  private onMessage(msg: BackendMessage): void {
    // Given up (see copyInResponse): the rest of the chunk being parsed means nothing any more.
    if (this.socket.destroyed) return;
    switch (msg.name) {
      case 'authenticationOk':
      case 'parameterStatus':
      case 'backendKeyData':
      case 'notice':
      case 'notification':
      case 'copyOutResponse':
      case 'copyData':
      case 'copyDone':
        return;
      case 'authenticationCleartextPassword':
      case 'authenticationMD5Password':
      case 'authenticationSASL':
        this.socketError = new PgxError('POSTGRES_FAILED', `PostgreSQL asked for a password on ${this.path}; the runtime's admin connections use trust authentication`, {
          hint: 'Keep the "local all all trust" line that initdb --auth=trust wrote in pg_hba.conf of the runtime data directory.',
        });
        this.socket.destroy();
        return;
      case 'copyInResponse': {
        const data = this.queue[0]?.copyData;
        if (data !== undefined) {
          for (let at = 0; at < data.length; at += COPY_CHUNK) this.socket.write(serialize.copyData(data.subarray(at, at + COPY_CHUNK)));
          this.socket.write(serialize.copyDone());
          return;
        }
        if (this.queue.length > 1) {
          // The server, now reading COPY data, swallows the next pipelined Query as a protocol
          // violation: its answer would never come, so the connection is out of step. Give it up.
          this.socketError ??= new PgxError('POSTGRES_FAILED', 'COPY FROM STDIN is not supported by the runtime admin client');
          this.socket.destroy();
          return;
        }
        // Nothing to send: fail the COPY so the server moves on to ErrorResponse and ReadyForQuery.
        this.socket.write(serialize.copyFail('COPY FROM STDIN is not supported by the runtime admin client'));
        return;
      }
      case 'rowDescription':
        this.fields = (msg as RowDescriptionMessage).fields.map((f) => f.name);
        this.rows = [];
        return;
      case 'dataRow':
        this.rows.push((msg as DataRowMessage).fields as (string | null)[]);
        return;
      case 'commandComplete':
        this.last = { rows: this.rows, fields: this.fields, command: (msg as CommandCompleteMessage).text };
        this.rows = [];
        this.fields = [];
        return;
      case 'emptyQuery':
        this.last = { rows: [], fields: [], command: '' };
        return;
      case 'error':
        // After an error the server skips the rest of the query string; keep the first.
        this.error ??= toPostgresError(msg as DatabaseError);
        return;
      case 'readyForQuery':
        this.finishHead();
        return;
      default:
        // Extended-protocol replies cannot occur: we only send simple queries.
        return;
    }
  }

  /** ReadyForQuery: the head query is done; settle it. After the handshake, send what queued behind it. */
  private finishHead(): void {
    const head = this.queue.shift();
    const { error, last } = this;
    this.resetResult();
    if (head?.sql === null && !this.ending) {
      for (const q of this.queue) this.socket.write(serialize.query(q.sql!));
    }
    if (head) {
      if (error) head.reject(error);
      else head.resolve(last);
    }
  }

  private onClose(): void {
    this.isClosed = true;
    this.stopTimer();
    const lost = this.error ?? this.socketError;
    const reason =
      lost instanceof PgxError
        ? lost
        : new PgxError('POSTGRES_FAILED', `connection to PostgreSQL at ${this.path} closed${lost ? `: ${lost.message}` : ''}`, {
            hint: 'Check that the runtime PostgreSQL is running (pgx status) and read its log lines.',
            cause: lost,
          });
    for (const p of this.queue.splice(0)) p.reject(reason);
    this.resetResult();
  }

  private resetResult(): void {
    this.fields = [];
    this.rows = [];
    this.last = { rows: [], fields: [], command: '' };
    this.error = undefined;
  }

  private startTimer(what: string): void {
    this.stopTimer();
    this.timer = setTimeout(() => {
      this.socketError ??= new PgxError('POSTGRES_FAILED', `timed out after ${this.timeoutMs} ms ${what}`, {
        hint: 'Check that the runtime PostgreSQL is running (pgx status) and read its log lines.',
      });
      this.socket.destroy();
    }, this.timeoutMs);
  }

  private stopTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = undefined;
  }
}

function toPostgresError(msg: DatabaseError): PgxError {
  return new PgxError('POSTGRES_FAILED', msg.message, { sqlstate: msg.code ?? 'XX000', detail: msg.detail, hint: msg.hint });
}

/** An identifier as PostgreSQL reads it: in double quotes, inner double quotes doubled. */
export function quoteIdent(name: string): string {
  rejectNul(name, 'identifier');
  return `"${name.replace(/"/g, '""')}"`;
}

/**
 * A string literal as PostgreSQL reads it: single quotes doubled; if a backslash appears, the E'' form
 * with backslashes doubled, so the result means the same whatever standard_conforming_strings says.
 */
export function quoteLiteral(value: string): string {
  rejectNul(value, 'string literal');
  const quoted = value.replace(/'/g, "''");
  return value.includes('\\') ? `E'${quoted.replace(/\\/g, '\\\\')}'` : `'${quoted}'`;
}

function rejectNul(value: string, what: string): void {
  // PostgreSQL text cannot hold NUL; quoting it would silently truncate the statement.
  if (value.includes('\0')) {
    throw new PgxError('INVALID_PARAMETER', `a NUL character cannot appear in a PostgreSQL ${what}`, {
      hint: 'Remove the \\0 character from the name or value.',
    });
  }
}
