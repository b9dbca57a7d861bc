// The runtime's settings: defaults, then a JSON config file (--config), then command-line flags.
// Everything external goes through the zod schema, so a bad value is refused with its path named.

import fs from 'node:fs';
import { z } from 'zod';
import { PgxError } from '../errors.js';
import { DEFAULT_DATABASE_SETTINGS as DB } from '../runtime/databases/settings.js';
import { BOUNDS } from '../runtime/databases/records.js';

const pgSettingName = /^[a-z_][a-z0-9_.]*$/i;

/**
 * Upper bounds, so no setting can overflow what it feeds: a timeout goes into setTimeout, which fires at
 * once (1 ms) past 2^31-1 ms (24.8 days), so a --login-timeout of a month would refuse every login.
 */
const MAX_TIMER_SECONDS = 2_147_483;
/** Counts (clients, databases, queue slots): far past what one runtime serves. */
const MAX_COUNT = 1_000_000;
/** 16 TiB: far past any machine's memory, and MB * 2^20 stays an exact number of bytes. */
const MAX_MEMORY_MB = 16_777_216;

const runtimeConfigSchema = z
  .object({
    dataDir: z.string().min(1),
    host: z.string().min(1).default('127.0.0.1'),
    port: z.number().int().min(0).max(65535).default(6432),
    /** Directory for the engine's Unix socket; null for TCP only. */
    socketDir: z.string().min(1).nullable().default('/tmp'),
    pgBin: z.string().min(1).optional(),
    auth: z.enum(['trust', 'scram']).optional(),
    maxClients: z.number().int().min(1).max(MAX_COUNT).default(10000),
    /** Client sessions per database at once (a database's connection_limit overrides it); null: none. */
    maxSessionsPerDb: z.number().int().min(1).max(BOUNDS.connectionLimit.max).nullable().default(null),
    /** Sessions per database with a transaction in progress at once; the next waits in a queue. null: none. */
    maxActivePerDb: z.number().int().min(1).max(BOUNDS.connectionLimit.max).nullable().default(null),
    activeWaitTimeout: z.number().min(0.1).max(MAX_TIMER_SECONDS).default(30),
    maxBackends: z.number().int().min(2).max(10000).default(100),
    /** Backends kept for the admin (its roles, the Unix socket); null: 3, at most a quarter of maxBackends. */
    reservedBackends: z.number().int().min(0).nullable().default(null),
    /** Sessions one role / one database may hold at once (each holds a backend); null: half the unreserved backends. */
    maxBackendsPerRole: z.number().int().min(1).nullable().default(null),
    maxBackendsPerDb: z.number().int().min(1).nullable().default(null),
    /** Memory limits in MB (the engine cancels a statement past one with 53200); null: none. */
    sessionMemoryLimit: z.number().int().min(1).max(MAX_MEMORY_MB).nullable().default(null),
    databaseMemoryLimit: z.number().int().min(1).max(MAX_MEMORY_MB).nullable().default(null),
    /** null: 75% of the cgroup's memory limit when there is one, else none. */
    runtimeMemoryLimit: z.number().int().min(1).max(MAX_MEMORY_MB).nullable().default(null),
    /**
     * Free space the data filesystem keeps (src/runtime/postgres/disk-guard.ts): MB, or a share of the
     * filesystem as "N%". Below it new work is refused with 53100. null: 5%, at least 64 MB, at most 1 GB.
     */
    minFreeDisk: z.union([z.number().positive(), z.string().regex(/^(100|\d{1,2}(\.\d+)?)%$/, 'MB, or a percentage of the filesystem such as "5%"')]).nullable().default(null),
    backendIdleTimeout: z.number().min(1).max(MAX_TIMER_SECONDS).default(300),
    /** Idle pooled backends kept at most, over all databases. */
    maxIdleBackends: z.number().int().min(0).max(MAX_COUNT).default(10),
    backendWaitTimeout: z.number().min(0.1).max(MAX_TIMER_SECONDS).default(30),
    loginTimeout: z.number().min(0.1).max(MAX_TIMER_SECONDS).default(15),
    /** Failed logins per (source address, user) and minute before that pair's attempts take turns; null: none. */
    loginFailureLimit: z.number().int().min(1).max(MAX_COUNT).nullable().default(20),
    pgSettings: z
      .record(z.string().regex(pgSettingName, 'a PostgreSQL setting name'), z.string())
      .default({}),
    users: z
      .array(
        z.object({
          name: z.string().min(1).max(63),
          password: z.string().min(1),
          superuser: z.boolean().optional(),
          /** May mint by connecting (a member of pgx_minters); default true unless a superuser. */
          mint: z.boolean().optional(),
        }),
      )
      .default([]),
    // Disposable databases (src/runtime/databases/settings.ts); names match the flags.
    // Their defaults are the runtime's own (DEFAULT_DATABASE_SETTINGS), so a runtime made without a
    // config file and `pgx start` without flags agree.
    prefix: z.string().regex(/^[a-z][a-z0-9_]*$/, 'lower-case letters, digits and underscores, starting with a letter').default(DB.prefix),
    grace: z.number().min(0).max(BOUNDS.ttlSeconds.max).default(DB.graceSeconds),
    tombstone: z.number().min(0).max(366 * 86_400).default(DB.tombstoneSeconds),
    /** Unkept snapshots a database keeps at most; null: no cap. */
    snapshotRetention: z.number().int().min(1).max(MAX_COUNT).nullable().default(DB.snapshotRetention),
    poolSize: z.union([z.number().int().min(0).max(1000), z.literal('auto')], { error: 'a whole number of spares from 0 to 1000, or auto' }).default(DB.poolSize),
    poolMax: z.number().int().min(0).max(MAX_COUNT).default(DB.poolMax),
    poolIdle: z.number().min(0.1).max(MAX_TIMER_SECONDS).default(DB.poolIdleSeconds),
    mintRoles: z.union([z.enum(['any', 'createdb', 'group']), z.array(z.string().min(1).max(63))]).optional(),
    maxDatabases: z.number().int().min(1).max(MAX_COUNT).default(DB.maxDatabases),
    maxDatabasesPerRole: z.number().int().min(1).max(MAX_COUNT).nullable().default(null),
    mintQueueSize: z.number().int().min(0).max(MAX_COUNT).default(DB.mintQueueSize),
    mintTimeout: z.number().min(0.1).max(MAX_TIMER_SECONDS).default(DB.mintTimeoutSeconds),
    /** Extensions tenants may create; absent: PGX's default list (docs/limits.md). */
    allowExtensions: z.array(z.string().regex(/^[a-z0-9_-]+$/, 'an extension name')).optional(),
    // The HTTP control API (src/api): off unless apiPort is given; 0 picks a free port (tests).
    apiPort: z.number().int().min(0).max(65535).nullable().default(null),
    apiHost: z.string().min(1).default('127.0.0.1'),
    /** /metrics, /healthz and /readyz alone on a port of their own, without the API token (Prometheus); null: off. */
    metricsPort: z.number().int().min(0).max(65535).nullable().default(null),
    /** Where the metrics port listens; absent: apiHost. */
    metricsHost: z.string().min(1).optional(),
    /** Bearer token for the API; else read from apiTokenFile, else the PGX_API_TOKEN environment variable. */
    apiToken: z.string().min(16, 'at least 16 characters').optional(),
    apiTokenFile: z.string().min(1).optional(),
    /** TLS for TCP clients: PEM certificate (chain) and key files, reloaded on SIGHUP. */
    tlsCert: z.string().min(1).optional(),
    tlsKey: z.string().min(1).optional(),
    /** Refuse TCP clients that do not use TLS (Unix-socket clients are not affected). */
    tlsRequire: z.boolean().default(false),
    logFormat: z.enum(['json', 'text']).optional(),
    logLevel: z.enum(['error', 'warn', 'info', 'debug']).default('info'),
  })
  .strict();

