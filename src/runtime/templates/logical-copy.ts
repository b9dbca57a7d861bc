// A template import without pg_dump: a logical copy of the source database over the PostgreSQL
// protocol, for sources newer than the machine's pg_dump (which refuses them) or machines with none.
// The source's own server deparses its objects (pg_get_indexdef, pg_get_constraintdef,
// pg_get_viewdef, pg_get_functiondef, pg_get_triggerdef, format_type, pg_get_expr), so the SQL we
// replay is what that server version means, with search_path empty so every name comes qualified.
//
// Order, as pg_dump's: schemas, extensions (as the template's owner, so the runtime's extension
// allow-list applies as it does to pg_restore), enums and domains, sequences, tables, the data (COPY
// from the source piped into COPY on the target, in one REPEATABLE READ snapshot of the source),
// functions (bodies unchecked, as pg_dump sets check_function_bodies off), primary/unique/check/
// exclusion constraints, indexes, foreign keys, late column defaults, views (and functions that need
// them) in rounds until nothing more resolves, triggers, sequence values, comments. Owners and
// privileges are left out, as pg_restore --no-owner --no-privileges leaves them.
//
// Kinds of object this copy does not carry (partitions, materialized views, policies, ...) are found
// before anything is written, and the import fails naming them: a template is never silently short.

import { Transform } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import copyStreams from 'pg-copy-streams';
import { PgxError } from '../../errors.js';
import { PG_MAJOR } from '../postgres/pg-binaries.js';

/** The oldest source major this copy reads (attgenerated, prokind and pg_sequence are all there). */
export const LOGICAL_COPY_MIN_MAJOR = 12;

export interface CopyTarget {
  /** The runtime's private socket directory and port. */
  socketDir: string;
  port: number;
  database: string;
  /** The template's owner: objects are created as it, as pg_restore --no-owner would. */
  user: string;
}

export interface CopyProgress {
  tablesTotal(n: number): void;
  tableDone(): void;
  bytes(n: number): void;
}

const SESSION = "SELECT pg_catalog.set_config('search_path', '', false), pg_catalog.set_config('DateStyle', 'ISO, MDY', false), pg_catalog.set_config('IntervalStyle', 'postgres', false), pg_catalog.set_config('extra_float_digits', '3', false)";

/** The source server's major version (e.g. 18), read over a connection of its own. */
export async function sourceMajor(sourceUrl: string): Promise<number> {
  const client = sourceClient(sourceUrl);
  await client.connect();
  try {
    const { rows } = await client.query<{ v: string }>("SELECT pg_catalog.current_setting('server_version_num') AS v");
    return Math.floor(Number(rows[0]!.v) / 10000);
  } finally {
    await client.end();
  }
}

function sourceClient(sourceUrl: string): pg.Client {
  return new pg.Client({ connectionString: sourceUrl, connectionTimeoutMillis: 15_000, application_name: 'pgx-import' });
}

