// Control calls in SQL: which statements are calls of a control function (control-functions.ts
// names them), and the SQL the engine sends PostgreSQL instead (a result as a SELECT, an error as a DO
// block that raises it). control.ts holds a session's messages while calls run.
//
// Recognition is a byte prefilter (no `pgx_` or `pgrust_` anywhere: forwarded untouched, nothing
// decoded or allocated), then a pattern for the plain call most clients send (plainCall), then
// pgsql-ast-parser for the rest. Only statements that are exactly
// `SELECT fn(args) [[AS] alias]`, with literal or `$n` arguments, are calls. The parser reads neither
// dollar-quoted strings nor every escape string, so those literals are read here (literals.ts) and
// handed to the parser as plain strings of the same length, which keeps its locations right.
//
// SQL of more than MAX_PARSED_TOKENS tokens is not parsed, and goes to PostgreSQL as SQL the parser
// cannot read does. A Query or Parse over 1 MiB is not read at all (the pump does not assemble it): it goes to
// PostgreSQL as sent, and if PostgreSQL answers 42883 for an unqualified control function in it, that
// error is rewritten to 0A000 with the hint, as for any misplaced call. Nothing is scanned or parsed. A statement that uses a
// control function any other way (inside other SQL, with computed arguments, or as a call in a Query
// with other statements) is refused with 0A000 and a hint on how to call it, raised where the
// statement stands so the statements before it run as they would have: PostgreSQL would only have
// said that the function does not exist. Anything else, including SQL the parser cannot read, SQL it
// would read otherwise than PostgreSQL (a Unicode space in a name, an unterminated comment after a
// call: literals.ts) and schema-qualified names, goes to PostgreSQL unchanged.

import { createRequire } from 'node:module';
import type { Expr, Statement } from 'pgsql-ast-parser';
import { asPgxError } from '../errors.js';
import { CONTROL_NAMES, type ControlFunction } from './control-functions.js';
import { isIdentCode, maskLiterals } from './literals.js';

/** A literal argument, or a `$n` parameter (0-based) filled in from a Bind. */
type Arg = { value: string | null } | { param: number };

export interface ControlCall {
  fn: ControlFunction;
  /** The result column's name: the alias, or the function name as PostgreSQL would name it. */
  column: string;
  args: Arg[];
}

/** An error for PostgreSQL to raise: the fields of the ErrorResponse the client will see. */
export interface Raise {
  code: string;
  message: string;
  detail?: string | undefined;
  hint?: string | undefined;
}

// ---- recognition ----

const P = 0x70;
const G = 0x67;

/**
 * True if buf[start, end) contains `pgx_` or `pgrust_` in any case. Reads bytes in place and
 * allocates nothing: it runs on every Query and Parse a client sends.
 */
export function mentionsControl(buf: Buffer, start: number, end: number): boolean {
  for (let i = start + 3; i < end; i++) {
    if (buf[i] !== 0x5f) continue;
    // `| 0x20` lower-cases a letter; no other byte lands on these letters.
    if ((buf[i - 3]! | 0x20) === P && (buf[i - 2]! | 0x20) === G && (buf[i - 1]! | 0x20) === 0x78) return true;
    if (
      i - 6 >= start &&
      (buf[i - 6]! | 0x20) === P &&
      (buf[i - 5]! | 0x20) === G &&
      (buf[i - 4]! | 0x20) === 0x72 &&
      (buf[i - 3]! | 0x20) === 0x75 &&
      (buf[i - 2]! | 0x20) === 0x73 &&
      (buf[i - 1]! | 0x20) === 0x74
    ) {
      return true;
    }
  }
  return false;
}

/**
 * The control calls a SQL string consists of, or null unless every statement in it is exactly a
 * control call. `$n` parameters are accepted only where a Bind will supply them.
 */
export function recognize(sql: string, allowParams: boolean): ControlCall[] | null {
  const plan = planQuery(sql, allowParams);
  return plan !== null && 'calls' in plan ? plan.calls : null;
}

