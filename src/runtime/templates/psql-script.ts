// A SQL script as psql reads it, split into the steps a template build runs one at a time: statements
// (each with the line it starts on, so an error can name it), COPY ... FROM stdin with the data lines
// that follow it up to `\.`, and the psql meta-commands pg_dump writes (`\restrict`, `\unrestrict`,
// `\connect`). Pure: no I/O.
//
// Statements end at a semicolon outside quotes, comments and parentheses, as psql's lexer decides:
// '...' (with '' inside), E'...' (backslash escapes), "...", $tag$...$tag$, -- and nested /* */
// comments. A meta-command is a backslash at the start of a line outside all of those. Other
// meta-commands (\i, \set, \gexec, ...) would need psql itself: they are refused with their line.

import { PgxError } from '../../errors.js';

export type ScriptStep =
  | { kind: 'sql'; sql: string; line: number }
  /** `sql` is the COPY statement; `data` the lines after it, up to (not including) the `\.` line. */
  | { kind: 'copy'; sql: string; data: string; line: number };

export interface ParsedScript {
  steps: ScriptStep[];
  /** Written by pg_dump (its header comment): its ownership and privileges name the source's roles. */
  fromPgDump: boolean;
}

/** Meta-commands with nothing to do for a script run in the one database being built. */
const IGNORED_META = new Set(['restrict', 'unrestrict', 'connect', 'c', 'encoding']);

const COPY_FROM_STDIN = /^\s*COPY\b[\s\S]*\bFROM\s+stdin\b/i;