/** Copies the source database into the (empty) target database. */
export async function logicalCopy(sourceUrl: string, target: CopyTarget, progress: CopyProgress): Promise<void> {
  const src = sourceClient(sourceUrl);
  const dst = new pg.Client({ host: target.socketDir, port: target.port, user: target.user, database: target.database, application_name: 'pgx-import' });
  await src.connect().catch((err: unknown) => {
    throw new PgxError('INVALID_PARAMETER', `connecting to the source failed: ${(err as Error).message}`, { hint: 'Check the source URL, and that the source accepts connections from this machine.', cause: err });
  });
  try {
    await dst.connect();
    await src.query('BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY');
    await src.query(SESSION);
    await dst.query(SESSION);
    await dst.query("SELECT pg_catalog.set_config('check_function_bodies', 'off', false)");
    const major = Math.floor(Number((await src.query<{ v: string }>("SELECT pg_catalog.current_setting('server_version_num') AS v")).rows[0]!.v) / 10000);
    if (major < LOGICAL_COPY_MIN_MAJOR || major > PG_MAJOR) {
      throw new PgxError('INVALID_PARAMETER', `the source runs PostgreSQL ${major}; the logical copy reads ${LOGICAL_COPY_MIN_MAJOR} to ${PG_MAJOR}`, {
        hint: 'Install a pg_dump at least as new as the source (pgx doctor says which) so the import uses it.',
      });
    }
    await refuseUnsupported(src);
    const run = (sql: string): Promise<unknown> => dst.query(sql).catch((err: unknown) => {
      throw copyError(err, sql);
    });
    const list = async (sql: string, params: unknown[] = []): Promise<string[]> => (await src.query<{ sql: string }>(sql, params)).rows.map((r) => r.sql);

    for (const sql of await list(SCHEMAS)) await run(sql);
    for (const sql of await list(EXTENSIONS)) await run(sql);
    for (const sql of await list(ENUMS)) await run(sql);
    for (const sql of await list(DOMAINS)) await run(sql);
    const sequences = (await src.query<{ sql: string; owned: string | null }>(SEQUENCES)).rows;
    for (const s of sequences) await run(s.sql);

    const tables = (await src.query<{ oid: number; name: string; unlogged: boolean; options: string }>(TABLES)).rows;
    const oids = tables.map((t) => t.oid);
    const columns = (await src.query<Column>(COLUMNS, [oids])).rows;
    const lateDefaults: string[] = [];
    for (const t of tables) {
      const cols = columns.filter((c) => c.table === t.oid);
      await run(`CREATE ${t.unlogged ? 'UNLOGGED ' : ''}TABLE ${t.name} (${cols.map((c) => columnDefinition(c)).join(', ')})${t.options}`);
      for (const c of cols) if (c.late_default && c.default !== null) lateDefaults.push(`ALTER TABLE ${t.name} ALTER COLUMN ${c.name} SET DEFAULT ${c.default}`);
    }
    for (const s of sequences) if (s.owned !== null) await run(s.owned);

    progress.tablesTotal(tables.length);
    for (const t of tables) {
      const names = columns.filter((c) => c.table === t.oid && c.generated === '').map((c) => c.name);
      const columnList = names.length > 0 ? ` (${names.join(', ')})` : '';
      await copyTable(src, dst, `${t.name}${columnList}`, progress);
      progress.tableDone();
    }

    const functions = (await src.query<{ name: string; sql: string }>(FUNCTIONS)).rows;
    const waiting: Pending[] = [];
    for (const f of functions) {
      await dst.query(f.sql).catch((err: unknown) => waiting.push({ what: `function ${f.name}`, sql: f.sql, err }));
    }
    for (const sql of await list(CONSTRAINTS, [oids, false])) await run(sql);
    for (const sql of await list(INDEXES, [oids])) await run(sql);
    for (const sql of await list(CONSTRAINTS, [oids, true])) await run(sql);
    for (const sql of lateDefaults) await run(sql);
    const views = (await src.query<{ name: string; sql: string }>(VIEWS)).rows;
    await untilFixpoint(dst, [...waiting, ...views.map((v) => ({ what: `view ${v.name}`, sql: v.sql, err: null }))]);
    for (const sql of await list(TRIGGERS)) await run(sql);
    for (const s of (await src.query<{ name: string }>(SEQUENCE_NAMES)).rows) {
      const { rows } = await src.query<{ last_value: string; is_called: boolean }>(`SELECT last_value, is_called FROM ${s.name}`);
      await dst.query('SELECT pg_catalog.setval($1::pg_catalog.regclass, $2, $3)', [s.name, rows[0]!.last_value, rows[0]!.is_called]).catch((err: unknown) => {
        throw copyError(err, `setval of ${s.name}`);
      });
    }
    for (const sql of await list(COMMENTS)) await run(sql);
    await src.query('COMMIT');
  } finally {
    await Promise.all([src.end().catch(() => undefined), dst.end().catch(() => undefined)]);
  }
}

