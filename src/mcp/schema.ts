// A minted database's schema as text, for the MCP resource pgx://databases/{name}/schema: what an agent
// reads before writing SQL against the database. Tables, views and their columns with types, defaults
// and NOT NULL come from pg_catalog (format_type prints types as a person writes them: varchar(80),
// timestamp with time zone); indexes from pg_indexes; foreign keys and checks from pg_constraint
// (primary keys and unique constraints already show as their indexes).

import pg from 'pg';

const USER_SCHEMAS = `n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg\\_toast%' AND n.nspname NOT LIKE 'pg\\_temp\\_%'`;

const COLUMNS_SQL = `
SELECT n.nspname AS schema, c.relname AS relation, c.relkind AS kind, a.attname AS column,
       format_type(a.atttypid, a.atttypmod) AS type, a.attnotnull AS not_null,
       pg_get_expr(d.adbin, d.adrelid) AS "default"
  FROM pg_class c
  JOIN pg_namespace n ON n.oid = c.relnamespace
  JOIN pg_attribute a ON a.attrelid = c.oid AND a.attnum > 0 AND NOT a.attisdropped
  LEFT JOIN pg_attrdef d ON d.adrelid = c.oid AND d.adnum = a.attnum
 WHERE c.relkind IN ('r', 'p', 'v', 'm', 'f') AND ${USER_SCHEMAS}
 ORDER BY n.nspname, c.relname, a.attnum`;

const INDEXES_SQL = `
SELECT n.nspname AS schema, t.relname AS relation, i.relname AS name, pg_get_indexdef(i.oid) AS definition
  FROM pg_index x
  JOIN pg_class i ON i.oid = x.indexrelid
  JOIN pg_class t ON t.oid = x.indrelid
  JOIN pg_namespace n ON n.oid = t.relnamespace
 WHERE ${USER_SCHEMAS}
 ORDER BY n.nspname, t.relname, i.relname`;

const CONSTRAINTS_SQL = `
SELECT n.nspname AS schema, t.relname AS relation, c.conname AS name, pg_get_constraintdef(c.oid) AS definition
  FROM pg_constraint c
  JOIN pg_class t ON t.oid = c.conrelid
  JOIN pg_namespace n ON n.oid = t.relnamespace
 WHERE c.contype IN ('f', 'c') AND ${USER_SCHEMAS}
 ORDER BY n.nspname, t.relname, c.conname`;

interface ColumnRow {
  schema: string;
  relation: string;
  kind: string;
  column: string;
  type: string;
  not_null: boolean;
  default: string | null;
}

interface DefinitionRow {
  schema: string;
  relation: string;
  name: string;
  definition: string;
}

const KIND_NAMES: Record<string, string> = { r: 'table', p: 'table (partitioned)', v: 'view', m: 'materialized view', f: 'foreign table' };

/** The schema of the database at `url` as plain text, one block per table or view. */
export async function describeSchema(url: string, database: string): Promise<string> {
  const client = new pg.Client({ connectionString: url, application_name: 'pgx-mcp', connectionTimeoutMillis: 15_000 });
  client.on('error', () => undefined); // a drop or restore ending the session fails this read, not the server
  await client.connect();
  try {
    await client.query('SET statement_timeout = 10000');
    const columns = (await client.query<ColumnRow>(COLUMNS_SQL)).rows;
    const indexes = (await client.query<DefinitionRow>(INDEXES_SQL)).rows;
    const constraints = (await client.query<DefinitionRow>(CONSTRAINTS_SQL)).rows;
    return formatSchema(database, columns, indexes, constraints);
  } finally {
    await client.end().catch(() => undefined);
  }
}

function formatSchema(database: string, columns: ColumnRow[], indexes: DefinitionRow[], constraints: DefinitionRow[]): string {
  const key = (r: { schema: string; relation: string }): string => `${r.schema}.${r.relation}`;
  const relations = new Map<string, ColumnRow[]>();
  for (const c of columns) relations.set(key(c), [...(relations.get(key(c)) ?? []), c]);
  const out = [`-- schema of database ${database}`];
  if (relations.size === 0) out.push('', '(no tables or views yet)');
  for (const [name, cols] of relations) {
    out.push('', `${KIND_NAMES[cols[0]!.kind] ?? 'relation'} ${name}`);
    const width = Math.max(...cols.map((c) => c.column.length));
    for (const c of cols) {
      const extras = [c.not_null ? 'not null' : '', c.default !== null ? `default ${c.default}` : ''].filter((s) => s.length > 0);
      out.push(`  ${c.column.padEnd(width)}  ${c.type}${extras.length > 0 ? `  ${extras.join(' ')}` : ''}`);
    }
    for (const i of indexes.filter((r) => key(r) === name)) out.push(`  index ${i.name}: ${i.definition}`);
    for (const k of constraints.filter((r) => key(r) === name)) out.push(`  constraint ${k.name}: ${k.definition}`);
  }
  return `${out.join('\n')}\n`;
}
