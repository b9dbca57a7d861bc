// `pgx start`'s command line: its help text, and the flags (over a --config file's values) read into a
// RuntimeConfig. start.ts runs what this describes.

import { parseArgs } from 'node:util';
import { PgxError } from '../errors.js';
import { UsageError } from './command-line.js';
import { CONFIG_DEFAULTS as D, parseConfig, readConfigFile, type RuntimeConfig } from './config.js';
import { AUTO_POOL_SIZE } from '../runtime/databases/settings.js';

// The bracketed defaults come from the config schema (CONFIG_DEFAULTS), the one source of them.
export const START_HELP = `Usage: pgx start [options]

Runs a PGX runtime: PostgreSQL 18 supervised in the data directory, served through the PGX wire
engine on TCP and a Unix socket. Prints one line with a connection string when ready; Ctrl-C stops
PostgreSQL cleanly.

Options:
  --data-dir DIR          data directory (created and initialised on first start)   [required]
  --host HOST             TCP address to listen on                                  [${D.host}]
  --port N                TCP port, also names the socket .s.PGSQL.N                [${D.port}]
  --socket-dir DIR        directory for the Unix socket ('' for none)               [${D.socketDir}]
  --pg-bin DIR            PostgreSQL 18 binaries to use instead of the embedded ones
  --config FILE           JSON file with any of these settings (flags win)
  --auth trust|scram      trust: no password on loopback/socket (default outside containers);
                          scram: SCRAM-SHA-256 for every connection (default in containers)
  --max-clients N         client sessions at once; beyond it 53300                   [${D.maxClients}]
  --max-sessions-per-db N client sessions per database at once; beyond it 53300 (a
                          database's own connection_limit overrides it)             [no limit]
  --max-active-per-db N   sessions per database in a transaction at once; the next
                          waits its turn (a neighbour's burst cannot crowd others)  [no limit]
  --active-wait-timeout S how long a transaction waits for its turn; then 53300     [${D.activeWaitTimeout}]
  --max-backends N        PostgreSQL backends the engine may open                    [${D.maxBackends}]
  --reserved-backends N   of those, kept for the admin (the runtime's own roles, the
                          Unix socket), as superuser_reserved_connections   [3, at most 1/4]
  --max-backends-per-role N  sessions (each holds a backend) one role may have at once;
                          beyond it 53300              [half of the unreserved backends]
  --max-backends-per-db N sessions on one database at once; beyond it 53300   [the same]
  --backend-wait-timeout S  how long a client waits when every backend is busy       [${D.backendWaitTimeout}]
  --backend-idle-timeout S  how long an idle pooled backend is kept open            [${D.backendIdleTimeout}]
  --max-idle-backends N   idle pooled backends kept at most (least recently used go)  [${D.maxIdleBackends}]
  --login-timeout S       time allowed from connect to authenticated                 [${D.loginTimeout}]
  --login-failure-limit N failed logins per (source address, user) and minute; past it
                          that pair's logins take turns at a growing delay           [${D.loginFailureLimit}]

Memory limits (MB; a statement whose backend crosses one is canceled with 53200; docs/limits.md):
  --session-memory-limit MB   one session's backend                                 [none]
  --database-memory-limit MB  a database's backends together (per-database override
                              in the API)                                           [none]
  --runtime-memory-limit MB   every tenant backend together; over it the database
                              holding the most pays, idle sessions included
                              [75% of the cgroup limit, and the cgroup's unreclaimable
                              memory kept under 90% of it]
  -c NAME=VALUE           a PostgreSQL setting over the profile's (repeatable), as postgres -c

Disk headroom (docs/limits.md, Disk):
  --min-free-disk MB|N%   free space kept on the data filesystem: below it new databases,
                          template builds and snapshots are refused (53100); below half of
                          it statements growing a database are canceled (53100)
                                                     [5%, at least 64 MB, at most 1 GB]

Disposable databases (connect to <prefix><template>__<token> to mint one from a sealed template):
  --prefix P              name prefix that mints on connect                           [${D.prefix}]
  --grace S               drop a minted database S seconds after its last session,
                          unless it has a TTL (its TTL is then its lifetime)          [${D.grace}]
  --tombstone S           a name PGX dropped (TTL, or created through the API) answers
                          3D000 with the reason for S seconds instead of minting  [${D.tombstone}]
  --snapshot-retention N  snapshots a database keeps; a new one drops the oldest beyond N
                          (snapshots taken with keep are not counted, nor dropped)   [no cap]
  --pool-size N|auto      warm spare databases kept per sealed template (0: none;
                          auto: ${AUTO_POOL_SIZE.clones} where the filesystem clones, ${AUTO_POOL_SIZE.copies} where it copies) [${D.poolSize}]
  --pool-max N            spares per template at most after a burst grew the pool     [${D.poolMax}]
  --pool-idle S           a grown pool shrinks to --pool-size after S s without mints [${D.poolIdle}]
  --mint-roles R          who may mint: any, createdb (CREATEDB or superuser roles),
                          group (members of pgx_minters: no CREATEDB needed),
                          or a comma-separated list of roles  [createdb; group with --auth scram]
  --max-databases N       minted databases in the runtime; beyond it 53400           [${D.maxDatabases}]
  --max-databases-per-role N  minted databases per role; beyond it 53400             [none]
  --mint-queue-size N     mints waiting at once; beyond it 57P03                      [${D.mintQueueSize}]
  --mint-timeout S        how long mints may go without one finishing; then 57P03 to
                          those waiting (a mint waits as long as others finish)      [${D.mintTimeout}]
  --allow-extensions L    comma-separated extensions tenants may create (others: 42501)
                          [pgcrypto, uuid-ossp, citext, hstore, pg_trgm, ... docs/limits.md]

HTTP control API (docs/api.md; off unless --api-port is given):
  --api-port N            TCP port of the API (0: any free port)                      [off]
  --api-host HOST         address the API listens on                                  [${D.apiHost}]
  --api-token-file FILE   file holding the API's bearer token (else env PGX_API_TOKEN);
                          required when --api-host is not a loopback address
  --metrics-port N        serve only /metrics, /healthz and /readyz here, without a token
                          (Prometheus scrapes without control rights; 0: any free port) [off]
  --metrics-host HOST     address the metrics port listens on              [the --api-host]

TLS (SSLRequest answered with a TLS handshake; certificate and key re-read on SIGHUP):
  --tls-cert FILE         PEM certificate (chain) for TCP clients                     [off]
  --tls-key FILE          PEM private key of that certificate
  --tls-require           refuse TCP clients that do not use TLS (28000)

  --log-format json|text  log lines as JSON (default when stderr is not a terminal) or text
  --log-level LEVEL       error, warn, info or debug                                 [${D.logLevel}]
  -h, --help              this help
`;

