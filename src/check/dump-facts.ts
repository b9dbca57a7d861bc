// Facts about a source from a plain SQL dump (`pgx check --file schema.sql`, made with `pg_dump -s`):
// the script is cut into statements (quotes, dollar quotes, comments and psql meta-commands such as
// pg_dump's \restrict understood, COPY data skipped), then each statement is matched against the
// handful of forms pg_dump writes for what the rules care about. A hand-written script works too, as
// long as it uses those forms. What a schema dump cannot show (size, large objects, settings) is null.

import { emptyFacts, isBuiltinRole, versionNum, type CollationProvider, type SourceFacts } from './source-facts.js';

/** An identifier, quoted or not; a possibly schema-qualified name. */
const ID = String.raw`(?:"(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)`;
const QNAME = String.raw`${ID}(?:\s*\.\s*${ID})*`;
const STRING = String.raw`'(?:[^']|'')*'`;
/** Any string literal, E'...' with backslash escapes included (for blanking them out). */
const ANY_STRING = String.raw`\b[Ee]'(?:[^'\\]|\\.|'')*'|'(?:[^']|'')*'`;

/** Languages whose functions run unrestricted code, when the dump does not say (CREATE LANGUAGE). */
const UNTRUSTED_LANGUAGES = new Set(['plperlu', 'plpythonu', 'plpython2u', 'plpython3u', 'pltclu', 'plr', 'javau', 'plsh']);
const TRUSTED_LANGUAGES = new Set(['plpgsql', 'plperl', 'pltcl', 'plv8', 'java', 'plrust']);
/** Collations every PostgreSQL has, whatever the OS. */
const PORTABLE_COLLATIONS = new Set(['default', 'c', 'posix', 'ucs_basic', 'pg_c_utf8', 'unicode']);