interface Column {
  table: number;
  name: string;
  type: string;
  collation: string | null;
  notnull: boolean;
  identity: string;
  identity_options: string | null;
  generated: string;
  default: string | null;
  late_default: boolean;
}

function columnDefinition(c: Column): string {
  let def = `${c.name} ${c.type}`;
  if (c.collation !== null) def += ` COLLATE ${c.collation}`;
  if (c.notnull) def += ' NOT NULL';
  if (c.generated !== '') def += ` GENERATED ALWAYS AS (${c.default}) ${c.generated === 's' ? 'STORED' : 'VIRTUAL'}`;
  else if (c.identity !== '') def += ` GENERATED ${c.identity === 'a' ? 'ALWAYS' : 'BY DEFAULT'} AS IDENTITY (${c.identity_options})`;
  else if (c.default !== null && !c.late_default) def += ` DEFAULT ${c.default}`;
  return def;
}

async function copyTable(src: pg.Client, dst: pg.Client, table: string, progress: CopyProgress): Promise<void> {
  const out = src.query(copyStreams.to(`COPY ${table} TO STDOUT`));
  const into = dst.query(copyStreams.from(`COPY ${table} FROM STDIN`));
  const counter = new Transform({
    transform(chunk: Buffer, _enc, done) {
      progress.bytes(chunk.length);
      done(null, chunk);
    },
  });
  await pipeline(out, counter, into).catch((err: unknown) => {
    throw copyError(err, `COPY ${table}`);
  });
}

interface Pending {
  what: string;
  sql: string;
  err: unknown;
}

/** Creates views and waiting functions in rounds until a round makes no progress; what is left fails. */
async function untilFixpoint(dst: pg.Client, pending: Pending[]): Promise<void> {
  let left = pending;
  while (left.length > 0) {
    const next: Pending[] = [];
    for (const p of left) await dst.query(p.sql).catch((err: unknown) => next.push({ ...p, err }));
    if (next.length === left.length) {
      const first = next[0]!;
      const err = copyError(first.err, first.sql);
      throw new PgxError('SCRIPT_FAILED', `the logical copy could not create ${next.map((p) => p.what).join(', ')}: ${err.message}`, {
        ...(err.sqlstate !== undefined ? { sqlstate: err.sqlstate } : {}),
        hint: 'Their dependencies never resolved on the runtime\'s PostgreSQL; a pg_dump at least as new as the source (pgx doctor) imports it instead.',
      });
    }
    left = next;
  }
}

/** A failed statement on either side, as SCRIPT_FAILED keeping PostgreSQL's SQLSTATE. */
function copyError(err: unknown, sql: string): PgxError {
  if (err instanceof PgxError && err.code === 'SCRIPT_FAILED') return err;
  const e = err as { code?: string; message?: string; detail?: string };
  const statement = sql.replace(/\s+/g, ' ').slice(0, 200);
  return new PgxError('SCRIPT_FAILED', `the logical copy failed at "${statement}": ${e.message ?? String(err)}`, {
    sqlstate: typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code) ? e.code : '58000',
    ...(e.detail !== undefined ? { detail: e.detail } : {}),
    hint: 'The source may use an extension or feature this runtime lacks; `pgx check` lists them.',
  });
}

async function refuseUnsupported(src: pg.Client): Promise<void> {
  const { rows } = await src.query<{ kind: string; n: number }>(UNSUPPORTED);
  if (rows.length === 0) return;
  throw new PgxError('FEATURE_NOT_SUPPORTED', `the logical copy does not carry ${rows.map((r) => `${r.kind} (${r.n})`).join(', ')}, which the source has`, {
    hint: 'Install a pg_dump at least as new as the source (pgx doctor says which) so the import uses it.',
  });
}