let parser: typeof import('pgsql-ast-parser') | undefined;

/**
 * The SQL parser, loaded by the first statement that passes the prefilter rather than at start: loaded,
 * it holds about 6 MB of the runtime's memory (its grammar's tables and code), which a runtime whose
 * tenants never call a control function in SQL need not pay. Loading it costs that first call about
 * 20 ms, once per process. It is a CommonJS package, so it loads synchronously.
 */
function sqlParser(): typeof import('pgsql-ast-parser') {
  return (parser ??= createRequire(import.meta.url)('pgsql-ast-parser') as typeof import('pgsql-ast-parser'));
}

// PostgreSQL's whitespace (scan.l), not JavaScript's \s, which also takes Unicode spaces.
const SPACE = '[ \\t\\n\\r\\f\\v]';
const PLAIN_ARG = `(?:\\$[1-9][0-9]{0,4}|'(?:[^'\\\\]|'')*')`;
// No two runs of whitespace meet (each is followed by something it cannot match), so a tenant's
// megabyte of spaces is read once, not once per way of splitting it between them.
const PLAIN_CALL = new RegExp(
  `^${SPACE}*select${SPACE}+([a-z_][a-z0-9_]*)${SPACE}*\\(${SPACE}*(?:(${PLAIN_ARG}(?:${SPACE}*,${SPACE}*${PLAIN_ARG})*)${SPACE}*)?\\)${SPACE}*(?:;${SPACE}*)?$`,
  'i',
);
const PLAIN_ARGS = new RegExp(PLAIN_ARG, 'g');

/**
 * The call most clients send, read without the parser: `SELECT fn(args)` with an optional semicolon,
 * every argument a `$n` or a '...' literal without backslashes, no alias, no comment. It answers what
 * the parser's path would (test/engine/control.test.ts compares the two), and null for anything else,
 * which the parser then reads: the parser is slow until V8 has compiled it (0.74 ms a call measured
 * in a runtime that had made 60), and loading it costs memory (sqlParser).
 */
export function plainCall(sql: string, allowParams: boolean): ControlCall | null {
  const m = PLAIN_CALL.exec(sql);
  if (m === null) return null;
  // Unquoted, so folded to lower case, as PostgreSQL folds it.
  const name = m[1]!.toLowerCase();
  const known = CONTROL_NAMES.get(name);
  const written = m[2]?.match(PLAIN_ARGS) ?? [];
  if (!known || written.length < known.min || written.length > known.max) return null;
  const args: Arg[] = [];
  for (const a of written) {
    if (a.startsWith("'")) args.push({ value: a.slice(1, -1).replace(/''/g, "'") });
    else if (allowParams) args.push({ param: Number(a.slice(1)) - 1 });
    else return null;
  }
  return { fn: known.fn, column: name, args };
}

/**
 * What the engine does with SQL that mentions a control function: answer its calls, refuse the
 * first statement that uses one out of place (`before`: the SQL ahead of that statement, to run as
 * sent), or (null) leave it all to PostgreSQL.
 */
export type QueryPlan = { calls: ControlCall[] } | { before: string; refused: Raise; params: number };

export function planQuery(sql: string, allowParams: boolean): QueryPlan | null {
  const call = plainCall(sql, allowParams);
  return call !== null ? { calls: [call] } : parsedPlan(sql, allowParams);
}

/**
 * SQL of more tokens than this is not parsed. pgsql-ast-parser is an Earley parser, and its time grows
 * faster than the text: `SELECT pgx_drop_database(1,1,...)` with 16,000 arguments (32 KB) took 13 s of
 * the event loop every tenant shares, 4,000 took 0.6 s, 128 took 9 ms. A call is about a dozen
 * tokens. What is longer goes to PostgreSQL unread, like SQL the parser cannot read: a control
 * function in it gets PostgreSQL's 42883, which the engine turns into 0A000 with the usage hint.
 */