export function readDumpFacts(sql: string, file: string): SourceFacts {
  const facts = emptyFacts('dump', file);
  const from = /^-- Dumped from database version (\S+)/m.exec(sql);
  const by = /^-- Dumped by pg_dump version (\S+)/m.exec(sql);
  if (from) {
    facts.serverVersion = from[1]!;
    facts.serverVersionNum = versionNum(from[1]!);
  }
  if (by) facts.dumpVersion = by[1]!;

  const declaredLanguages = new Map<string, boolean>();
  const functionLanguages: { fn: string; language: string }[] = [];
  const collationsUsed = new Set<string>();
  const definedCollations = new Map<string, { provider: CollationProvider; locale: string | null }>();
  const largeObjects = new Set<string>();
  const add = (list: string[], name: string): void => {
    if (!list.includes(name)) list.push(name);
  };

  for (const s of statements(sql)) {
    let m: RegExpExecArray | null;
    if ((m = /^SET client_encoding = '([^']+)'/i.exec(s))) facts.encoding ??= m[1]!.toUpperCase();
    else if ((m = new RegExp(String.raw`^SET default_tablespace = (${ID}|${STRING})`, 'i').exec(s))) {
      const ts = m[1]!.startsWith("'") ? m[1]!.slice(1, -1).replace(/''/g, "'") : ident(m[1]!);
      if (ts !== '' && ts !== 'pg_default') add(facts.tablespaces, ts);
    } else if ((m = new RegExp(String.raw`^CREATE EXTENSION (?:IF NOT EXISTS )?(${ID})`, 'i').exec(s))) add(facts.extensions, ident(m[1]!));
    else if ((m = new RegExp(String.raw`^CREATE (?:OR REPLACE )?(TRUSTED )?(?:PROCEDURAL )?LANGUAGE (${ID})`, 'i').exec(s))) declaredLanguages.set(ident(m[2]!), m[1] !== undefined);
    else if ((m = new RegExp(String.raw`^CREATE (?:OR REPLACE )?(?:FUNCTION|PROCEDURE) (${QNAME})\s*`, 'i').exec(s))) {
      const argsEnd = s[m[0].length] === '(' ? closingParen(s, m[0].length) : m[0].length;
      const fn = `${qname(m[1]!)}${s.slice(m[0].length, argsEnd)}`;
      // LANGUAGE at the top level of what follows the arguments (not a RETURNS TABLE column's name).
      const lang = new RegExp(String.raw`\bLANGUAGE\s+(${ID}|'[^']*')`, 'i').exec(topLevel(s.slice(argsEnd)));
      // Without LANGUAGE, only an SQL-standard body (BEGIN ATOMIC, RETURN) is valid: SQL.
      const language = lang ? (lang[1]!.startsWith("'") ? lang[1]!.slice(1, -1).toLowerCase() : ident(lang[1]!)) : 'sql';
      if (language === 'c') {
        const as = new RegExp(String.raw`\bAS\s+(${STRING})`, 'i').exec(s.slice(argsEnd));
        facts.cFunctions.push({ name: fn, library: as ? as[1]!.slice(1, -1).replace(/''/g, "'") : '' });
      } else if (language !== 'sql' && language !== 'internal') functionLanguages.push({ fn, language });
    } else if ((m = new RegExp(String.raw`^CREATE PUBLICATION (${ID})`, 'i').exec(s))) add(facts.publications, ident(m[1]!));
    else if ((m = new RegExp(String.raw`^CREATE SUBSCRIPTION (${ID})`, 'i').exec(s))) add(facts.subscriptions, ident(m[1]!));
    else if ((m = new RegExp(String.raw`^CREATE EVENT TRIGGER (${ID})`, 'i').exec(s))) add(facts.eventTriggers, ident(m[1]!));
    else if ((m = new RegExp(String.raw`^CREATE FOREIGN DATA WRAPPER (${ID})`, 'i').exec(s))) add(facts.foreignDataWrappers, ident(m[1]!));
    else if ((m = new RegExp(String.raw`^CREATE SERVER (?:IF NOT EXISTS )?(${ID}).*?\bFOREIGN DATA WRAPPER (${ID})`, 'i').exec(s))) {
      facts.foreignServers.push({ name: ident(m[1]!), wrapper: ident(m[2]!) });
    } else if ((m = new RegExp(String.raw`^CREATE COLLATION (?:IF NOT EXISTS )?(${QNAME})\s*\((.*)\)`, 'i').exec(s))) {
      const opts = m[2]!;
      const prov = /\bprovider\s*=\s*'?(\w+)'?/i.exec(opts)?.[1]?.toLowerCase();
      const locale = new RegExp(String.raw`\b(?:locale|lc_collate)\s*=\s*(${STRING}|${ID})`, 'i').exec(opts)?.[1];
      definedCollations.set(qname(m[1]!), {
        provider: prov === 'icu' ? 'icu' : prov === 'builtin' ? 'builtin' : 'libc',
        locale: locale === undefined ? null : locale.startsWith("'") ? locale.slice(1, -1) : ident(locale),
      });
    } else if (/^CREATE DATABASE /i.test(s)) {
      // pg_dump -C: the database's own encoding and locale.
      const opt = (name: string): string | undefined => new RegExp(String.raw`\b${name}\s*=\s*'([^']*)'`, 'i').exec(s)?.[1];
      const locale = opt('LOCALE');
      facts.database = ident(new RegExp(String.raw`^CREATE DATABASE (${ID})`, 'i').exec(s)![1]!);
      facts.encoding = opt('ENCODING')?.toUpperCase() ?? facts.encoding;
      facts.collate = opt('LC_COLLATE') ?? locale ?? null;
      facts.ctype = opt('LC_CTYPE') ?? locale ?? null;
      const prov = /\bLOCALE_PROVIDER\s*=\s*'?(\w+)'?/i.exec(s)?.[1]?.toLowerCase();
      facts.localeProvider = prov === 'icu' ? 'icu' : prov === 'builtin' ? 'builtin' : 'libc';
    } else if ((m = new RegExp(String.raw`^CREATE POLICY .*?\bTO ((?:${ID}\s*,\s*)*${ID})(?:\s+(?:USING|WITH)\b|$)`, 'i').exec(s))) {
      for (const r of roleList(m[1]!)) add(facts.policyRoles, r);
    }

    // Clauses that may appear in several kinds of statement (looked for outside string literals).
    const bare = s.replace(new RegExp(ANY_STRING, 'g'), "''");
    if ((m = new RegExp(String.raw`^(?:ALTER|CREATE) TABLESPACE (${ID})`, 'i').exec(s))) add(facts.tablespaces, ident(m[1]!));
    else if (!/^SET /i.test(s)) {
      for (const t of bare.matchAll(new RegExp(String.raw`\bTABLESPACE\s*=?\s*(${ID})`, 'gi'))) {
        const ts = ident(t[1]!);
        if (ts !== 'pg_default' && ts !== 'pg_global') add(facts.tablespaces, ts);
      }
    }
    for (const c of bare.matchAll(new RegExp(String.raw`\bCOLLATE\s+(${QNAME})`, 'gi'))) collationsUsed.add(qname(c[1]!));
    if ((m = new RegExp(String.raw`^ALTER .* OWNER TO (${ID})$`, 'i').exec(s))) add(facts.roles, ident(m[1]!));
    if ((m = new RegExp(String.raw`^GRANT .*? TO ((?:${ID}\s*,\s*)*${ID})(?:\s+WITH\b|\s+GRANTED\b|$)`, 'i').exec(s))) {
      for (const r of roleList(m[1]!)) add(facts.roles, r);
    }
    for (const lo of s.matchAll(/\blo_create\('?(\d+)'?\)|^ALTER LARGE OBJECT (\d+)/gi)) largeObjects.add(lo[1] ?? lo[2]!);
  }

  facts.roles = facts.roles.filter((r) => !isBuiltinRole(r));
  facts.policyRoles = facts.policyRoles.filter((r) => !isBuiltinRole(r));
  if (largeObjects.size > 0) facts.largeObjects = largeObjects.size;

  const languages = new Map<string, { name: string; trusted: boolean | null; functions: string[] }>();
  for (const [name, trusted] of declaredLanguages) languages.set(name, { name, trusted, functions: [] });
  for (const { fn, language } of functionLanguages) {
    let l = languages.get(language);
    if (!l) {
      const trusted = UNTRUSTED_LANGUAGES.has(language) ? false : TRUSTED_LANGUAGES.has(language) ? true : null;
      languages.set(language, (l = { name: language, trusted, functions: [] }));
    }
    l.functions.push(fn);
  }
  // An untrusted language an extension installs (CREATE EXTENSION plperlu) counts even unused.
  for (const e of facts.extensions) if (UNTRUSTED_LANGUAGES.has(e) && !languages.has(e)) languages.set(e, { name: e, trusted: false, functions: [] });
  facts.languages = [...languages.values()];

  for (const [name, c] of definedCollations) facts.collations.push({ name, ...c });
  for (const name of collationsUsed) {
    const bare = name.replace(/^pg_catalog\./, '').toLowerCase();
    if (PORTABLE_COLLATIONS.has(bare) || definedCollations.has(name)) continue;
    // A pg_catalog collation other than the portable ones was imported from the OS's locales (libc),
    // or is one of ICU's (names with a -x- suffix, und-...).
    facts.collations.push({ name, provider: /-x-|^pg_catalog\.und/i.test(name) ? 'icu' : 'libc', locale: name.replace(/^pg_catalog\./, '') });
  }
  return facts;
}