// Catalog queries, run on the source with search_path empty. Every one works on PostgreSQL 12 to 18.

const USER_NS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname !~ '^pg_(toast|temp)'";

/** Not part of an extension (CREATE EXTENSION makes those). */
function own(catalog: string, oid: string): string {
  return `NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend e WHERE e.classid = 'pg_catalog.${catalog}'::pg_catalog.regclass AND e.objid = ${oid} AND e.deptype = 'e')`;
}

const USER_RELATIONS = `SELECT c.oid FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace WHERE ${USER_NS} AND ${own('pg_class', 'c.oid')}`;

const SCHEMAS = `SELECT format('CREATE SCHEMA IF NOT EXISTS %I', n.nspname) AS sql FROM pg_catalog.pg_namespace n
  WHERE ${USER_NS} AND ${own('pg_namespace', 'n.oid')} ORDER BY n.oid`;

const EXTENSIONS = `SELECT format('CREATE EXTENSION IF NOT EXISTS %I WITH SCHEMA %I', x.extname, n.nspname) AS sql
  FROM pg_catalog.pg_extension x JOIN pg_catalog.pg_namespace n ON n.oid = x.extnamespace WHERE x.extname <> 'plpgsql' ORDER BY x.oid`;

const USER_TYPES = `FROM pg_catalog.pg_type t JOIN pg_catalog.pg_namespace n ON n.oid = t.typnamespace WHERE ${USER_NS} AND ${own('pg_type', 't.oid')}`;

const COLLATION_OF = (coll: string, base: string): string => `(SELECT format('%I.%I', cn.nspname, co.collname) FROM pg_catalog.pg_collation co
  JOIN pg_catalog.pg_namespace cn ON cn.oid = co.collnamespace WHERE co.oid = ${coll} AND ${coll} <> ${base})`;

const ENUMS = `SELECT format('CREATE TYPE %s AS ENUM (%s)', format_type(t.oid, NULL),
  (SELECT string_agg(quote_literal(l.enumlabel), ', ' ORDER BY l.enumsortorder) FROM pg_catalog.pg_enum l WHERE l.enumtypid = t.oid)) AS sql
  ${USER_TYPES} AND t.typtype = 'e' ORDER BY t.oid`;

const DOMAINS = `SELECT format('CREATE DOMAIN %s AS %s', format_type(t.oid, NULL), format_type(t.typbasetype, t.typtypmod))
  || coalesce(' COLLATE ' || ${COLLATION_OF('t.typcollation', '(SELECT b.typcollation FROM pg_catalog.pg_type b WHERE b.oid = t.typbasetype)')}, '')
  || coalesce(' DEFAULT ' || pg_get_expr(t.typdefaultbin, 0), '') || CASE WHEN t.typnotnull THEN ' NOT NULL' ELSE '' END
  || coalesce((SELECT string_agg(format(' CONSTRAINT %I %s', c.conname, pg_get_constraintdef(c.oid)), '' ORDER BY c.conname)
     FROM pg_catalog.pg_constraint c WHERE c.contypid = t.oid AND c.contype = 'c'), '') AS sql
  ${USER_TYPES} AND t.typtype = 'd' ORDER BY t.oid`;

const SEQUENCE_OPTIONS = "format('INCREMENT BY %s MINVALUE %s MAXVALUE %s START WITH %s CACHE %s %s', s.seqincrement, s.seqmin, s.seqmax, s.seqstart, s.seqcache, CASE WHEN s.seqcycle THEN 'CYCLE' ELSE 'NO CYCLE' END)";