export const MAX_PARSED_TOKENS = 256;

/** More than `max` tokens, counted loosely (a run of word characters, or any other visible character). */
function moreTokensThan(sql: string, max: number): boolean {
  let tokens = 0;
  let inWord = false;
  for (let i = 0; i < sql.length; i++) {
    const c = sql.charCodeAt(i);
    const word = isIdentCode(c);
    if (word ? !inWord : c > 0x20) tokens++;
    inWord = word;
    if (tokens > max) return true;
  }
  return false;
}

/** planQuery by the parser alone. */
export function parsedPlan(sql: string, allowParams: boolean): QueryPlan | null {
  if (moreTokensThan(sql, MAX_PARSED_TOKENS)) return null;
  const { masked, values, spaceInName, malformed } = maskLiterals(sql);
  // PostgreSQL answers for such SQL itself: an error for malformed SQL, and a name it reads whole
  // where the parser would split it.
  if (malformed || spaceInName) return null;
  const { parse } = sqlParser();
  let statements: Statement[];
  try {
    statements = parse(masked, { locationTracking: true });
  } catch {
    return null;
  }
  if (statements.length === 0) return null;
  const calls = statements.map((s) => matchCall(s, allowParams, values));
  if (calls.every((c) => c !== null)) return { calls: calls as ControlCall[] };
  for (let i = 0; i < statements.length; i++) {
    const s = statements[i]!;
    const uses = { name: null as string | null, params: 0 };
    findUses(s, uses);
    if (uses.name === null) continue;
    return { before: sql.slice(0, s._location?.start ?? 0), refused: misplaced(uses.name, calls[i] !== null), params: uses.params };
  }
  return null;
}

/** Finds the first control function a statement calls (unqualified), and the highest `$n` in it. */
function findUses(node: unknown, uses: { name: string | null; params: number }): void {
  if (typeof node !== 'object' || node === null) return;
  if (Array.isArray(node)) {
    for (const x of node) findUses(x, uses);
    return;
  }
  const n = node as { type?: unknown; function?: { name: string; schema?: string }; name?: unknown };
  if (n.type === 'call' && uses.name === null && n.function?.schema === undefined && CONTROL_NAMES.has(n.function!.name)) uses.name = n.function!.name;
  if (n.type === 'parameter' && typeof n.name === 'string') uses.params = Math.max(uses.params, Number(n.name.slice(1)) || 0);
  for (const [k, v] of Object.entries(node)) if (k !== '_location') findUses(v, uses);
}

/** The error for a control function used where the engine cannot answer it. */
function misplaced(name: string, isCall: boolean): Raise {
  const usage = `SELECT ${name}(${CONTROL_NAMES.get(name)!.usage})`;
  return isCall
    ? {
        code: '0A000',
        message: `${name}() must be called in a query of its own`,
        hint: `PGX answers ${name}() itself, so it cannot run between other statements: send ${usage} separately.`,
      }
    : {
        code: '0A000',
        message: `${name}() can only be called as ${usage} [AS name]`,
        hint: `PGX answers ${name}() itself, not inside other SQL: pass literal or $n arguments, and work on its result in your next statement.`,
      };
}

export const UNDEFINED_FUNCTION = '42883';
/** PostgreSQL's 42883 for an unqualified function: `function pgx_pin_database(unknown) does not exist`. */
export const UNDEFINED_CONTROL = /^function ([a-z_]+)\(.*\) does not exist$/s;

/** The error for a control call PostgreSQL got because the engine did not read it (over 1 MiB, or not understood). */
export function unread(name: string): Raise {
  const usage = `SELECT ${name}(${CONTROL_NAMES.get(name)!.usage})`;
  return {
    code: '0A000',
    message: `${name}() must be called as ${usage} in a query of its own, under 1 MiB`,
    hint: `PGX answers ${name}() itself, only in a Query or Parse of at most 1 MiB that is exactly that call, with literal or $n arguments: send it separately.`,
  };
}

