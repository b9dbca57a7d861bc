// Facts about a live source database (`pgx check --from URL`), read from its catalogs over one
// node-postgres connection. Read-only: every query is a SELECT in a READ ONLY session. Catalogs a
// non-superuser may not read are noted as unreadable instead of failing the check. Queries avoid
// catalogs and columns newer than the source (publications from 10, datlocprovider from 15, ...).

import pg from 'pg';
import { PgxError } from '../errors.js';
import type { PostgresUrl } from '../postgres-url.js';
import { emptyFacts, isBuiltinRole, type CollationProvider, type SourceFacts } from './source-facts.js';

/** Schemas PostgreSQL makes itself; objects elsewhere are the user's. */
const USER_NAMESPACES = `(SELECT oid FROM pg_catalog.pg_namespace WHERE nspname NOT IN ('pg_catalog', 'information_schema') AND nspname NOT LIKE 'pg\\_toast%' AND nspname NOT LIKE 'pg\\_temp\\_%')`;

/** A function as pg_dump names it: schema.name(identity arguments). */
const FUNCTION_NAME = `(SELECT nspname FROM pg_catalog.pg_namespace WHERE oid = p.pronamespace) || '.' || p.proname || '(' || pg_catalog.pg_get_function_identity_arguments(p.oid) || ')'`;

/** An object of catalog `cls` that belongs to an extension (it comes with CREATE EXTENSION). */
const fromExtension = (cls: string, oid: string): string =>
  `EXISTS (SELECT 1 FROM pg_catalog.pg_depend d WHERE d.classid = 'pg_catalog.${cls}'::pg_catalog.regclass AND d.objid = ${oid} AND d.deptype = 'e')`;

export async function readDatabaseFacts(source: PostgresUrl, opts: { connectTimeoutSeconds: number }): Promise<SourceFacts> {
  const connectMs = opts.connectTimeoutSeconds * 1000;
  const client = new pg.Client({ connectionString: source.url, application_name: 'pgx-check', connectionTimeoutMillis: connectMs, statement_timeout: 60_000 });
  // An error after connect (the server went away) must not crash the process: the query fails instead.
  client.on('error', () => undefined);
  const connected = await connectWithin(client, connectMs);
  if (connected !== 'connected') {
    await client.end().catch(() => undefined);
    throw connectError(source, connected, opts.connectTimeoutSeconds);
  }
  try {
    await client.query('SET default_transaction_read_only = on');
    return await collect(client, source.display);
  } catch (err) {
    if (err instanceof PgxError) throw err;
    throw new PgxError('INVALID_PARAMETER', `reading the catalogs of ${source.display} failed: ${(err as Error).message}`, {
      hint: 'Connect as a superuser or the database owner; pgx check only reads catalogs.',
      cause: err,
    });
  } finally {
    await client.end().catch(() => undefined);
  }
}