/** The index just past the parenthesis that closes the one at `open`, skipping quoted text. */
function closingParen(s: string, open: number): number {
  let depth = 0;
  for (let i = open; i < s.length; i++) {
    const ch = s[i];
    if (ch === "'" || ch === '"') {
      i = s.indexOf(ch, i + 1);
      if (i === -1) return s.length;
    } else if (ch === '(') depth++;
    else if (ch === ')' && --depth === 0) return i + 1;
  }
  return s.length;
}

/** `s` without what is inside parentheses (string literals kept whole). */
function topLevel(s: string): string {
  let out = '';
  let depth = 0;
  for (const part of s.split(new RegExp(`(${STRING})`))) {
    if (part.startsWith("'")) {
      if (depth === 0) out += part;
      continue;
    }
    for (const ch of part) {
      if (ch === '(') depth++;
      else if (ch === ')') depth = Math.max(0, depth - 1);
      else if (depth === 0) out += ch;
    }
  }
  return out;
}

/** A name as PostgreSQL folds it: quoted kept as written, unquoted in lower case. */
function ident(text: string): string {
  return text.startsWith('"') ? text.slice(1, -1).replace(/""/g, '"') : text.toLowerCase();
}

function qname(text: string): string {
  return [...text.matchAll(new RegExp(ID, 'g'))].map((m) => ident(m[0])).join('.');
}