/** Sequences of identity columns come with their table (SEQUENCE NAME keeps the name); the rest here. */
const SEQUENCES = `SELECT format('CREATE SEQUENCE %s AS %s ', c.oid::pg_catalog.regclass, format_type(s.seqtypid, NULL)) || ${SEQUENCE_OPTIONS} AS sql,
  (SELECT format('ALTER SEQUENCE %s OWNED BY %s.%I', c.oid::pg_catalog.regclass, d.refobjid::pg_catalog.regclass, a.attname)
     FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_attribute a ON a.attrelid = d.refobjid AND a.attnum = d.refobjsubid
     WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.refclassid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.deptype = 'a') AS owned
  FROM pg_catalog.pg_sequence s JOIN pg_catalog.pg_class c ON c.oid = s.seqrelid
  WHERE c.oid IN (${USER_RELATIONS}) AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_depend d
    WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid = c.oid AND d.deptype = 'i') ORDER BY c.oid`;

const SEQUENCE_NAMES = `SELECT c.oid::pg_catalog.regclass::text AS name FROM pg_catalog.pg_class c WHERE c.relkind = 'S' AND c.oid IN (${USER_RELATIONS}) ORDER BY c.oid`;

const TABLES = `SELECT c.oid::int8::float8 AS oid, c.oid::pg_catalog.regclass::text AS name, c.relpersistence = 'u' AS unlogged,
  coalesce(' WITH (' || array_to_string(c.reloptions, ', ') || ')', '') AS options
  FROM pg_catalog.pg_class c WHERE c.relkind = 'r' AND c.oid IN (${USER_RELATIONS}) ORDER BY c.oid`;

/** late_default: the default calls a function outside pg_catalog, which may not exist until later. */
const COLUMNS = `SELECT a.attrelid::int8::float8 AS "table", quote_ident(a.attname) AS name, format_type(a.atttypid, a.atttypmod) AS type,
  ${COLLATION_OF('a.attcollation', '(SELECT ty.typcollation FROM pg_catalog.pg_type ty WHERE ty.oid = a.atttypid)')} AS collation,
  a.attnotnull AS notnull, a.attidentity::text AS identity, a.attgenerated::text AS generated, pg_get_expr(ad.adbin, ad.adrelid) AS "default",
  (SELECT format('SEQUENCE NAME %s ', d.objid::pg_catalog.regclass) || ${SEQUENCE_OPTIONS} FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_sequence s ON s.seqrelid = d.objid
     WHERE d.classid = 'pg_catalog.pg_class'::pg_catalog.regclass AND d.refobjid = a.attrelid AND d.refobjsubid = a.attnum AND d.deptype = 'i') AS identity_options,
  EXISTS (SELECT 1 FROM pg_catalog.pg_depend d JOIN pg_catalog.pg_proc p ON p.oid = d.refobjid
     WHERE d.classid = 'pg_catalog.pg_attrdef'::pg_catalog.regclass AND d.objid = ad.oid AND d.refclassid = 'pg_catalog.pg_proc'::pg_catalog.regclass
       AND p.pronamespace <> 'pg_catalog'::pg_catalog.regnamespace) AS late_default
  FROM pg_catalog.pg_attribute a LEFT JOIN pg_catalog.pg_attrdef ad ON ad.adrelid = a.attrelid AND ad.adnum = a.attnum
  WHERE a.attrelid = ANY ($1::pg_catalog.oid[]) AND a.attnum > 0 AND NOT a.attisdropped ORDER BY a.attrelid, a.attnum`;

const FUNCTIONS = `SELECT p.oid::pg_catalog.regprocedure::text AS name, pg_get_functiondef(p.oid) AS sql
  FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
  WHERE ${USER_NS} AND ${own('pg_proc', 'p.oid')} AND p.prokind IN ('f', 'p') ORDER BY p.oid`;

/** $2 false: primary key, unique, check, exclusion; true: foreign keys (after the indexes they need). */
const CONSTRAINTS = `SELECT format('ALTER TABLE %s ADD CONSTRAINT %I %s', c.conrelid::pg_catalog.regclass, c.conname, pg_get_constraintdef(c.oid)) AS sql
  FROM pg_catalog.pg_constraint c WHERE c.conrelid = ANY ($1::pg_catalog.oid[]) AND c.contype IN ('p', 'u', 'c', 'x', 'f')
    AND (c.contype = 'f') = $2 ORDER BY c.oid`;