async function collect(client: pg.Client, display: string): Promise<SourceFacts> {
  const facts = emptyFacts('database', display);
  const rows = async <T extends pg.QueryResultRow>(sql: string): Promise<T[]> => (await client.query<T>(sql)).rows;
  /** A query a non-superuser may be refused: noted as unreadable, the check goes on. */
  const maybe = async <T extends pg.QueryResultRow>(what: string, sql: string): Promise<T[]> => {
    try {
      return await rows<T>(sql);
    } catch (err) {
      if ((err as { code?: string }).code !== '42501') throw err;
      facts.unreadable.push(what);
      return [];
    }
  };

  const [base] = await rows<{ num: string; version: string; db: string; encoding: string; collate: string; ctype: string }>(
    `SELECT current_setting('server_version_num') AS num, current_setting('server_version') AS version, d.datname AS db, ` +
      `pg_catalog.pg_encoding_to_char(d.encoding) AS encoding, d.datcollate AS collate, d.datctype AS ctype ` +
      `FROM pg_catalog.pg_database d WHERE d.datname = pg_catalog.current_database()`,
  );
  const v = Number(base!.num);
  Object.assign(facts, {
    serverVersionNum: v,
    serverVersion: base!.version.split(' ')[0]!,
    database: base!.db,
    encoding: base!.encoding,
    collate: base!.collate,
    ctype: base!.ctype,
    localeProvider: 'libc',
  });
  if (v >= 150000) {
    const [p] = await rows<{ p: string }>(`SELECT datlocprovider AS p FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()`);
    facts.localeProvider = provider(p!.p);
  }
  const [size] = await maybe<{ bytes: string }>('the database size', `SELECT pg_catalog.pg_database_size(pg_catalog.current_database()) AS bytes`);
  facts.databaseBytes = size ? Number(size.bytes) : null;

  facts.extensions = (await rows<{ n: string }>(`SELECT extname AS n FROM pg_catalog.pg_extension ORDER BY 1`)).map((r) => r.n);

  const langs = await rows<{ name: string; trusted: boolean; fn: string | null }>(
    `SELECT l.lanname AS name, l.lanpltrusted AS trusted, ${FUNCTION_NAME} AS fn ` +
      `FROM pg_catalog.pg_language l LEFT JOIN pg_catalog.pg_proc p ON p.prolang = l.oid AND p.pronamespace IN ${USER_NAMESPACES} AND NOT ${fromExtension('pg_proc', 'p.oid')} ` +
      `WHERE l.lanname NOT IN ('sql', 'c', 'internal') AND (l.lanispl OR p.oid IS NOT NULL) ORDER BY 1, 3`,
  );
  for (const r of langs) {
    let lang = facts.languages.find((l) => l.name === r.name);
    if (!lang) facts.languages.push((lang = { name: r.name, trusted: r.trusted, functions: [] }));
    if (r.fn !== null) lang.functions.push(r.fn);
  }

  facts.cFunctions = (
    await rows<{ name: string; library: string }>(
      `SELECT ${FUNCTION_NAME} AS name, p.probin AS library FROM pg_catalog.pg_proc p ` +
        `JOIN pg_catalog.pg_language l ON l.oid = p.prolang ` +
        `WHERE l.lanname = 'c' AND p.pronamespace IN ${USER_NAMESPACES} AND NOT ${fromExtension('pg_proc', 'p.oid')} ORDER BY 1`,
    )
  ).map((r) => ({ name: r.name, library: r.library }));

  if (v >= 100000) {
    facts.publications = (await rows<{ n: string }>(`SELECT pubname AS n FROM pg_catalog.pg_publication ORDER BY 1`)).map((r) => r.n);
    facts.subscriptions = (
      await maybe<{ n: string }>(
        'pg_subscription',
        `SELECT subname AS n FROM pg_catalog.pg_subscription WHERE subdbid = (SELECT oid FROM pg_catalog.pg_database WHERE datname = pg_catalog.current_database()) ORDER BY 1`,
      )
    ).map((r) => r.n);
  }
  if (v >= 90400) {
    facts.replicationSlots = (
      await maybe<{ n: string }>('pg_replication_slots', `SELECT slot_name AS n FROM pg_catalog.pg_replication_slots WHERE slot_type = 'logical' AND database = pg_catalog.current_database() ORDER BY 1`)
    ).map((r) => r.n);
  }
  if (v >= 90300) {
    facts.eventTriggers = (await rows<{ n: string }>(`SELECT evtname AS n FROM pg_catalog.pg_event_trigger e WHERE NOT ${fromExtension('pg_event_trigger', 'e.oid')} ORDER BY 1`)).map((r) => r.n);
  }
  facts.foreignDataWrappers = (
    await rows<{ n: string }>(`SELECT fdwname AS n FROM pg_catalog.pg_foreign_data_wrapper w WHERE NOT ${fromExtension('pg_foreign_data_wrapper', 'w.oid')} ORDER BY 1`)
  ).map((r) => r.n);
  facts.foreignServers = await rows<{ name: string; wrapper: string }>(
    `SELECT s.srvname AS name, w.fdwname AS wrapper FROM pg_catalog.pg_foreign_server s JOIN pg_catalog.pg_foreign_data_wrapper w ON w.oid = s.srvfdw ORDER BY 1`,
  );
  facts.tablespaces = (
    await rows<{ n: string }>(
      `SELECT DISTINCT t.spcname AS n FROM pg_catalog.pg_class c JOIN pg_catalog.pg_tablespace t ON t.oid = c.reltablespace ` +
        `WHERE t.spcname NOT IN ('pg_default', 'pg_global') ORDER BY 1`,
    )
  ).map((r) => r.n);
  const [lo] = await maybe<{ n: string }>('pg_largeobject_metadata', `SELECT count(*) AS n FROM pg_catalog.pg_largeobject_metadata`);
  facts.largeObjects = lo ? Number(lo.n) : null;

  facts.roles = (
    await rows<{ n: string }>(
      `SELECT rolname AS n FROM pg_catalog.pg_roles WHERE oid IN (` +
        `SELECT relowner FROM pg_catalog.pg_class WHERE relnamespace IN ${USER_NAMESPACES} ` +
        `UNION SELECT proowner FROM pg_catalog.pg_proc WHERE pronamespace IN ${USER_NAMESPACES} ` +
        `UNION SELECT nspowner FROM pg_catalog.pg_namespace WHERE oid IN ${USER_NAMESPACES} ` +
        `UNION SELECT typowner FROM pg_catalog.pg_type WHERE typnamespace IN ${USER_NAMESPACES} ` +
        `UNION SELECT (pg_catalog.aclexplode(relacl)).grantee FROM pg_catalog.pg_class WHERE relacl IS NOT NULL AND relnamespace IN ${USER_NAMESPACES} ` +
        `UNION SELECT (pg_catalog.aclexplode(nspacl)).grantee FROM pg_catalog.pg_namespace WHERE nspacl IS NOT NULL AND oid IN ${USER_NAMESPACES}) ORDER BY 1`,
    )
  )
    .map((r) => r.n)
    .filter((n) => !isBuiltinRole(n));
  if (v >= 90500) {
    facts.policyRoles = (
      await rows<{ n: string }>(`SELECT DISTINCT r.rolname AS n FROM pg_catalog.pg_policy p CROSS JOIN LATERAL unnest(p.polroles) AS u(oid) JOIN pg_catalog.pg_roles r ON r.oid = u.oid ORDER BY 1`)
    )
      .map((r) => r.n)
      .filter((n) => !isBuiltinRole(n));
  }

  // collprovider is 10+, the ICU locale column 15+ (renamed colllocale in 17).
  const collations = await rows<{ name: string; provider: string; locale: string | null }>(
    `SELECT (SELECT nspname FROM pg_catalog.pg_namespace WHERE oid = c.collnamespace) || '.' || c.collname AS name, ${v >= 100000 ? 'c.collprovider' : `'c'`} AS provider, ` +
      `${v >= 170000 ? 'coalesce(c.colllocale, c.collcollate)' : v >= 150000 ? 'coalesce(c.colliculocale, c.collcollate)' : 'c.collcollate'} AS locale ` +
      `FROM pg_catalog.pg_collation c WHERE c.collname NOT IN ('default', 'C', 'POSIX', 'ucs_basic') AND (c.collnamespace IN ${USER_NAMESPACES} ` +
      `OR c.oid IN (SELECT a.attcollation FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class k ON k.oid = a.attrelid ` +
      `WHERE k.relnamespace IN ${USER_NAMESPACES} AND a.attnum > 0 AND NOT a.attisdropped)) ORDER BY 1`,
  );
  facts.collations = collations.map((c) => ({ name: c.name, provider: provider(c.provider), locale: c.locale }));

  // shared_preload_libraries is for superusers and pg_read_all_settings only.
  const [preload] = await maybe<{ v: string }>('shared_preload_libraries', `SELECT current_setting('shared_preload_libraries') AS v`);
  facts.preloadLibraries =
    preload === undefined
      ? null
      : preload.v
          .split(',')
          .map((x) => x.trim().replace(/^"(.*)"$/, '$1'))
          .filter(Boolean);
  const [prepared] = await rows<{ v: string }>(`SELECT current_setting('max_prepared_transactions') AS v`);
  facts.maxPreparedTransactions = Number(prepared!.v);
  return facts;
}

