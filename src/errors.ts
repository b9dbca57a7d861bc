// The closed set of errors PGX raises. Each code maps to the SQLSTATE a PostgreSQL client expects and
// to the HTTP status the control API answers with; adding a code fails to compile until both are mapped.
// Callers tell errors apart by `code`, never by their message (test/errors-by-code.test.ts checks src/).
// A hint is worded for the surface it is shown on: the runtime writes its hints in SQL's terms, and the
// HTTP API, the CLI and the MCP tools choose their own by code (api/hints.ts, cli/hints.ts, mcp/tools.ts).

export type ErrorCode =
  | 'PROTOCOL_VIOLATION'
  | 'FEATURE_NOT_SUPPORTED'
  | 'INVALID_AUTHORIZATION'
  | 'INVALID_PASSWORD'
  | 'UNKNOWN_DATABASE'
  | 'DATABASE_DROPPED'
  | 'UNKNOWN_TEMPLATE'
  | 'TEMPLATE_NOT_SEALED'
  | 'NOT_A_TEMPLATE'
  | 'TEMPLATE_SEALED'
  | 'DUPLICATE_DATABASE'
  | 'INSUFFICIENT_PRIVILEGE'
  | 'OBJECT_IN_USE'
  | 'TOO_MANY_DATABASES'
  | 'TOO_MANY_CONNECTIONS'
  | 'OUT_OF_MEMORY'
  | 'DISK_FULL'
  | 'CANNOT_CONNECT_NOW'
  | 'ADMIN_SHUTDOWN'
  | 'QUERY_CANCELED'
  | 'INVALID_PARAMETER'
  | 'CONFIG_INVALID'
  | 'POSTGRES_FAILED'
  | 'SCRIPT_FAILED'
  | 'INTERNAL';

interface CodeInfo {
  sqlstate: string;
  http: number;
}

const CODES: Record<ErrorCode, CodeInfo> = {
  PROTOCOL_VIOLATION: { sqlstate: '08P01', http: 400 },
  FEATURE_NOT_SUPPORTED: { sqlstate: '0A000', http: 400 },
  INVALID_AUTHORIZATION: { sqlstate: '28000', http: 401 },
  INVALID_PASSWORD: { sqlstate: '28P01', http: 401 },
  UNKNOWN_DATABASE: { sqlstate: '3D000', http: 404 },
  // A name PGX dropped lately (a tombstone): absent as any missing database, but each surface says how to make it again.
  DATABASE_DROPPED: { sqlstate: '3D000', http: 404 },
  // A template is a database: a missing or unsealed one is what PostgreSQL calls a missing catalog too.
  UNKNOWN_TEMPLATE: { sqlstate: '3D000', http: 404 },
  TEMPLATE_NOT_SEALED: { sqlstate: '3D000', http: 404 },
  // A database that exists but is no template PGX knows, where a template was asked for (a drop, a rename).
  NOT_A_TEMPLATE: { sqlstate: '22023', http: 400 },
  // A connect to a sealed template: PostgreSQL's own 55000 ("not currently accepting connections").
  TEMPLATE_SEALED: { sqlstate: '55000', http: 409 },
  DUPLICATE_DATABASE: { sqlstate: '42P04', http: 409 },
  INSUFFICIENT_PRIVILEGE: { sqlstate: '42501', http: 403 },
  OBJECT_IN_USE: { sqlstate: '55006', http: 409 },
  TOO_MANY_DATABASES: { sqlstate: '53400', http: 429 },
  TOO_MANY_CONNECTIONS: { sqlstate: '53300', http: 429 },
  OUT_OF_MEMORY: { sqlstate: '53200', http: 503 },
  DISK_FULL: { sqlstate: '53100', http: 507 },
  CANNOT_CONNECT_NOW: { sqlstate: '57P03', http: 503 },
  ADMIN_SHUTDOWN: { sqlstate: '57P01', http: 503 },
  QUERY_CANCELED: { sqlstate: '57014', http: 408 },
  INVALID_PARAMETER: { sqlstate: '22023', http: 400 },
  CONFIG_INVALID: { sqlstate: 'F0000', http: 400 },
  POSTGRES_FAILED: { sqlstate: '58000', http: 500 },
  // A template's script, dump or masking failed (PostgreSQL's SQLSTATE passed on): the request, not the runtime.
  SCRIPT_FAILED: { sqlstate: '58000', http: 422 },
  INTERNAL: { sqlstate: 'XX000', http: 500 },
};

/** Every code, for checking a code that came from outside (an API answer) without a cast. */
export function isErrorCode(code: string): code is ErrorCode {
  return Object.prototype.hasOwnProperty.call(CODES, code);
}

export interface PgxErrorOptions {
  hint?: string | undefined;
  detail?: string | undefined;
  cause?: unknown;
  /**
   * The SQLSTATE PostgreSQL (or a remote PGX API) gave, when it is passed on as it came instead of the
   * code's own: a POSTGRES_FAILED error keeps PostgreSQL's 42P04 or 42501.
   */
  sqlstate?: string | undefined;
}

export class PgxError extends Error {
  readonly code: ErrorCode;
  /** What the user can do about it, naming the setting or command where one applies. */
  readonly hint: string | undefined;
  readonly detail: string | undefined;
  private readonly passedSqlstate: string | undefined;

  constructor(code: ErrorCode, message: string, opts: PgxErrorOptions = {}) {
    super(message, opts.cause === undefined ? undefined : { cause: opts.cause });
    this.name = 'PgxError';
    this.code = code;
    this.hint = opts.hint;
    this.detail = opts.detail;
    this.passedSqlstate = opts.sqlstate;
  }

  get sqlstate(): string {
    return this.passedSqlstate ?? CODES[this.code].sqlstate;
  }

  get httpStatus(): number {
    return CODES[this.code].http;
  }

  /**
   * The same error with the hint a surface words for it (a CLI command, an HTTP route, an MCP tool),
   * or this one when the surface has none for its code.
   */
  withHint(hint: string | undefined): PgxError {
    if (hint === undefined || hint === this.hint) return this;
    return new PgxError(this.code, this.message, { hint, detail: this.detail, cause: this.cause ?? this, sqlstate: this.sqlstate });
  }
}

/** Hints a surface words itself, for the codes whose fix it names in its own terms. */
export type HintsByCode = Partial<Record<ErrorCode, string>>;

/** Waits for `work`; a PgxError it fails with carries the surface's hint for its code, where it has one. */
export async function withHints<T>(hints: HintsByCode, work: Promise<T>): Promise<T> {
  try {
    return await work;
  } catch (err) {
    throw err instanceof PgxError ? err.withHint(hints[err.code]) : err;
  }
}

/** Any thrown value as a PgxError; unknown throws become INTERNAL with the original kept as cause. */
export function asPgxError(err: unknown): PgxError {
  if (err instanceof PgxError) return err;
  const message = err instanceof Error ? err.message : String(err);
  return new PgxError('INTERNAL', message, { cause: err });
}