const INDEXES = `SELECT pg_get_indexdef(i.indexrelid) AS sql FROM pg_catalog.pg_index i WHERE i.indrelid = ANY ($1::pg_catalog.oid[])
  AND NOT EXISTS (SELECT 1 FROM pg_catalog.pg_constraint c WHERE c.conindid = i.indexrelid AND c.conrelid = i.indrelid AND c.contype IN ('p', 'u', 'x'))
  ORDER BY i.indexrelid`;

const VIEWS = `SELECT c.oid::pg_catalog.regclass::text AS name,
  format('CREATE VIEW %s%s AS %s', c.oid::pg_catalog.regclass, coalesce(' WITH (' || array_to_string(c.reloptions, ', ') || ')', ''), pg_get_viewdef(c.oid)) AS sql
  FROM pg_catalog.pg_class c WHERE c.relkind = 'v' AND c.oid IN (${USER_RELATIONS}) ORDER BY c.oid`;

const TRIGGERS = `SELECT pg_get_triggerdef(t.oid) || CASE t.tgenabled WHEN 'D' THEN format('; ALTER TABLE %s DISABLE TRIGGER %I', t.tgrelid::pg_catalog.regclass, t.tgname) ELSE '' END AS sql
  FROM pg_catalog.pg_trigger t WHERE NOT t.tgisinternal AND t.tgrelid IN (${USER_RELATIONS}) ORDER BY t.oid`;

const COMMENTS = `SELECT format('COMMENT ON %s IS %L', o.target, d.description) AS sql FROM pg_catalog.pg_description d JOIN (
    SELECT 'pg_catalog.pg_namespace'::pg_catalog.regclass AS cat, n.oid, 0 AS sub, format('SCHEMA %I', n.nspname) AS target
      FROM pg_catalog.pg_namespace n WHERE ${USER_NS} AND ${own('pg_namespace', 'n.oid')}
    UNION ALL SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, c.oid, 0,
      format('%s %s', CASE c.relkind WHEN 'r' THEN 'TABLE' WHEN 'v' THEN 'VIEW' WHEN 'S' THEN 'SEQUENCE' WHEN 'i' THEN 'INDEX' END, c.oid::pg_catalog.regclass)
      FROM pg_catalog.pg_class c WHERE c.relkind IN ('r', 'v', 'S', 'i') AND c.oid IN (${USER_RELATIONS})
    UNION ALL SELECT 'pg_catalog.pg_class'::pg_catalog.regclass, a.attrelid, a.attnum, format('COLUMN %s.%I', a.attrelid::pg_catalog.regclass, a.attname)
      FROM pg_catalog.pg_attribute a WHERE a.attnum > 0 AND NOT a.attisdropped AND a.attrelid IN (${USER_RELATIONS})
    UNION ALL SELECT 'pg_catalog.pg_type'::pg_catalog.regclass, t.oid, 0, format('%s %s', CASE t.typtype WHEN 'd' THEN 'DOMAIN' ELSE 'TYPE' END, format_type(t.oid, NULL))
      ${USER_TYPES} AND t.typtype IN ('e', 'd')
    UNION ALL SELECT 'pg_catalog.pg_proc'::pg_catalog.regclass, p.oid, 0, format('%s %s', CASE p.prokind WHEN 'p' THEN 'PROCEDURE' ELSE 'FUNCTION' END, p.oid::pg_catalog.regprocedure)
      FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace WHERE ${USER_NS} AND ${own('pg_proc', 'p.oid')}
    UNION ALL SELECT 'pg_catalog.pg_constraint'::pg_catalog.regclass, c.oid, 0,
      format('CONSTRAINT %I ON %s', c.conname, CASE WHEN c.contypid <> 0 THEN 'DOMAIN ' || format_type(c.contypid, NULL) ELSE c.conrelid::pg_catalog.regclass::text END)
      FROM pg_catalog.pg_constraint c JOIN pg_catalog.pg_namespace n ON n.oid = c.connamespace WHERE ${USER_NS} AND c.contype IN ('p', 'u', 'c', 'x', 'f')
    UNION ALL SELECT 'pg_catalog.pg_trigger'::pg_catalog.regclass, t.oid, 0, format('TRIGGER %I ON %s', t.tgname, t.tgrelid::pg_catalog.regclass)
      FROM pg_catalog.pg_trigger t WHERE NOT t.tgisinternal AND t.tgrelid IN (${USER_RELATIONS})
  ) o ON o.cat = d.classoid AND o.oid = d.objoid AND o.sub = d.objsubid ORDER BY d.classoid, d.objoid, d.objsubid`;

