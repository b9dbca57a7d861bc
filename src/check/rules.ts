// The compatibility rules: facts about a source (source-facts.ts) against what the runtime offers
// (runtime-facts.ts) give a verdict, reasons and warnings. A reason means the source cannot move to a
// PGX runtime as it is: something would fail to restore, or would not work once restored. A warning is
// a difference worth knowing that does not stop it. docs/compatibility.md explains each rule.

import { existsSync } from 'node:fs';
import { setting, type RuntimeFacts } from './runtime-facts.js';
import { majorOf, type SourceFacts } from './source-facts.js';

export type CompatibilityVerdict = 'compatible' | 'needs standard PostgreSQL';

export type ReasonCode =
  | 'server_too_new'
  | 'server_too_old'
  | 'extension_unavailable'
  | 'untrusted_language'
  | 'c_library_missing'
  | 'publication'
  | 'subscription'
  | 'replication_slot'
  | 'event_trigger'
  | 'tablespace'
  | 'icu_collation';

export type WarningCode =
  | 'major_upgrade'
  | 'version_unknown'
  | 'dump_newer'
  | 'c_function'
  | 'extension_superuser'
  | 'preload_library'
  | 'foreign_data_wrapper'
  | 'foreign_server'
  | 'encoding'
  | 'locale'
  | 'libc_collation'
  | 'roles'
  | 'policy_roles'
  | 'large_objects'
  | 'database_size'
  | 'prepared_transactions'
  | 'unreadable';

export interface Finding<C extends string = ReasonCode | WarningCode> {
  code: C;
  message: string;
  /** The source's objects it is about (extension, function, publication names ...). */
  objects: string[];
  hint: string | null;
}

export interface CheckReport {
  verdict: CompatibilityVerdict;
  compatible: boolean;
  source: {
    kind: SourceFacts['kind'];
    /** The URL without its password, or the dump file. */
    source: string;
    database: string | null;
    server_version: string | null;
    dump_version: string | null;
  };
  runtime: { postgres_version: string; bin_dir: string; extensions_available: number };
  reasons: Finding<ReasonCode>[];
  warnings: Finding<WarningCode>[];
}

/** A source at least this large gets a warning: every mint copies it unless the storage clones. */
const LARGE_DATABASE_BYTES = 1024 ** 3;

/** Extensions that work only when their library is loaded at server start. */
const PRELOAD_EXTENSIONS = new Set(['pg_stat_statements']);

/** The oldest server pg_dump 18 dumps. */
const OLDEST_DUMPABLE = 90200;