/**
 * Every setting's default, from the schema above: the one source for `pgx start --help` and the
 * components' own fallbacks, so the three cannot drift apart.
 */
export const CONFIG_DEFAULTS: Readonly<RuntimeConfig> = runtimeConfigSchema.parse({ dataDir: '.pgx/data' });

export type RuntimeConfig = z.infer<typeof runtimeConfigSchema>;

/** Parses a config object, turning zod's complaints into one readable PgxError. */
export function parseConfig(input: unknown, source: string): RuntimeConfig {
  const result = runtimeConfigSchema.safeParse(input);
  if (result.success) return result.data;
  const problems = result.error.issues.map((i) => `${i.path.join('.') || '(root)'}: ${i.message}`).join('; ');
  throw new PgxError('CONFIG_INVALID', `invalid configuration in ${source}: ${problems}`, {
    hint: 'Fix the named settings; `pgx start --help` lists them.',
  });
}

export function readConfigFile(file: string): Record<string, unknown> {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (err) {
    throw new PgxError('CONFIG_INVALID', `cannot read config file ${file}: ${(err as Error).message}`, { cause: err });
  }
  try {
    const parsed: unknown = JSON.parse(text);
    if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) throw new Error('expected a JSON object');
    return parsed as Record<string, unknown>;
  } catch (err) {
    throw new PgxError('CONFIG_INVALID', `config file ${file} is not valid JSON: ${(err as Error).message}`, { cause: err });
  }
}

/**
 * True when deployed as a service: in a Kubernetes pod, or where the image says so (PGX_CONTAINER=1,
 * set by our Dockerfile). Password authentication is the default there. A developer's sandbox that
 * merely runs inside Docker keeps the local default (trust on loopback), so /.dockerenv is not a sign.
 */
export function inContainer(): boolean {
  return process.env.KUBERNETES_SERVICE_HOST !== undefined || process.env.PGX_CONTAINER === '1';
}