/** The roles of a `TO a, b` list, without PUBLIC and the CURRENT_USER-style keywords. */
function roleList(text: string): string[] {
  return [...text.matchAll(new RegExp(ID, 'g'))]
    .filter((m) => m[0].startsWith('"') || !/^(public|current_user|current_role|session_user|group)$/i.test(m[0]))
    .map((m) => ident(m[0]));
}

/**
 * The statements of a SQL script, each on one line with runs of white space made one space: comments
 * dropped, dollar-quoted bodies emptied (`$$$$`, so nothing inside a function body matches), quoted
 * strings and identifiers kept, psql meta-command lines (\connect, \restrict) dropped, and the data
 * lines after COPY ... FROM stdin skipped up to `\.`.
 */
export function statements(sql: string): string[] {
  const out: string[] = [];
  let cur = '';
  let i = 0;
  const n = sql.length;
  const atLineStart = (): boolean => cur.trim() === '' && /^[ \t]*$/.test(sql.slice(sql.lastIndexOf('\n', i - 1) + 1, i));
  const finish = (): void => {
    const s = cur.replace(/\s+/g, ' ').trim();
    cur = '';
    if (s === '') return;
    out.push(s);
    if (/^COPY .* FROM stdin/i.test(s)) {
      // Data lines follow the statement's line, up to a line holding only \.
      const end = sql.indexOf('\n\\.', i);
      i = end === -1 ? n : sql.indexOf('\n', end + 1) === -1 ? n : sql.indexOf('\n', end + 1);
    }
  };
  while (i < n) {
    const ch = sql[i]!;
    const next = sql[i + 1];
    if (ch === '\\' && atLineStart()) {
      const eol = sql.indexOf('\n', i);
      i = eol === -1 ? n : eol;
    } else if (ch === '-' && next === '-') {
      const eol = sql.indexOf('\n', i);
      i = eol === -1 ? n : eol;
      cur += ' ';
    } else if (ch === '/' && next === '*') {
      let depth = 1;
      i += 2;
      while (i < n && depth > 0) {
        if (sql[i] === '/' && sql[i + 1] === '*') (depth++, (i += 2));
        else if (sql[i] === '*' && sql[i + 1] === '/') (depth--, (i += 2));
        else i++;
      }
      cur += ' ';
    } else if (ch === "'") {
      // E'...' strings take backslash escapes; standard strings only ''.
      const escapes = /[Ee]$/.test(cur) && !/[A-Za-z0-9_$][Ee]$/.test(cur);
      let j = i + 1;
      while (j < n) {
        if (escapes && sql[j] === '\\') j += 2;
        else if (sql[j] === "'" && sql[j + 1] === "'") j += 2;
        else if (sql[j] === "'") break;
        else j++;
      }
      cur += sql.slice(i, j + 1);
      i = j + 1;
    } else if (ch === '"') {
      let j = i + 1;
      while (j < n && !(sql[j] === '"' && sql[j + 1] !== '"')) j += sql[j] === '"' ? 2 : 1;
      cur += sql.slice(i, j + 1);
      i = j + 1;
    } else if (ch === '$' && !/[A-Za-z0-9_$]$/.test(cur)) {
      const tag = /^\$(?:[A-Za-z_][A-Za-z0-9_]*)?\$/.exec(sql.slice(i, i + 64));
      if (tag) {
        const end = sql.indexOf(tag[0], i + tag[0].length);
        i = end === -1 ? n : end + tag[0].length;
        cur += '$$$$';
      } else {
        cur += ch;
        i++;
      }
    } else if (ch === ';') {
      i++;
      finish();
    } else {
      cur += ch;
      i++;
    }
  }
  finish();
  return out;
}