export function parseStartArgs(argv: string[]): RuntimeConfig {
  let parsed;
  try {
    parsed = parseStartFlags(argv);
  } catch (err) {
    // A flag that does not exist or lacks its value: a usage error (exit 2, a pointer to --help), as
    // every other command answers one. Values that parse but are wrong are CONFIG_INVALID (toConfig).
    throw new UsageError((err as Error).message, START_HELP);
  }
  return toConfig(parsed);
}

function parseStartFlags(argv: string[]) {
  return parseArgs({
    args: argv,
    strict: true,
    allowPositionals: false,
    options: {
      'data-dir': { type: 'string' },
      host: { type: 'string' },
      port: { type: 'string' },
      'socket-dir': { type: 'string' },
      'pg-bin': { type: 'string' },
      config: { type: 'string' },
      auth: { type: 'string' },
      'max-clients': { type: 'string' },
      'max-sessions-per-db': { type: 'string' },
      'max-active-per-db': { type: 'string' },
      'active-wait-timeout': { type: 'string' },
      'max-backends': { type: 'string' },
      'reserved-backends': { type: 'string' },
      'max-backends-per-role': { type: 'string' },
      'max-backends-per-db': { type: 'string' },
      'session-memory-limit': { type: 'string' },
      'database-memory-limit': { type: 'string' },
      'runtime-memory-limit': { type: 'string' },
      'min-free-disk': { type: 'string' },
      'backend-wait-timeout': { type: 'string' },
      'backend-idle-timeout': { type: 'string' },
      'max-idle-backends': { type: 'string' },
      'login-timeout': { type: 'string' },
      'login-failure-limit': { type: 'string' },
      prefix: { type: 'string' },
      grace: { type: 'string' },
      tombstone: { type: 'string' },
      'snapshot-retention': { type: 'string' },
      'pool-size': { type: 'string' },
      'pool-max': { type: 'string' },
      'pool-idle': { type: 'string' },
      'mint-roles': { type: 'string' },
      'max-databases': { type: 'string' },
      'max-databases-per-role': { type: 'string' },
      'mint-queue-size': { type: 'string' },
      'mint-timeout': { type: 'string' },
      'allow-extensions': { type: 'string' },
      c: { type: 'string', short: 'c', multiple: true },
      'api-port': { type: 'string' },
      'api-host': { type: 'string' },
      'api-token-file': { type: 'string' },
      'metrics-port': { type: 'string' },
      'metrics-host': { type: 'string' },
      'tls-cert': { type: 'string' },
      'tls-key': { type: 'string' },
      'tls-require': { type: 'boolean' },
      'log-format': { type: 'string' },
      'log-level': { type: 'string' },
    },
  });
}