export function evaluate(f: SourceFacts, rt: RuntimeFacts): CheckReport {
  const reasons: Finding<ReasonCode>[] = [];
  const warnings: Finding<WarningCode>[] = [];
  const reason = (code: ReasonCode, message: string, objects: string[], hint: string | null = null): void => void reasons.push({ code, message, objects, hint });
  const warn = (code: WarningCode, message: string, objects: string[], hint: string | null = null): void => void warnings.push({ code, message, objects, hint });
  const pg = `PostgreSQL ${rt.version}`;

  // --- Versions ---------------------------------------------------------------------------------
  if (f.serverVersionNum !== null) {
    const major = majorOf(f.serverVersionNum);
    if (major > rt.major) {
      reason('server_too_new', `the source runs PostgreSQL ${f.serverVersion}, newer than the runtime's ${pg}`, [], `pg_dump ${rt.major} cannot dump a newer server, and its schema may use what ${rt.major} lacks; stay on PostgreSQL ${major} or newer.`);
    } else if (f.serverVersionNum < OLDEST_DUMPABLE) {
      reason('server_too_old', `the source runs PostgreSQL ${f.serverVersion}; pg_dump ${rt.major} dumps servers from 9.2 on`, [], 'Upgrade the source first (pg_upgrade), then check again.');
    } else if (major < rt.major) {
      warn('major_upgrade', `the source runs PostgreSQL ${f.serverVersion} and the runtime ${pg}: the changes of every major version in between apply`, [], `Read the migration notes of each release after ${major} (https://www.postgresql.org/docs/release/).`);
    }
  } else if (f.kind === 'dump') {
    warn('version_unknown', 'the dump does not say which PostgreSQL it came from (no "Dumped from database version" line)', [], 'Make it with pg_dump -s, which writes that header.');
  }
  if (f.dumpVersion !== null) {
    const num = Number(/^\d+/.exec(f.dumpVersion)?.[0] ?? 0);
    if (num > rt.major) warn('dump_newer', `the dump was made by pg_dump ${f.dumpVersion}, newer than the runtime's ${pg}: its SQL may use syntax ${rt.major} does not know`, [], `Dump again with pg_dump ${rt.major}.`);
  }

  // --- Extensions and languages ---------------------------------------------------------------------
  const superuserOnly: string[] = [];
  for (const name of f.extensions) {
    const ext = rt.extensions.get(name);
    if (!ext) {
      reason('extension_unavailable', `extension ${name} is not shipped with the runtime's ${pg}`, [name], `If it is unused, drop it from the source (DROP EXTENSION ${name}); else it needs a PostgreSQL that has it.`);
    } else if (ext.unavailable !== null) {
      reason('extension_unavailable', `extension ${name} cannot be created in the runtime: ${ext.unavailable}`, [name], `If it is unused, drop it from the source (DROP EXTENSION ${name}); else it needs a PostgreSQL that can load it.`);
    } else if (ext.needsSuperuser && name !== 'plpgsql' && !isUntrusted(f, name)) superuserOnly.push(name);
  }
  if (superuserOnly.length > 0) {
    warn('extension_superuser', `${plural(superuserOnly, 'extension')} ${list(superuserOnly)} ${superuserOnly.length === 1 ? 'needs' : 'need'} a superuser to create: an import whose --owner is not one fails on ${superuserOnly.length === 1 ? 'it' : 'them'}`, superuserOnly, `Import with the default owner postgres, or create ${them(superuserOnly)} in the template first.`);
  }

  const preload = setting(rt, 'shared_preload_libraries').split(',').map((s) => s.trim()).filter(Boolean);
  const wanted = [...new Set([...(f.preloadLibraries ?? []), ...f.extensions.filter((e) => PRELOAD_EXTENSIONS.has(e))])].filter((l) => !preload.includes(l));
  if (wanted.length > 0) {
    const absent = wanted.filter((l) => !rt.libraries.has(l));
    warn(
      'preload_library',
      `${list(wanted)} ${wanted.length === 1 ? 'needs' : 'need'} loading at server start (shared_preload_libraries, as on the source); the runtime loads ${preload.length > 0 ? preload.join(', ') : 'none'}` +
        (absent.length > 0 ? `, and ${list(absent)} ${absent.length === 1 ? 'is' : 'are'} not in its $libdir` : ''),
      wanted,
      `Start the runtime with -c shared_preload_libraries=${wanted.filter((l) => rt.libraries.has(l)).join(',') || '...'} for what it has.`,
    );
  }

  for (const lang of f.languages) {
    if (lang.trusted !== false) continue;
    const fns = lang.functions.length > 0 ? ` (${lang.functions.length} ${lang.functions.length === 1 ? 'function' : 'functions'}: ${list(lang.functions)})` : '';
    reason(
      'untrusted_language',
      `untrusted language ${lang.name}${fns}: its code runs unchecked as the operating-system user that owns every database of the runtime, and only a superuser may create it; PGX gives tenants no superuser`,
      [lang.name, ...lang.functions],
      'Rewrite the functions in a trusted language (plpgsql, sql), or keep this database on standard PostgreSQL.',
    );
  }

  const byLibrary = new Map<string, string[]>();
  for (const fn of f.cFunctions) byLibrary.set(fn.library, [...(byLibrary.get(fn.library) ?? []), fn.name]);
  for (const [library, fns] of byLibrary) {
    const what = `${plural(fns, 'C function')} ${list(fns)} ${fns.length === 1 ? 'loads' : 'load'} ${library || 'a library'}`;
    if (libraryPresent(library, rt)) {
      warn('c_function', `${what}, which the runtime has; creating a C function needs a superuser`, fns, `Import with the default owner postgres; tenants cannot create or replace ${them(fns)}.`);
    } else {
      reason('c_library_missing', `${what}, which the runtime's ${pg} does not have (${rt.libDir})`, fns, 'A C library must be built for PostgreSQL 18 and installed in $libdir; a PGX runtime ships only its own. Package it as an extension on standard PostgreSQL.');
    }
  }

  // --- Replication: the profile turns it off --------------------------------------------------------
  const walLevel = setting(rt, 'wal_level');
  if (f.publications.length > 0 && walLevel !== 'logical') {
    reason('publication', `${plural(f.publications, 'publication')} ${list(f.publications)}: nothing can subscribe to a runtime database, its profile sets wal_level = ${walLevel} (logical replication needs logical)`, f.publications, `Drop ${them(f.publications)} from the source if nothing subscribes, or keep this database on standard PostgreSQL.`);
  }
  const workers = Number(setting(rt, 'max_logical_replication_workers'));
  if (f.subscriptions.length > 0 && workers === 0) {
    reason('subscription', `${plural(f.subscriptions, 'subscription')} ${list(f.subscriptions)}: the runtime profile sets max_logical_replication_workers = 0, so none would ever apply changes`, f.subscriptions, `Drop ${them(f.subscriptions)} from the source, or keep this database on standard PostgreSQL.`);
  }
  if (f.replicationSlots.length > 0 && walLevel !== 'logical') {
    reason('replication_slot', `logical replication ${plural(f.replicationSlots, 'slot')} ${list(f.replicationSlots)} on the source: something reads its changes (change data capture), which needs wal_level = logical; the runtime profile sets ${walLevel}`, f.replicationSlots, 'Keep this database on standard PostgreSQL, or drop unused slots (pg_drop_replication_slot).');
  }

  // --- Superuser-only objects and the cluster's layout --------------------------------------------------
  if (f.eventTriggers.length > 0) {
    reason('event_trigger', `${plural(f.eventTriggers, 'event trigger')} ${list(f.eventTriggers)}: only a superuser may create, change or drop one, and the roles PGX hands to tenants are not superusers, so migrations that manage them fail`, f.eventTriggers, `Drop ${them(f.eventTriggers)} from the source, or keep this database on standard PostgreSQL.`);
  }
  if (f.tablespaces.length > 0) {
    reason('tablespace', `objects in ${plural(f.tablespaces, 'tablespace')} ${list(f.tablespaces)}: the runtime keeps every database in its data directory (pg_default), and restoring stops at SET default_tablespace = ${f.tablespaces[0]}`, f.tablespaces, 'Move them to pg_default first (ALTER TABLE|INDEX ... SET TABLESPACE pg_default), or dump with pg_dump --no-tablespaces.');
  }
  if (f.foreignDataWrappers.length > 0) {
    warn('foreign_data_wrapper', `${plural(f.foreignDataWrappers, 'foreign-data wrapper')} ${list(f.foreignDataWrappers)} ${f.foreignDataWrappers.length === 1 ? 'comes' : 'come'} from no extension: creating one needs a superuser`, f.foreignDataWrappers, 'Import with the default owner postgres.');
  }
  if (f.foreignServers.length > 0) {
    const names = f.foreignServers.map((s) => `${s.name} (${s.wrapper})`);
    warn('foreign_server', `${plural(names, 'foreign server')} ${list(names)}: their foreign tables connect out from the runtime, and user mappings (passwords included) are copied into every database minted from the template`, f.foreignServers.map((s) => s.name), 'Make sure the runtime reaches those hosts, or drop the servers in the --mask script.');
  }

  // --- Text: encoding, locale, collations --------------------------------------------------------------
  if (f.encoding !== null && f.encoding !== 'UTF8') {
    if (f.encoding === 'SQL_ASCII') {
      warn('encoding', 'the source is SQL_ASCII (bytes, no encoding); runtime databases are UTF8, and restoring stops at the first value that is not valid UTF-8', [], "Find such values first (e.g. WHERE col <> convert_from(convert_to(col, 'UTF8'), 'UTF8') fails on them), or convert the source.");
    } else {
      warn('encoding', `the source is encoded ${f.encoding}; runtime databases are UTF8: text is converted on restore, and lengths in bytes (octet_length, bytea casts) change for non-ASCII characters`, [], null);
    }
  }
  const nonC = (l: string | null): boolean => l !== null && !/^(C|POSIX|C\.UTF-?8)$/i.test(l);
  if (nonC(f.collate) || nonC(f.ctype) || f.localeProvider === 'icu') {
    warn('locale', `the source's default locale is ${f.collate ?? f.ctype}${f.localeProvider === 'icu' ? ' (ICU)' : ''}; runtime databases use the C locale, so ORDER BY on text follows byte order and upper()/lower() leave non-ASCII letters alone`, [], 'Where order matters, give the column or query a collation (COLLATE "und-x-icu", or CREATE COLLATION with provider = icu).');
  }
  const icu = f.collations.filter((c) => c.provider === 'icu');
  if (icu.length > 0 && rt.icu === false) {
    reason('icu_collation', `ICU ${plural(icu, 'collation')} ${list(icu.map((c) => c.name))}: the runtime's ${pg} was built without ICU`, icu.map((c) => c.name), 'Use a PostgreSQL built with ICU (--pg-bin), or libc collations.');
  }
  const libc = f.collations.filter((c) => c.provider === 'libc' && nonC(c.locale));
  if (libc.length > 0) {
    warn('libc_collation', `${plural(libc, 'collation')} ${list(libc.map((c) => c.name))} use operating-system locales (${list([...new Set(libc.map((c) => c.locale!))])}): restoring fails where the runtime's machine lacks them`, libc.map((c) => c.name), `Check locale -a where the runtime runs${rt.icu !== false ? ', or switch to ICU collations (provider = icu), which the runtime has' : ''}.`);
  }

  // --- Roles, data, settings -----------------------------------------------------------------------------
  if (f.roles.length > 0) {
    warn('roles', `objects are owned by or granted to ${plural(f.roles, 'role')} ${list(f.roles)}: pgx template import drops owners and grants (--no-owner --no-privileges), so the template's owner owns everything`, f.roles, 'Grant what those roles need in the --mask script, or create them in the runtime (users in pgx start --config).');
  }
  if (f.policyRoles.length > 0) {
    warn('policy_roles', `row-level security policies name ${plural(f.policyRoles, 'role')} ${list(f.policyRoles)}, which a new runtime does not have: restoring fails until they exist`, f.policyRoles, 'Create them in the runtime first (users in pgx start --config, or CREATE ROLE ... NOLOGIN).');
  }
  if (f.largeObjects !== null && f.largeObjects > 0) {
    warn('large_objects', `${f.largeObjects} large ${f.largeObjects === 1 ? 'object: pgx template import copies it' : 'objects: pgx template import copies them'}, but masking rules (-- pgx:forbid) check table columns only`, [], 'Overwrite personal data in large objects in the --mask script (lo_put, lo_unlink).');
  }
  if (f.databaseBytes !== null && f.databaseBytes >= LARGE_DATABASE_BYTES) {
    warn('database_size', `the source database is ${(f.databaseBytes / 1024 ** 3).toFixed(1)} GB: every database minted from it is a full copy unless the data directory clones`, [], 'Check with pgx doctor; see docs/storage.md for XFS, btrfs or ZFS.');
  }
  const prepared = Number(setting(rt, 'max_prepared_transactions'));
  if (f.maxPreparedTransactions !== null && f.maxPreparedTransactions > 0 && prepared === 0) {
    warn('prepared_transactions', `the source allows prepared transactions (max_prepared_transactions = ${f.maxPreparedTransactions}); the runtime has 0, so PREPARE TRANSACTION fails`, [], `Start the runtime with -c max_prepared_transactions=${f.maxPreparedTransactions} if the application uses two-phase commit.`);
  }
  if (f.unreadable.length > 0) {
    warn('unreadable', `could not read ${list(f.unreadable)} as this user: the answer may miss what ${f.unreadable.length === 1 ? 'it holds' : 'they hold'}`, f.unreadable, 'Check as a superuser for a complete answer.');
  }

  const compatible = reasons.length === 0;
  return {
    verdict: compatible ? 'compatible' : 'needs standard PostgreSQL',
    compatible,
    source: { kind: f.kind, source: f.source, database: f.database, server_version: f.serverVersion, dump_version: f.dumpVersion },
    runtime: { postgres_version: rt.version, bin_dir: rt.binDir, extensions_available: [...rt.extensions.values()].filter((e) => e.unavailable === null).length },
    reasons,
    warnings,
  };
}

function isUntrusted(f: SourceFacts, name: string): boolean {
  return f.languages.some((l) => l.name === name && l.trusted === false);
}

/**
 * Whether PostgreSQL in the runtime would find a C function's library: `$libdir/x` and bare names are
 * looked up in $libdir (dynamic_library_path), absolute paths on this machine.
 */
function libraryPresent(library: string, rt: RuntimeFacts): boolean {
  if (library === '') return false;
  if (library.startsWith('/')) return existsSync(library) || existsSync(`${library}.so`);
  const name = library.replace(/^\$libdir\//, '').replace(/\.so$/, '');
  return !name.includes('/') && rt.libraries.has(name);
}

/** Up to five names, then "and N more". */
function list(names: string[], max = 5): string {
  if (names.length <= max) return names.join(', ');
  return `${names.slice(0, max).join(', ')} and ${names.length - max} more`;
}

function them(items: unknown[]): string {
  return items.length === 1 ? 'it' : 'them';
}

function plural(items: unknown[], word: string): string {
  return items.length === 1 ? word : `${word}s`;
}