/** Kinds of object the copy does not carry, with how many the source has. */
const UNSUPPORTED = `SELECT kind, count(*)::int AS n FROM (
    SELECT CASE c.relkind WHEN 'p' THEN 'partitioned tables' WHEN 'm' THEN 'materialized views' WHEN 'f' THEN 'foreign tables' WHEN 'c' THEN 'composite types' END AS kind
      FROM pg_catalog.pg_class c WHERE c.relkind IN ('p', 'm', 'f', 'c') AND c.oid IN (${USER_RELATIONS})
    UNION ALL SELECT 'partitions' FROM pg_catalog.pg_class c WHERE c.relispartition AND c.oid IN (${USER_RELATIONS})
    UNION ALL SELECT 'inherited tables' FROM pg_catalog.pg_inherits i WHERE i.inhrelid IN (${USER_RELATIONS})
    UNION ALL SELECT 'row-level security policies' FROM pg_catalog.pg_policy
    UNION ALL SELECT 'rules' FROM pg_catalog.pg_rewrite r WHERE r.rulename <> '_RETURN' AND r.ev_class IN (${USER_RELATIONS})
    UNION ALL SELECT 'aggregates and window functions' FROM pg_catalog.pg_proc p JOIN pg_catalog.pg_namespace n ON n.oid = p.pronamespace
      WHERE ${USER_NS} AND ${own('pg_proc', 'p.oid')} AND p.prokind IN ('a', 'w')
    UNION ALL SELECT 'base and range types' ${USER_TYPES} AND (t.typtype IN ('r', 'm') OR (t.typtype = 'b' AND t.typcategory <> 'A'))
    UNION ALL SELECT 'collations' FROM pg_catalog.pg_collation o JOIN pg_catalog.pg_namespace n ON n.oid = o.collnamespace WHERE ${USER_NS} AND ${own('pg_collation', 'o.oid')}
    UNION ALL SELECT 'operators' FROM pg_catalog.pg_operator o JOIN pg_catalog.pg_namespace n ON n.oid = o.oprnamespace WHERE ${USER_NS} AND ${own('pg_operator', 'o.oid')}
    UNION ALL SELECT 'text search configurations' FROM pg_catalog.pg_ts_config o JOIN pg_catalog.pg_namespace n ON n.oid = o.cfgnamespace WHERE ${USER_NS} AND ${own('pg_ts_config', 'o.oid')}
    UNION ALL SELECT 'extended statistics' FROM pg_catalog.pg_statistic_ext o JOIN pg_catalog.pg_namespace n ON n.oid = o.stxnamespace WHERE ${USER_NS}
    UNION ALL SELECT 'casts' FROM pg_catalog.pg_cast o WHERE o.oid >= 16384 AND ${own('pg_cast', 'o.oid')}
    UNION ALL SELECT 'large objects' FROM pg_catalog.pg_largeobject_metadata
  ) k GROUP BY kind ORDER BY kind`;