export function parseScript(text: string): ParsedScript {
  const steps: ScriptStep[] = [];
  const fromPgDump = /^(--[^\n]*\n)*-- PostgreSQL database dump\b/.test(text.replace(/^\uFEFF/, ''));
  let connected: string | null = null;
  let i = 0;
  let line = 1;
  let start = 0;
  let startLine = 1;
  let depth = 0;
  const n = text.length;

  const flush = (end: number): void => {
    const sql = text.slice(start, end);
    if (sql.trim().length > 0 && !onlyComments(sql)) {
      const stmtLine = startLine + leadingLines(sql);
      if (COPY_FROM_STDIN.test(stripComments(sql))) {
        steps.push({ kind: 'copy', sql, data: readCopyData(), line: stmtLine });
        return;
      }
      steps.push({ kind: 'sql', sql, line: stmtLine });
    }
    start = i;
    startLine = line;
  };

  /** The data lines after a COPY FROM stdin, consumed up to and including the `\.` line. */
  const readCopyData = (): string => {
    // The rest of the COPY statement's line belongs to it.
    const eol = text.indexOf('\n', i);
    i = eol < 0 ? n : eol + 1;
    if (eol >= 0) line++;
    const dataStart = i;
    for (;;) {
      if (i >= n) throw scriptError(line, 'COPY data has no terminating line "\\."');
      const next = text.indexOf('\n', i);
      const end = next < 0 ? n : next;
      const content = text.slice(i, end).replace(/\r$/, '');
      if (content === '\\.') {
        const data = text.slice(dataStart, i);
        i = next < 0 ? n : next + 1;
        line++;
        start = i;
        startLine = line;
        return data;
      }
      i = next < 0 ? n : next + 1;
      line++;
    }
  };

  while (i < n) {
    const c = text[i]!;
    if (c === '\n') {
      line++;
      i++;
      if (text[i] === '\\' && depth === 0) {
        meta();
      }
      continue;
    }
    if (i === 0 && c === '\\') {
      meta();
      continue;
    }
    if (c === '-' && text[i + 1] === '-') {
      const eol = text.indexOf('\n', i);
      i = eol < 0 ? n : eol;
      continue;
    }
    if (c === '/' && text[i + 1] === '*') {
      skipBlockComment();
      continue;
    }
    if (c === "'") {
      const escapes = (text[i - 1] === 'E' || text[i - 1] === 'e') && !isIdentChar(text[i - 2]);
      skipQuoted("'", escapes);
      continue;
    }
    if (c === '"') {
      skipQuoted('"', false);
      continue;
    }
    if (c === '$' && !isIdentChar(text[i - 1])) {
      const m = /^\$([A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(text.slice(i, i + 128));
      if (m) {
        skipDollarQuoted(m[0]);
        continue;
      }
    }
    if (c === '(') depth++;
    else if (c === ')' && depth > 0) depth--;
    else if (c === ';' && depth === 0) {
      i++;
      flush(i);
      continue;
    }
    i++;
  }
  flush(n);
  return { steps, fromPgDump };

  function meta(): void {
    const eol = text.indexOf('\n', i);
    const end = eol < 0 ? n : eol;
    const command = text.slice(i, end).trim();
    const [name = '', ...args] = command.slice(1).split(/\s+/);
    if (text.slice(start, i).trim().length > 0 && !onlyComments(text.slice(start, i))) {
      throw scriptError(line, `psql command \\${name} inside a statement is not supported`);
    }
    if (!IGNORED_META.has(name)) {
      throw scriptError(line, `psql command \\${name} is not supported in a template script`, 'Only what pg_dump writes (\\connect, \\restrict, \\unrestrict) is understood; run the rest with psql against a database and seal it.');
    }
    if (name === 'connect' || name === 'c') {
      const target = args[0] ?? '';
      if (connected !== null && target !== connected) {
        throw scriptError(line, `the script connects to a second database "${target}"`, 'A template is one database: dump one database (pg_dump, not pg_dumpall).');
      }
      connected = target;
    }
    i = end;
    start = i;
    startLine = line;
  }

  function skipBlockComment(): void {
    let nest = 0;
    while (i < n) {
      if (text[i] === '/' && text[i + 1] === '*') {
        nest++;
        i += 2;
      } else if (text[i] === '*' && text[i + 1] === '/') {
        nest--;
        i += 2;
        if (nest === 0) return;
      } else {
        if (text[i] === '\n') line++;
        i++;
      }
    }
  }

  function skipQuoted(quote: string, escapes: boolean): void {
    i++;
    while (i < n) {
      const c = text[i]!;
      if (c === '\n') line++;
      if (escapes && c === '\\') {
        if (text[i + 1] === '\n') line++;
        i += 2;
        continue;
      }
      if (c === quote) {
        if (text[i + 1] === quote) {
          i += 2;
          continue;
        }
        i++;
        return;
      }
      i++;
    }
  }

  function skipDollarQuoted(tag: string): void {
    const end = text.indexOf(tag, i + tag.length);
    const stop = end < 0 ? n : end + tag.length;
    for (let k = i; k < stop; k++) if (text[k] === '\n') line++;
    i = stop;
  }
}

/**
 * A statement pg_dump writes to carry the source's owners and privileges (ALTER ... OWNER TO, GRANT,
 * REVOKE, ALTER DEFAULT PRIVILEGES): those roles are the source cluster's. A build from a pg_dump file
 * leaves them out, as pg_restore --no-owner --no-privileges (and `pgx template import`) does.
 */
export function isOwnershipOrPrivilege(sql: string): boolean {
  const s = stripComments(sql).trim();
  return /^(GRANT|REVOKE)\b/i.test(s) || /^ALTER\s+DEFAULT\s+PRIVILEGES\b/i.test(s) || /^ALTER\b[^;]*\sOWNER\s+TO\s+[^;]+;?$/i.test(s);
}

function scriptError(line: number, message: string, hint?: string): PgxError {
  return new PgxError('INVALID_PARAMETER', `line ${line}: ${message}`, hint === undefined ? {} : { hint });
}

function isIdentChar(c: string | undefined): boolean {
  return c !== undefined && /[A-Za-z0-9_$\u0080-\uffff]/.test(c);
}

function stripComments(sql: string): string {
  return sql.replace(/--[^\n]*/g, '').replace(/\/\*[\s\S]*?\*\//g, '');
}

function onlyComments(sql: string): boolean {
  return stripComments(sql).trim().length === 0;
}

/** Lines before the statement's first character that is not white space or part of a comment. */
function leadingLines(sql: string): number {
  let k = 0;
  let lines = 0;
  while (k < sql.length) {
    if (sql[k] === '\n') {
      lines++;
      k++;
    } else if (/\s/.test(sql[k]!)) {
      k++;
    } else if (sql.startsWith('--', k)) {
      const eol = sql.indexOf('\n', k);
      k = eol < 0 ? sql.length : eol;
    } else if (sql.startsWith('/*', k)) {
      const close = sql.indexOf('*/', k + 2);
      const end = close < 0 ? sql.length : close + 2;
      for (let j = k; j < end; j++) if (sql[j] === '\n') lines++;
      k = end;
    } else {
      break;
    }
  }
  return lines;
}
