// Masking rules: what must not be left in a template imported from real data. A mask file is SQL that
// overwrites personal data, plus rules in comments that the runtime checks after it ran:
//
//   -- pgx:forbid users.email ~ '@(?!example\.invalid$)'      no value of users.email may match
//   -- pgx:forbid app.users.phone ~ '[0-9]{6,}'               schema.table.column
//   -- pgx:forbid *.* ~ '[A-Za-z0-9._%+-]+@[A-Za-z0-9.-]+\.[a-z]{2,}'
//                                                              every text column of every table
//
// The regular expression is PostgreSQL's (~ operator, POSIX ARE), quoted as a SQL string literal.

import { PgxError } from '../../errors.js';
import { quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

export interface MaskRule {
  /** The line it came from, for messages. */
  text: string;
  schema: string | null;
  table: string | null;
  column: string | null;
  pattern: string;
}

export interface RuleViolation {
  rule: string;
  column: string;
  rows: number;
}

const RULE = /^--\s*pgx:forbid\s+(\S+)\s+~\s+'((?:[^']|'')*)'\s*$/;
const TARGET = /^(?:([a-z_][a-z0-9_$]*)\.)?([a-z_][a-z0-9_$]*|\*)\.([a-z_][a-z0-9_$]*|\*)$/;

/** The rules in a mask file; a line that starts like a rule but does not parse is an error. */
export function parseMaskRules(sql: string): MaskRule[] {
  const rules: MaskRule[] = [];
  sql.split('\n').forEach((raw, i) => {
    const line = raw.trim();
    if (!/^--\s*pgx:/.test(line)) return;
    const m = RULE.exec(line);
    const target = m ? TARGET.exec(m[1]!) : null;
    if (!m || !target) {
      throw new PgxError('INVALID_PARAMETER', `mask file line ${i + 1}: not a rule: ${line}`, {
        hint: "Write rules as: -- pgx:forbid [schema.]table.column ~ 'regex' (table and column may be *).",
      });
    }
    const star = (s: string | undefined): string | null => (s === undefined || s === '*' ? null : s);
    rules.push({ text: line, schema: target[1] ?? null, table: star(target[2]), column: star(target[3]), pattern: m[2]!.replace(/''/g, "'") });
  });
  return rules;
}

/** Every (column, rule) where some value still matches the rule's pattern. */
export async function checkMaskRules(client: SqlClient, rules: MaskRule[]): Promise<RuleViolation[]> {
  const violations: RuleViolation[] = [];
  for (const rule of rules) {
    const filters = [`c.data_type IN ('text', 'character varying', 'character', 'citext', 'json', 'jsonb')`];
    filters.push(rule.schema === null ? `c.table_schema NOT IN ('pg_catalog', 'information_schema') AND c.table_schema NOT LIKE 'pg\\_%'` : `c.table_schema = ${quoteLiteral(rule.schema)}`);
    if (rule.table !== null) filters.push(`c.table_name = ${quoteLiteral(rule.table)}`);
    if (rule.column !== null) filters.push(`c.column_name = ${quoteLiteral(rule.column)}`);
    const { rows: columns } = await client.query(
      `SELECT c.table_schema, c.table_name, c.column_name FROM information_schema.columns c ` +
        `JOIN information_schema.tables t USING (table_schema, table_name) WHERE t.table_type = 'BASE TABLE' AND ${filters.join(' AND ')} ORDER BY 1, 2, 3`,
    );
    if (columns.length === 0 && rule.column !== null) {
      throw new PgxError('INVALID_PARAMETER', `mask rule names no text column: ${rule.text}`, { hint: 'Check the table and column names (lower case, as PostgreSQL stores them).' });
    }
    for (const [schema, table, column] of columns) {
      const { rows } = await client.query(
        `SELECT count(*) FROM ${quoteIdent(schema!)}.${quoteIdent(table!)} WHERE ${quoteIdent(column!)}::text ~ ${quoteLiteral(rule.pattern)}`,
      );
      const n = Number(rows[0]?.[0] ?? 0);
      if (n > 0) violations.push({ rule: rule.text, column: `${schema}.${table}.${column}`, rows: n });
    }
  }
  return violations;
}
