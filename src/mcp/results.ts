// What a tool answers. Success is the value as JSON text (agents read text) plus the same value as
// structuredContent (clients that parse read that). Failure is an MCP tool error (isError: true), never a
// thrown exception: the agent sees what went wrong and what to do next, and the server keeps serving.

import type { CallToolResult } from '@modelcontextprotocol/sdk/types.js';
import { ApiClientError } from '../api/client.js';
import { PgxError, type HintsByCode } from '../errors.js';


/** A successful tool answer. Lists are wrapped as {items} because structuredContent must be an object. */
export function toolResult(value: Record<string, unknown>): CallToolResult {
  return { content: [{ type: 'text', text: formatJson(value) }], structuredContent: value };
}

const isScalar = (v: unknown): boolean => v === null || typeof v !== 'object';

/**
 * JSON indented like JSON.stringify(v, null, 2), except that an array of scalars (a row) or a small
 * object of scalars (a column, a list item) stays on one line: an agent pays per token, and 100 rows
 * of 5 values would otherwise take 700 lines.
 */
function formatJson(value: unknown, indent = ''): string {
  const inner = `${indent}  `;
  if (Array.isArray(value)) {
    if (value.length === 0 || value.every(isScalar)) return JSON.stringify(value);
    return `[\n${value.map((v) => inner + formatJson(v, inner)).join(',\n')}\n${indent}]`;
  }
  if (value !== null && typeof value === 'object') {
    const entries = Object.entries(value);
    const flat = JSON.stringify(value);
    if (indent !== '' && entries.every(([, v]) => isScalar(v)) && flat.length <= 160) return flat;
    if (entries.length === 0) return '{}';
    return `{\n${entries.map(([k, v]) => `${inner}${JSON.stringify(k)}: ${formatJson(v, inner)}`).join(',\n')}\n${indent}}`;
  }
  return JSON.stringify(value) ?? 'null';
}

/** A PostgreSQL error as node-postgres gives it (DatabaseError): what run_sql needs to explain it. */
interface PgErrorLike {
  code: string;
  message: string;
  hint?: string | undefined;
  detail?: string | undefined;
  position?: string | undefined;
  /** The PostgreSQL source function that raised it: tells apart errors that share a SQLSTATE. */
  routine?: string | undefined;
}

function isPgError(err: unknown): err is PgErrorLike {
  const code = (err as { code?: unknown } | null)?.code;
  return err instanceof Error && typeof code === 'string' && /^[0-9A-Z]{5}$/.test(code);
}

/** Hints for SQLSTATEs an agent meets often, where PostgreSQL itself gives none. */
const SQLSTATE_HINTS: Record<string, string> = {
  '57014': 'The statement was canceled: by its statement_timeout (pass a larger timeout_seconds to run_sql, or narrow the statement), or by another session.',
  '42P01': 'The table does not exist in this database; read the resource pgx://databases/{name}/schema to see its tables.',
  '3D000': 'The database is gone (dropped, or expired at its TTL); list_databases shows the live ones, create_database makes a new one.',
  '42501': 'run_sql acts as the database\'s own role, which is not a superuser: it may read and write every table and create, alter and drop its own, but not alter the template\'s tables, nor reach the server\'s files and programs, roles or other databases (docs/agents.md). Use snapshot_database, restore_database and drop_database for what needs more.',
  '57P01': 'The session was ended by a restore, a drop or the runtime stopping; call run_sql again.',
};

const MULTIPLE_STATEMENTS_HINT = 'run_sql takes exactly one statement: send each in its own call (each call is a new session, so a transaction cannot span calls).';

/** A hint for a PostgreSQL error that came without one, by its SQLSTATE (and routine, where a SQLSTATE has many causes). */
function sqlHint(err: PgErrorLike): string | undefined {
  // 42601 is any syntax error; only exec_parse_message refuses a second statement in one Parse.
  if (err.code === '42601' && err.routine === 'exec_parse_message') return MULTIPLE_STATEMENTS_HINT;
  return SQLSTATE_HINTS[err.code];
}

/** Any failure as an MCP tool error: `error CODE (SQLSTATE): message`, then detail and `hint:` lines. */
export function toolError(err: unknown, hints: HintsByCode = {}): CallToolResult {
  const lines: string[] = [];
  if (err instanceof PgxError) {
    lines.push(`error ${err.code} (${err.sqlstate}): ${err.message}`);
    if (err.detail) lines.push(`detail: ${err.detail}`);
    // The API's hints name routes; the MCP server's own errors (scoped-roles.ts, sql.ts) already speak of tools.
    const surface = hints[err.code] ?? (err instanceof ApiClientError ? MCP_HINTS[err.code] : undefined);
    lines.push(`hint: ${surface ?? err.hint ?? 'runtime_status shows the runtime; correct the arguments and call again.'}`);
  } else if (isPgError(err)) {
    lines.push(`error ${err.code}: ${err.message}${err.position ? ` (at character ${err.position})` : ''}`);
    if (err.detail) lines.push(`detail: ${err.detail}`);
    const hint = err.hint ?? sqlHint(err);
    if (hint) lines.push(`hint: ${hint}`);
  } else {
    const message = err instanceof Error ? err.message : String(err);
    lines.push(`error: ${message}`);
    lines.push('hint: This is unexpected; runtime_status shows whether the runtime is healthy. Retry the call once.');
  }
  return { content: [{ type: 'text', text: lines.join('\n') }], isError: true };
}

/**
 * The MCP words for codes any tool may meet from the API, over the API's hints (which name HTTP routes
 * and body fields); a tool's own hints come first.
 */
const MCP_HINTS: HintsByCode = {
  UNKNOWN_DATABASE: 'list_databases shows the minted databases and list_templates the templates.',
  INVALID_AUTHORIZATION: 'Set PGX_API_TOKEN in the MCP server configuration to the runtime API token.',
  OBJECT_IN_USE: 'Close the open sessions, or call again with force: true to end them.',
};
