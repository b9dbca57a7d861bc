// What `pgx check` knows about a source database, whichever way it was read: from the live database
// (database-facts.ts) or from a schema-only dump (dump-facts.ts). The rules (rules.ts) read only this,
// so both inputs are judged alike. null means "not known from this input" (a dump has no size).

export type CollationProvider = 'libc' | 'icu' | 'builtin' | 'default';

export interface SourceFacts {
  kind: 'database' | 'dump';
  /** The URL without its password, or the dump file's path. */
  source: string;
  database: string | null;
  /** server_version_num, e.g. 150020. */
  serverVersionNum: number | null;
  /** As the server reports it, e.g. "15.20". */
  serverVersion: string | null;
  /** The pg_dump that made a dump file ("Dumped by pg_dump version"). */
  dumpVersion: string | null;
  encoding: string | null;
  /** The database's default collation and character classification (LC_COLLATE, LC_CTYPE). */
  collate: string | null;
  ctype: string | null;
  localeProvider: CollationProvider | null;
  databaseBytes: number | null;
  /** Installed extensions (plpgsql included). */
  extensions: string[];
  /** Procedural languages installed or used by functions outside extensions (not sql, c, internal). */
  languages: { name: string; trusted: boolean | null; functions: string[] }[];
  /** Functions in LANGUAGE c outside extensions, with the library they load. */
  cFunctions: { name: string; library: string }[];
  publications: string[];
  subscriptions: string[];
  /** Logical replication slots on the source database. */
  replicationSlots: string[];
  /** Event triggers outside extensions. */
  eventTriggers: string[];
  /** Foreign-data wrappers outside extensions. */
  foreignDataWrappers: string[];
  foreignServers: { name: string; wrapper: string }[];
  /** Tablespaces other than pg_default and pg_global that objects live in. */
  tablespaces: string[];
  largeObjects: number | null;
  /** Roles that own objects or hold grants, other than postgres and the pg_ built-ins. */
  roles: string[];
  /** Roles named by row-level security policies (TO ...), other than PUBLIC and the pg_ built-ins. */
  policyRoles: string[];
  /** Collations defined in the database or used by columns, other than default, C, POSIX and ucs_basic. */
  collations: { name: string; provider: CollationProvider; locale: string | null }[];
  /** The source server's shared_preload_libraries. */
  preloadLibraries: string[] | null;
  maxPreparedTransactions: number | null;
  /** Catalogs that could not be read (permission denied): the answer may miss what they hold. */
  unreadable: string[];
}

export function emptyFacts(kind: SourceFacts['kind'], source: string): SourceFacts {
  return {
    kind,
    source,
    database: null,
    serverVersionNum: null,
    serverVersion: null,
    dumpVersion: null,
    encoding: null,
    collate: null,
    ctype: null,
    localeProvider: null,
    databaseBytes: null,
    extensions: [],
    languages: [],
    cFunctions: [],
    publications: [],
    subscriptions: [],
    replicationSlots: [],
    eventTriggers: [],
    foreignDataWrappers: [],
    foreignServers: [],
    tablespaces: [],
    largeObjects: null,
    roles: [],
    policyRoles: [],
    collations: [],
    preloadLibraries: null,
    maxPreparedTransactions: null,
    unreadable: [],
  };
}

/** "15.20" -> 150020, "9.6.24" -> 90624, "16beta1" -> 160000; null when it is no version. */
export function versionNum(version: string): number | null {
  const m = /^(\d+)(?:\.(\d+))?(?:\.(\d+))?/.exec(version.trim());
  if (!m) return null;
  const major = Number(m[1]);
  if (major >= 10) return major * 10000 + Number(m[2] ?? 0);
  return major * 10000 + Number(m[2] ?? 0) * 100 + Number(m[3] ?? 0);
}

/** The major version of a server_version_num: 150020 -> 15, 90624 -> 9.6. */
export function majorOf(num: number): number {
  return num >= 100000 ? Math.floor(num / 10000) : Math.floor(num / 10000) + (Math.floor(num / 100) % 100) / 10;
}

/** Roles a runtime has from the start: postgres, and PostgreSQL's pg_ built-ins. */
export function isBuiltinRole(name: string): boolean {
  return name === 'postgres' || name.startsWith('pg_');
}