/** Whether `o` has no keys but these (and the parser's locations). */
function onlyKeys(o: object, allowed: readonly string[]): boolean {
  return Object.keys(o).every((k) => k === '_location' || allowed.includes(k));
}

/** `values`: the literals maskLiterals replaced, by their offset; the parser saw placeholders there. */
function matchCall(s: Statement, allowParams: boolean, values: ReadonlyMap<number, string>): ControlCall | null {
  // Any key beyond these (FROM, WHERE, DISTINCT, LIMIT, FILTER, OVER, a schema, ...) means the
  // statement is something else, and PostgreSQL should have it.
  if (s.type !== 'select' || !onlyKeys(s, ['type', 'columns']) || s.columns?.length !== 1) return null;
  const col = s.columns[0]!;
  if (!onlyKeys(col, ['expr', 'alias'])) return null;
  const e = col.expr;
  if (e.type !== 'call' || !onlyKeys(e, ['type', 'function', 'args']) || !onlyKeys(e.function, ['name'])) return null;
  const known = CONTROL_NAMES.get(e.function.name);
  if (!known || e.args.length < known.min || e.args.length > known.max) return null;
  const args: Arg[] = [];
  for (const a of e.args) {
    const arg = matchArg(a, allowParams, values);
    if (arg === null) return null;
    args.push(arg);
  }
  // The parser has folded unquoted names to lower case, as PostgreSQL does, but leaves a doubled
  // quote inside a quoted alias as it was written.
  const column = col.alias ? col.alias.name.replace(/""/g, '"') : e.function.name;
  return { fn: known.fn, column, args };
}

function matchArg(a: Expr, allowParams: boolean, values: ReadonlyMap<number, string>): Arg | null {
  switch (a.type) {
    case 'string':
      return { value: values.get(a._location?.start ?? -1) ?? a.value };
    case 'null':
      return { value: null };
    case 'boolean':
      // snapshot's and restore's force flag: passed on as PostgreSQL would print it.
      return { value: a.value ? 'true' : 'false' };
    case 'parameter': {
      const n = /^\$([1-9][0-9]{0,4})$/.exec(a.name);
      return allowParams && n ? { param: Number(n[1]) - 1 } : null;
    }
    default:
      return null;
  }
}

// ---- SQL the engine sends instead ----

/** An escape-string literal: it means the same whatever standard_conforming_strings says. */
export function literal(s: string): string {
  // PostgreSQL text cannot hold NUL, and a NUL would end the Query string early.
  return `E'${s.replace(/\0/g, '').replace(/\\/g, '\\\\').replace(/'/g, "''")}'`;
}

export function identifier(s: string): string {
  return `"${s.replace(/\0/g, '').replace(/"/g, '""')}"`;
}

export function resultSelect(result: string, column: string): string {
  return `SELECT ${literal(result)}::text AS ${identifier(column)}`;
}

/** A DO block that makes PostgreSQL raise exactly this error. */
export function raiseStatement(r: Raise): string {
  const options = [`ERRCODE = ${literal(r.code)}`, `MESSAGE = ${literal(r.message)}`];
  if (r.detail !== undefined) options.push(`DETAIL = ${literal(r.detail)}`);
  if (r.hint !== undefined) options.push(`HINT = ${literal(r.hint)}`);
  const body = `BEGIN RAISE EXCEPTION USING ${options.join(', ')}; END`;
  let tag = '$pgx$';
  for (let i = 0; body.includes(tag); i++) tag = `$pgx${i}$`;
  return `DO ${tag}${body}${tag}`;
}

/** What a thrown value looks like as the error PostgreSQL will raise (NULs dropped, as literal() does). */
export function toRaise(err: unknown): Raise {
  const e = asPgxError(err);
  const clean = (s: string | undefined): string | undefined => s?.replace(/\0/g, '');
  return { code: e.sqlstate, message: clean(e.message)!, detail: clean(e.detail), hint: clean(e.hint) };
}