function provider(code: string): CollationProvider {
  return code === 'i' ? 'icu' : code === 'b' ? 'builtin' : code === 'd' ? 'default' : 'libc';
}

/**
 * client.connect(), or 'timeout' when it ran past `ms`: told by this timer, not by the text of the error
 * node-postgres raises when its own timer (connectionTimeoutMillis, the same `ms`) ends the attempt.
 * This one is started first, so it fires first.
 */
async function connectWithin(client: pg.Client, ms: number): Promise<'connected' | 'timeout' | { failed: unknown }> {
  let timedOut = false;
  const timer = setTimeout(() => {
    timedOut = true;
  }, ms);
  try {
    await client.connect();
    return 'connected';
  } catch (err) {
    return timedOut ? 'timeout' : { failed: err };
  } finally {
    clearTimeout(timer);
  }
}

/** A failed connect as one line naming the source and the cause, with what to check. */
function connectError(source: PostgresUrl, outcome: 'timeout' | { failed: unknown }, timeoutSeconds: number): PgxError {
  const hint = 'Check the host, port and database in --from, and that the server accepts connections from this machine.';
  if (outcome === 'timeout') {
    return new PgxError('INVALID_PARAMETER', `cannot connect to ${source.display}: no answer within ${timeoutSeconds} s`, { hint: `${hint} --connect-timeout S waits longer.` });
  }
  const err = outcome.failed;
  const e = err as { code?: string; message?: string };
  switch (e.code) {
    case 'ECONNREFUSED':
      return new PgxError('INVALID_PARAMETER', `cannot connect to ${source.display}: connection refused`, { hint: `${hint} Nothing listens there now.`, cause: err });
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return new PgxError('INVALID_PARAMETER', `cannot connect to ${source.display}: unknown host`, { hint, cause: err });
    case '28P01':
    case '28000':
      return new PgxError('INVALID_PARAMETER', `cannot connect to ${source.display}: ${e.message}`, {
        hint: 'Check the user and password in --from (percent-encode special characters in the password).',
        cause: err,
      });
    case '3D000':
      return new PgxError('INVALID_PARAMETER', `cannot connect to ${source.display}: ${e.message}`, { hint: 'Name an existing database in --from.', cause: err });
    default:
      return new PgxError('INVALID_PARAMETER', `cannot connect to ${source.display}: ${e.message ?? String(err)}`, { hint, cause: err });
  }
}
