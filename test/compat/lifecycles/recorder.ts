// What a lifecycle observed, as plain data: each step's result (rows, counts, schema), the error a
// client or framework threw (its class and message, and PostgreSQL's fields under it), and the notices
// PostgreSQL sent meanwhile. The transcript of one target is compared with the other's entry by entry;
// nothing a target assigns by itself (database names, pids, OIDs, times) may go into it.

import { expect } from 'chai';

/** One line of a transcript: JSON-like data, compared with deep equality. */
export type Entry = Record<string, unknown>;

/** PostgreSQL's fields of an ErrorResponse or NoticeResponse, as the client library exposes them. */
export interface ServerFields {
  severity?: string;
  code?: string;
  message: string;
  detail?: string;
  hint?: string;
  position?: string;
  where?: string;
  schema?: string;
  table?: string;
  column?: string;
  dataType?: string;
  constraint?: string;
  routine?: string;
}

export interface ErrorSeen {
  /** The class the framework threw (QueryFailedError, UniqueConstraintError, DatabaseError, ...). */
  class: string;
  /** The framework's own message: for some it is PostgreSQL's, for others its own wording. */
  message: string;
  /** The PostgreSQL error under it, wherever the framework keeps it; absent for a client-side error. */
  server?: ServerFields;
}

const FIELDS = ['severity', 'code', 'message', 'detail', 'hint', 'position', 'where', 'schema', 'table', 'column', 'dataType', 'constraint', 'routine'] as const;

/** node-postgres and postgres.js name the fields alike, except postgres.js's data type (`data_type`). */
function serverFields(o: Record<string, unknown>): ServerFields {
  const seen: Record<string, string> = {};
  for (const f of FIELDS) {
    const v = o[f] ?? (f === 'dataType' ? o.data_type : f === 'schema' ? o.schema_name : f === 'table' ? o.table_name : f === 'column' ? o.column_name : f === 'constraint' ? o.constraint_name : undefined);
    if (v !== undefined && v !== null && v !== '') seen[f] = String(v);
  }
  return seen as unknown as ServerFields;
}

function isServerError(o: unknown): o is Record<string, unknown> {
  return typeof o === 'object' && o !== null && typeof (o as { code?: unknown }).code === 'string' && /^[0-9A-Z]{5}$/.test((o as { code: string }).code) && 'severity' in o;
}

/** The PostgreSQL error inside a framework's error: its cause, `original`, `parent` or `driverError`. */
export function serverErrorOf(err: unknown, depth = 0): Record<string, unknown> | undefined {
  if (isServerError(err)) return err;
  if (depth > 4 || typeof err !== 'object' || err === null) return undefined;
  const o = err as Record<string, unknown>;
  for (const k of ['cause', 'original', 'parent', 'driverError']) {
    const inner = o[k] === undefined ? undefined : serverErrorOf(o[k], depth + 1);
    if (inner) return inner;
  }
  return undefined;
}

export function errorSeen(err: unknown): ErrorSeen {
  const e = err as { constructor?: { name?: string }; message?: unknown };
  const seen: ErrorSeen = { class: e?.constructor?.name ?? typeof err, message: String(e?.message ?? err) };
  const server = serverErrorOf(err);
  if (server) seen.server = serverFields(server);
  return seen;
}

export function noticeSeen(n: unknown): ServerFields {
  return serverFields(n as Record<string, unknown>);
}

/** JSON-like copy: Dates as ISO text, Buffers as hex, bigints as text, class instances by toJSON or fields. */
export function plain(value: unknown): unknown {
  return JSON.parse(
    JSON.stringify(value, function (this: Record<string, unknown>, key: string, v: unknown) {
      const raw = this[key];
      if (typeof raw === 'bigint') return `${raw.toString()}n`;
      if (raw instanceof Date) return Number.isNaN(raw.getTime()) ? 'Invalid Date' : raw.toISOString();
      if (Buffer.isBuffer(raw)) return `\\x${raw.toString('hex')}`;
      return v === undefined ? null : v;
    }) ?? 'null',
  );
}

export class Recorder {
  readonly entries: Entry[] = [];
  /** The phase the runner is in; every entry carries it. */
  phase = '';
  private notices: ServerFields[] = [];

  /** For a client's notice hook: pg's `client.on('notice', rec.notice)`, postgres.js's `onnotice`. */
  readonly notice = (n: unknown): void => {
    this.notices.push(noticeSeen(n));
  };

  /** Notices since the last entry; sorted, since a pool's sessions may send theirs in any order. */
  private takeNotices(): { notices?: ServerFields[] } {
    if (this.notices.length === 0) return {};
    const n = this.notices.splice(0).sort((a, b) => JSON.stringify(a).localeCompare(JSON.stringify(b)));
    return { notices: n };
  }

  /** Runs a step and records its result; an unexpected error is recorded, then fails the lifecycle. */
  async step<T>(label: string, fn: () => Promise<T>): Promise<T> {
    try {
      const value = await fn();
      this.entries.push({ phase: this.phase, step: label, value: plain(value), ...this.takeNotices() });
      return value;
    } catch (err) {
      this.entries.push({ phase: this.phase, step: label, error: errorSeen(err), ...this.takeNotices() });
      if (err instanceof Error) err.message = `${this.phase}: ${label}: ${err.message}`;
      throw err;
    }
  }

  /** Runs a step that must fail with SQLSTATE `code`; records what was thrown. */
  async fails(label: string, code: string, fn: () => Promise<unknown>): Promise<ErrorSeen> {
    let seen: ErrorSeen | undefined;
    try {
      await fn();
    } catch (err) {
      seen = errorSeen(err);
    }
    this.entries.push({ phase: this.phase, step: label, ...(seen ? { error: seen } : { value: 'no error' }), ...this.takeNotices() });
    expect(seen, `${this.phase}: ${label}: expected SQLSTATE ${code}, but it succeeded`).to.not.equal(undefined);
    expect(seen!.server?.code, `${this.phase}: ${label}: expected SQLSTATE ${code}, got ${JSON.stringify(seen)}`).to.equal(code);
    return seen!;
  }

  /** Records a value computed outside a step (a CLI's output, a digest). */
  note(label: string, value: unknown): void {
    this.entries.push({ phase: this.phase, note: label, value: plain(value), ...this.takeNotices() });
  }

  /** SQLSTATEs of the expected errors recorded so far, in order. */
  errorCodes(): string[] {
    return this.entries.flatMap((e) => {
      const err = e.error as ErrorSeen | undefined;
      return err?.server?.code ? [err.server.code] : [];
    });
  }
}