function toConfig({ values }: ReturnType<typeof parseStartFlags>): RuntimeConfig {
  const fromFile = values.config ? readConfigFile(values.config) : {};
  const num = (v: string | undefined): number | undefined => (v === undefined ? undefined : Number(v));
  const flags: Record<string, unknown> = {
    dataDir: values['data-dir'],
    host: values.host,
    port: num(values.port),
    socketDir: values['socket-dir'] === '' ? null : values['socket-dir'],
    pgBin: values['pg-bin'],
    auth: values.auth,
    maxClients: num(values['max-clients']),
    maxSessionsPerDb: num(values['max-sessions-per-db']),
    maxActivePerDb: num(values['max-active-per-db']),
    activeWaitTimeout: num(values['active-wait-timeout']),
    maxBackends: num(values['max-backends']),
    reservedBackends: num(values['reserved-backends']),
    maxBackendsPerRole: num(values['max-backends-per-role']),
    maxBackendsPerDb: num(values['max-backends-per-db']),
    sessionMemoryLimit: num(values['session-memory-limit']),
    databaseMemoryLimit: num(values['database-memory-limit']),
    runtimeMemoryLimit: num(values['runtime-memory-limit']),
    minFreeDisk: values['min-free-disk']?.endsWith('%') ? values['min-free-disk'] : num(values['min-free-disk']),
    backendWaitTimeout: num(values['backend-wait-timeout']),
    backendIdleTimeout: num(values['backend-idle-timeout']),
    maxIdleBackends: num(values['max-idle-backends']),
    loginTimeout: num(values['login-timeout']),
    loginFailureLimit: num(values['login-failure-limit']),
    prefix: values.prefix,
    grace: num(values.grace),
    tombstone: num(values.tombstone),
    snapshotRetention: num(values['snapshot-retention']),
    poolSize: values['pool-size'] === 'auto' ? 'auto' : num(values['pool-size']),
    poolMax: num(values['pool-max']),
    poolIdle: num(values['pool-idle']),
    mintRoles: mintRolesFlag(values['mint-roles']),
    maxDatabases: num(values['max-databases']),
    maxDatabasesPerRole: num(values['max-databases-per-role']),
    mintQueueSize: num(values['mint-queue-size']),
    mintTimeout: num(values['mint-timeout']),
    allowExtensions: values['allow-extensions']?.split(',').map((e) => e.trim()).filter((e) => e.length > 0),
    apiPort: num(values['api-port']),
    apiHost: values['api-host'],
    apiTokenFile: values['api-token-file'],
    metricsPort: num(values['metrics-port']),
    metricsHost: values['metrics-host'],
    tlsCert: values['tls-cert'],
    tlsKey: values['tls-key'],
    tlsRequire: values['tls-require'],
    logFormat: values['log-format'],
    logLevel: values['log-level'],
  };
  const merged: Record<string, unknown> = { ...fromFile };
  for (const [k, v] of Object.entries(flags)) if (v !== undefined) merged[k] = v;
  if (values.c) {
    const settings: Record<string, string> = { ...((fromFile.pgSettings as Record<string, string> | undefined) ?? {}) };
    for (const kv of values.c) {
      const eq = kv.indexOf('=');
      if (eq <= 0) throw new PgxError('CONFIG_INVALID', `-c ${kv}: expected NAME=VALUE`, { hint: 'For example: -c work_mem=8MB' });
      settings[kv.slice(0, eq)] = kv.slice(eq + 1);
    }
    merged.pgSettings = settings;
  }
  if (merged.dataDir === undefined) {
    throw new PgxError('CONFIG_INVALID', 'no data directory given', { hint: 'Pass --data-dir DIR (npm start uses .pgx/data).' });
  }
  return parseConfig(merged, values.config ? `${values.config} and flags` : 'flags');
}

/** --mint-roles any | createdb | group | role1,role2 */
function mintRolesFlag(v: string | undefined): string | string[] | undefined {
  if (v === undefined || v === 'any' || v === 'createdb' || v === 'group') return v;
  return v.split(',').map((r) => r.trim()).filter((r) => r.length > 0);
}
