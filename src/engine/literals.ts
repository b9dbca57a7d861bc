// String literals pgsql-ast-parser cannot read, read the way PostgreSQL's scanner reads them, so a
// control call with such an argument (`SELECT pgx_pin_database($$db$$)`, `E'it\'s'`) is recognised
// like one with a plain literal. maskLiterals walks the SQL once, skipping plain strings and quoted
// identifiers, blanks comments, and replaces each dollar-quoted or escape string with a plain literal
// of the same length (`'xxx'`), so every location the parser reports still points into the original
// text; the decoded values are returned by the offset where each literal starts. Only SQL that passed
// the byte prefilter comes here (control.ts): this is not on the path of ordinary queries.
//
// Anything it cannot read to the end (an unterminated literal or comment) is left as it is from there
// on, and said (`malformed`): such SQL is not parsed (the parser would fail too, after up to 20 ms on
// half a MiB), and PostgreSQL gets the statement unchanged and answers for it.
//
// It also tells where the parser would read other SQL than PostgreSQL: PostgreSQL's whitespace is
// ASCII (space, \t \n \r \f \v) and any other character from U+0080 up belongs to an identifier,
// so `SELECT\u00a0pgx_drop_database('x')` is one name followed by a parenthesis, a syntax error; the
// parser takes U+00A0 and the other Unicode spaces for whitespace, and would read a call there.

export interface MaskedSql {
  /** The SQL with every dollar-quoted and escape string replaced by a plain literal of the same length. */
  masked: string;
  /** The value of each replaced literal, by the offset its first character (E or $) had. */
  values: Map<number, string>;
  /** A name outside quotes holds a Unicode space (U+00A0, ...): whitespace to the parser, not to PostgreSQL. */
  spaceInName: boolean;
  /**
   * The walk stopped before the end: an unterminated literal, quoted name or comment, or an escape
   * string not decoded here (PostgreSQL refuses it: not UTF-8, a zero byte; or a surrogate pair
   * written as two \u escapes, left to PostgreSQL). Not parsed: PostgreSQL answers for it.
   */
  malformed: boolean;
}

/** Whitespace to JavaScript (and so to pgsql-ast-parser), not to PostgreSQL's scanner. */
const UNICODE_SPACE = /[^\S \t\n\r\f\v]/;

// By character code, not by pattern: a pattern per character made a tenant's half MiB name take 13 ms.
const isIdentStartCode = (k: number): boolean => (k >= 0x41 && k <= 0x5a) || (k >= 0x61 && k <= 0x7a) || k === 0x5f || k >= 0x80;
/** A character PostgreSQL's scanner takes into a name or a number: letters, digits, _, $ and U+0080 up. */
export const isIdentCode = (k: number): boolean => isIdentStartCode(k) || (k >= 0x30 && k <= 0x39) || k === 0x24;
const isIdentStart = (c: string): boolean => isIdentStartCode(c.charCodeAt(0));
const isIdentChar = (c: string): boolean => isIdentCode(c.charCodeAt(0));

export function maskLiterals(sql: string): MaskedSql {
  const values = new Map<number, string>();
  let spaceInName = false;
  let out = '';
  let copied = 0;
  let i = 0;
  const n = sql.length;
  const replace = (start: number, end: number, value: string): void => {
    out += `${sql.slice(copied, start)}'${'x'.repeat(end - start - 2)}'`;
    copied = end;
    values.set(start, value);
  };
  // A comment is whitespace to PostgreSQL; the parser stumbles on some (a `$x$` inside one).
  const blank = (start: number, end: number): void => {
    out += sql.slice(copied, start) + ' '.repeat(end - start);
    copied = end;
  };
  while (i < n) {
    const c = sql[i]!;
    const prev = i > 0 ? sql[i - 1]! : ' ';
    if (c === '-' && sql[i + 1] === '-') {
      const eol = sql.indexOf('\n', i);
      const end = eol < 0 ? n : eol;
      blank(i, end);
      i = end;
    } else if (c === '/' && sql[i + 1] === '*') {
      const end = skipBlockComment(sql, i);
      if (end < 0) break;
      blank(i, end);
      i = end;
    } else if (c === "'") {
      const end = skipPlain(sql, i);
      if (end < 0) break;
      i = end;
    } else if (c === '"') {
      const end = sql.indexOf('"', i + 1);
      if (end < 0) break;
      // A doubled quote inside is read as two quoted runs, which skips it just the same.
      i = end + 1;
    } else if ((c === 'E' || c === 'e') && sql[i + 1] === "'" && !isIdentChar(prev)) {
      const read = readEscape(sql, i + 2);
      if (read === null) break;
      replace(i, read.end, read.value);
      i = read.end;
    } else if (c === '$' && !isIdentChar(prev)) {
      const tag = dollarTag(sql, i);
      if (tag === null) {
        i++;
        continue;
      }
      const close = sql.indexOf(tag, i + tag.length);
      if (close < 0) break;
      const end = close + tag.length;
      replace(i, end, sql.slice(i + tag.length, close));
      i = end;
    } else if (isIdentChar(c)) {
      // A whole identifier or number, so that `x$1$` or `ae'` inside one is not taken for a literal.
      const start = i;
      while (i < n && isIdentChar(sql[i]!)) i++;
      spaceInName ||= UNICODE_SPACE.test(sql.slice(start, i));
    } else {
      i++;
    }
  }
  // Only a construct that does not end stops the walk early.
  return { masked: copied === 0 ? sql : out + sql.slice(copied), values, spaceInName, malformed: i < n };
}

/** `$tag$` or `$$` starting at i, or null (a `$n` parameter, or a lone `$`). */
function dollarTag(sql: string, i: number): string | null {
  let j = i + 1;
  if (sql[j] !== '$') {
    if (j >= sql.length || !isIdentStart(sql[j]!)) return null;
    while (j < sql.length && isIdentChar(sql[j]!) && sql[j] !== '$') j++;
    if (sql[j] !== '$') return null;
  }
  return sql.slice(i, j + 1);
}

/** The offset after a plain '...' literal starting at i ('' inside is a quote), or -1. */
function skipPlain(sql: string, i: number): number {
  for (let j = i + 1; j < sql.length; j++) {
    if (sql[j] !== "'") continue;
    if (sql[j + 1] === "'") j++;
    else return j + 1;
  }
  return -1;
}

/** The offset after a block comment starting at i (they nest, as in PostgreSQL), or -1. */
function skipBlockComment(sql: string, i: number): number {
  let depth = 0;
  for (let j = i; j < sql.length - 1; j++) {
    if (sql[j] === '/' && sql[j + 1] === '*') {
      depth++;
      j++;
    } else if (sql[j] === '*' && sql[j + 1] === '/') {
      depth--;
      j++;
      if (depth === 0) return j + 1;
    }
  }
  return -1;
}

const SIMPLE_ESCAPES: Record<string, number> = { b: 0x08, f: 0x0c, n: 0x0a, r: 0x0d, t: 0x09 };
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * An escape string's body from i (just after E'), decoded as PostgreSQL does: \b \f \n \r \t, octal
 * \o \oo \ooo and hex \xh \xhh as bytes, \uXXXX and \UXXXXXXXX, any other escaped character as itself,
 * '' as a quote. Null when it does not end, or would not be valid UTF-8 text (PostgreSQL refuses it
 * then, and says why).
 */
function readEscape(sql: string, i: number): { end: number; value: string } | null {
  // Escapes add single bytes; text between them is encoded a run at a time (a character at a time,
  // half a MiB of it took 60 ms of the event loop every session shares).
  const parts: Uint8Array[] = [];
  let bytes: number[] = [];
  const flush = (): void => {
    if (bytes.length > 0) parts.push(Uint8Array.from(bytes));
    bytes = [];
  };
  const text = (s: string): void => {
    flush();
    parts.push(Buffer.from(s, 'utf8'));
  };
  let j = i;
  while (j < sql.length) {
    const c = sql[j]!;
    if (c === "'") {
      if (sql[j + 1] === "'") {
        bytes.push(0x27);
        j += 2;
        continue;
      }
      flush();
      const value = Buffer.concat(parts);
      if (value.includes(0)) return null;
      try {
        return { end: j + 1, value: UTF8.decode(value) };
      } catch {
        return null;
      }
    }
    if (c !== '\\') {
      // The run up to the next quote or backslash (a character outside the BMP is two UTF-16 units,
      // never split here: neither half is a quote or a backslash).
      let k = j + 1;
      while (k < sql.length && sql.charCodeAt(k) !== 0x27 && sql.charCodeAt(k) !== 0x5c) k++;
      text(sql.slice(j, k));
      j = k;
      continue;
    }
    const e = sql[j + 1];
    if (e === undefined) return null;
    let m: RegExpExecArray | null;
    if (SIMPLE_ESCAPES[e] !== undefined) {
      bytes.push(SIMPLE_ESCAPES[e]);
      j += 2;
    } else if ((m = /^[0-7]{1,3}/.exec(sql.slice(j + 1, j + 4))) !== null) {
      bytes.push(parseInt(m[0], 8) & 0xff);
      j += 1 + m[0].length;
    } else if (e === 'x' && (m = /^[0-9A-Fa-f]{1,2}/.exec(sql.slice(j + 2, j + 4))) !== null) {
      bytes.push(parseInt(m[0], 16));
      j += 2 + m[0].length;
    } else if (e === 'u' || e === 'U') {
      const digits = e === 'u' ? 4 : 8;
      const hex = sql.slice(j + 2, j + 2 + digits);
      if (!new RegExp(`^[0-9A-Fa-f]{${digits}}$`).test(hex)) return null;
      const code = parseInt(hex, 16);
      // Surrogate pairs written as two \u escapes are rare enough to leave to PostgreSQL.
      if (code === 0 || code > 0x10ffff || (code >= 0xd800 && code <= 0xdfff)) return null;
      text(String.fromCodePoint(code));
      j += 2 + digits;
    } else {
      const cp = sql.codePointAt(j + 1)!;
      text(String.fromCodePoint(cp));
      j += cp > 0xffff ? 3 : 2;
    }
  }
  return null;
}
