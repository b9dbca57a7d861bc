// `pgx start`: wires the runtime together. The supervisor starts PostgreSQL, the engine listens for
// clients, and this file connects the two through the engine's ports (backend status, credentials).

import { createHash } from 'node:crypto';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { systemClock } from '../clock.js';
import { PgxError } from '../errors.js';
import { createLogger, type Logger } from '../log.js';
import { Engine } from '../engine/listener.js';
import { CGROUP_GUARD } from '../engine/memory-watchdog.js';
import type { ControlFunctions } from '../engine/ports.js';
import { locatePgBinaries } from '../runtime/postgres/pg-binaries.js';
import { assertReachable, resolvePgOsUser } from '../runtime/postgres/os-user.js';
import { PostgresSupervisor } from '../runtime/postgres/supervisor.js';
import { RoleCredentials } from '../runtime/postgres/role-credentials.js';
import { authSecret } from '../runtime/postgres/auth-secret.js';
import { AdminConnection } from '../runtime/postgres/admin-connection.js';
import { DisposableDatabases } from '../runtime/databases/disposable-databases.js';
import type { DatabaseOperations } from '../runtime/databases/operations.js';
import type { DatabaseSettings } from '../runtime/databases/settings.js';
import { checkApiExposure, startApi } from '../api/index.js';
import type { ApiServer } from '../api/server.js';
import { inContainer, parseConfig, readConfigFile, type RuntimeConfig } from './config.js';
import { probeStorage, type StorageCapability } from '../runtime/postgres/storage-probe.js';
import { TlsCertificate } from './tls-certificate.js';
import { cgroupLimit, unreclaimableBytes } from '../runtime/postgres/cgroup.js';
import { protectRuntime } from '../runtime/postgres/oom.js';
import { capYoungGeneration } from '../runtime/young-generation.js';
import { adminPassword, keptApiToken, type AdminPassword } from '../runtime/postgres/admin-password.js';
import { ADMIN_ROLE } from '../runtime/postgres/role-credentials.js';
import { DiskGuard, type MinFreeDisk } from '../runtime/postgres/disk-guard.js';
import { socketPath } from '../wire/socket-path.js';

export const START_HELP = `Usage: pgx start [options]

Runs a PGX runtime: PostgreSQL 18 supervised in the data directory, served through the PGX wire
engine on TCP and a Unix socket. Prints one line with a connection string when ready; Ctrl-C stops
PostgreSQL cleanly.

Options:
  --data-dir DIR          data directory (created and initialised on first start)   [required]
  --host HOST             TCP address to listen on                                  [127.0.0.1]
  --port N                TCP port, also names the socket .s.PGSQL.N                [6432]
  --socket-dir DIR        directory for the Unix socket ('' for none)               [/tmp]
  --pg-bin DIR            PostgreSQL 18 binaries to use instead of the embedded ones
  --config FILE           JSON file with any of these settings (flags win)
  --auth trust|scram      trust: no password on loopback/socket (default outside containers);
                          scram: SCRAM-SHA-256 for every connection (default in containers)
  --max-clients N         client sessions at once; beyond it 53300                   [10000]
  --max-sessions-per-db N client sessions per database at once; beyond it 53300 (a
                          database's own connection_limit overrides it)             [no limit]
  --max-active-per-db N   sessions per database in a transaction at once; the next
                          waits its turn (a neighbour's burst cannot crowd others)  [no limit]
  --active-wait-timeout S how long a transaction waits for its turn; then 53300     [30]
  --max-backends N        PostgreSQL backends the engine may open                    [100]
  --reserved-backends N   of those, kept for the admin (the runtime's own roles, the
                          Unix socket), as superuser_reserved_connections   [3, at most 1/4]
  --max-backends-per-role N  sessions (each holds a backend) one role may have at once;
                          beyond it 53300              [half of the unreserved backends]
  --max-backends-per-db N sessions on one database at once; beyond it 53300   [the same]
  --backend-wait-timeout S  how long a client waits when every backend is busy       [30]
  --backend-idle-timeout S  how long an idle pooled backend is kept open            [300]
  --max-idle-backends N   idle pooled backends kept at most (least recently used go)  [10]
  --login-timeout S       time allowed from connect to authenticated                 [15]
  --login-failure-limit N failed logins per (source address, user) and minute; past it
                          that pair's logins take turns at a growing delay           [20]

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
  --prefix P              name prefix that mints on connect                           [tdb_]
  --grace S               drop a minted database S seconds after its last session,
                          unless it has a TTL (its TTL is then its lifetime)          [15]
  --tombstone S           a name PGX dropped (TTL, or created through the API) answers
                          3D000 with the reason for S seconds instead of minting  [86400]
  --pool-size N           warm spare databases kept per sealed template (0: none)     [2]
  --mint-roles R          who may mint: any, createdb (CREATEDB or superuser roles),
                          group (members of pgx_minters: no CREATEDB needed),
                          or a comma-separated list of roles  [createdb; group with --auth scram]
  --max-databases N       minted databases in the runtime; beyond it 53400           [10000]
  --max-databases-per-role N  minted databases per role; beyond it 53400             [none]
  --mint-queue-size N     mints waiting at once; beyond it 57P03                      [1000]
  --mint-timeout S        how long a mint may wait in the queue, then 57P03           [30]
  --allow-extensions L    comma-separated extensions tenants may create (others: 42501)
                          [pgcrypto, uuid-ossp, citext, hstore, pg_trgm, ... docs/limits.md]

HTTP control API (docs/api.md; off unless --api-port is given):
  --api-port N            TCP port of the API (0: any free port)                      [off]
  --api-host HOST         address the API listens on                                  [127.0.0.1]
  --api-token-file FILE   file holding the API's bearer token (else env PGX_API_TOKEN);
                          required when --api-host is not a loopback address

TLS (SSLRequest answered with a TLS handshake; certificate and key re-read on SIGHUP):
  --tls-cert FILE         PEM certificate (chain) for TCP clients                     [off]
  --tls-key FILE          PEM private key of that certificate
  --tls-require           refuse TCP clients that do not use TLS (28000)

  --log-format json|text  log lines as JSON (default when stderr is not a terminal) or text
  --log-level LEVEL       error, warn, info or debug                                 [info]
  -h, --help              this help
`;

/** Backends kept beyond --max-backends in max_connections: the runtime's own admin sessions, and slack
 * for a backend process that has not quite exited when its slot is reused. */
const ADMIN_CONNECTIONS = 5;
const PG_PORT = 5432;
/** Share of the cgroup's memory limit the runtime limit defaults to (PGX advises 70-80%): the rest is
 * shared buffers, node, idle backends and page cache, and margin before the kernel's OOM killer. */
const CGROUP_SHARE = 0.75;
/** How often tenant backends' memory is read: a runaway sort grows by hundreds of MB a second. */
const MEMORY_CHECK_MS = 100;
/** How often free space on the data filesystem is read: a bulk insert writes tens of MB a second. */
const DISK_CHECK_MS = 100;
/** For the status document; kept in step with package.json. */
const PGX_VERSION = '0.1.0';

export function parseStartArgs(argv: string[]): RuntimeConfig {
  let parsed;
  try {
    parsed = parseStartFlags(argv);
  } catch (err) {
    throw new PgxError('CONFIG_INVALID', (err as Error).message, { hint: 'See pgx start --help for the options.' });
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
      'pool-size': { type: 'string' },
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
    poolSize: num(values['pool-size']),
    mintRoles: mintRolesFlag(values['mint-roles']),
    maxDatabases: num(values['max-databases']),
    maxDatabasesPerRole: num(values['max-databases-per-role']),
    mintQueueSize: num(values['mint-queue-size']),
    mintTimeout: num(values['mint-timeout']),
    allowExtensions: values['allow-extensions']?.split(',').map((e) => e.trim()).filter((e) => e.length > 0),
    apiPort: num(values['api-port']),
    apiHost: values['api-host'],
    apiTokenFile: values['api-token-file'],
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

/** --min-free-disk as configured: MB, "N%", or null for the default. */
function minFreeDisk(v: number | string | null): MinFreeDisk {
  if (v === null) return null;
  return typeof v === 'number' ? { mb: v } : { percent: Number(v.slice(0, -1)) };
}

/** --mint-roles any | createdb | group | role1,role2 */
function mintRolesFlag(v: string | undefined): string | string[] | undefined {
  if (v === undefined || v === 'any' || v === 'createdb' || v === 'group') return v;
  return v.split(',').map((r) => r.trim()).filter((r) => r.length > 0);
}

/** PostgreSQL's private socket directory: short (socket paths are limited to 107 bytes) and per data dir. */
function privateSocketDir(dataDir: string): string {
  const tag = createHash('sha256').update(dataDir).digest('hex').slice(0, 12);
  return path.join(os.tmpdir(), `pgx-${tag}`);
}

export async function runStart(argv: string[]): Promise<number> {
  const config = parseStartArgs(argv);
  capYoungGeneration();
  const logger = createLogger({ format: config.logFormat ?? (process.stderr.isTTY ? 'text' : 'json'), level: config.logLevel });
  const runtime = await startRuntime(config, logger);
  const url = `postgresql://postgres@${hostForUrl(config.host)}:${runtime.engine.port}/postgres`;
  const socketNote = config.socketDir ? `, socket ${socketPath(config.socketDir, runtime.engine.port)}` : '';
  const apiNote = runtime.api ? `, API http://${hostForUrl(config.apiHost)}:${runtime.api.port}/v1${runtime.apiTokenFile ? ` (token in ${runtime.apiTokenFile})` : ''}` : '';
  const passwordNote = runtime.adminPasswordSource === null ? '' : `, admin password ${runtime.adminPasswordSource.startsWith('/') ? 'in ' : 'from '}${runtime.adminPasswordSource}`;
  await new Promise<void>((resolve) => {
    let stopping = false;
    const onSignal = (signal: NodeJS.Signals): void => {
      if (stopping) {
        // PostgreSQL finishes a fast shutdown on its own (sessions ended, a checkpoint): ask for one
        // rather than leave it running, orphaned, until the next start finds it.
        const postgres = runtime.supervisor.pid;
        if (postgres !== undefined) {
          try {
            process.kill(postgres, 'SIGINT');
          } catch {
            // already gone
          }
        }
        logger.warn('second signal: exiting without waiting; PostgreSQL was asked for a fast shutdown', { signal, postgresPid: postgres });
        process.exit(1);
      }
      stopping = true;
      logger.info('stopping', { signal });
      runtime.stop().then(resolve, (err: unknown) => {
        logger.error('stop failed', { err });
        resolve();
      });
    };
    process.on('SIGINT', onSignal);
    process.on('SIGTERM', onSignal);
    process.on('SIGHUP', () => runtime.reloadTls());
    // Only now: whoever reads this line may signal at once, and a signal before the handlers
    // above would kill node outright and leave PostgreSQL running.
    process.stdout.write(`PGX ready: ${url} (PostgreSQL ${runtime.pgVersion}, auth ${runtime.auth}${passwordNote}${socketNote}${apiNote}, data ${config.dataDir})\n`);
  });
  return 0;
}

/** A host as it goes in a URL: IPv6 in brackets. */
function hostForUrl(host: string): string {
  return host.includes(':') ? `[${host}]` : host;
}

/** A host clients can reach: a wildcard listen address becomes loopback. */
function reachableHost(host: string): string {
  if (host === '0.0.0.0') return '127.0.0.1';
  if (host === '::') return '::1';
  return host;
}

interface MemorySettings {
  sessionMb: number | null;
  databaseMb: number | null;
  runtimeMb: number | null;
  cgroupMb: number | null;
  /** The cgroup guard, when the runtime limit is derived from the cgroup's (memory-watchdog.ts). */
  cgroup?: { limitMb: number; usedMb: () => Promise<number | null> };
}

/**
 * The memory limits in force: as configured, with the runtime's derived from the cgroup's when not
 * given: 75% of it for tenant backends, and the cgroup's unreclaimable memory kept under 90% of it
 * (node, shared buffers and idle backends live in the rest). A limit given is the operator's alone.
 */
async function memoryLimitSettings(config: RuntimeConfig, logger: Logger): Promise<MemorySettings> {
  const limit = await cgroupLimit();
  const cgroupMb = limit === null ? null : Math.floor(limit.bytes / 2 ** 20);
  const runtimeMb = config.runtimeMemoryLimit ?? (cgroupMb === null ? null : Math.floor(cgroupMb * CGROUP_SHARE));
  const guarded = config.runtimeMemoryLimit === null && limit !== null && cgroupMb !== null;
  const settings = {
    sessionMb: config.sessionMemoryLimit,
    databaseMb: config.databaseMemoryLimit,
    runtimeMb,
    cgroupMb,
    ...(guarded
      ? { cgroup: { limitMb: cgroupMb, usedMb: async () => {
          const bytes = await unreclaimableBytes(limit);
          return bytes === null ? null : bytes / 2 ** 20;
        } } }
      : {}),
  };
  // The OOM killer's last resort among the runtime's processes, where it may lower its score (oom.ts).
  logger.info('memory-limits', {
    sessionMb: settings.sessionMb, databaseMb: settings.databaseMb, runtimeMb, cgroupMb,
    cgroupGuardMb: guarded ? Math.floor(cgroupMb * CGROUP_GUARD) : null, cgroupDir: limit?.dir,
    runtimeOomScoreAdj: protectRuntime(),
  });
  if (config.runtimeMemoryLimit !== null && cgroupMb !== null && config.runtimeMemoryLimit > cgroupMb * 0.8) {
    logger.warn('runtime-memory-limit-near-cgroup-limit', {
      runtimeMb,
      cgroupMb,
      hint: `Leave room for shared buffers, the runtime itself and page cache: at most ${Math.floor(cgroupMb * 0.8)} MB (80%), or the kernel's OOM killer may act first.`,
    });
  }
  return settings;
}

/** The TLS certificate when --tls-cert and --tls-key are given (both or neither); read now, so a bad file stops the start. */
function tlsCertificate(config: RuntimeConfig, logger: Logger): TlsCertificate | null {
  if (config.tlsCert === undefined && config.tlsKey === undefined) {
    if (config.tlsRequire) throw new PgxError('CONFIG_INVALID', '--tls-require needs a certificate', { hint: 'Give --tls-cert FILE and --tls-key FILE.' });
    return null;
  }
  if (config.tlsCert === undefined || config.tlsKey === undefined) {
    throw new PgxError('CONFIG_INVALID', `--tls-${config.tlsCert === undefined ? 'cert' : 'key'} is missing`, { hint: 'TLS needs both --tls-cert FILE and --tls-key FILE.' });
  }
  return new TlsCertificate(config.tlsCert, config.tlsKey, logger);
}

/** The API's token: apiToken, else apiTokenFile's first line, else PGX_API_TOKEN; null for none. */
function apiToken(config: RuntimeConfig): string | null {
  if (config.apiToken !== undefined) return config.apiToken;
  if (config.apiTokenFile !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(config.apiTokenFile, 'utf8');
    } catch (err) {
      throw new PgxError('CONFIG_INVALID', `cannot read --api-token-file ${config.apiTokenFile}: ${(err as Error).message}`, { cause: err });
    }
    const token = text.split('\n')[0]!.trim();
    if (token.length < 16) throw new PgxError('CONFIG_INVALID', `--api-token-file ${config.apiTokenFile}: the token must be at least 16 characters`);
    return token;
  }
  const env = process.env.PGX_API_TOKEN?.trim();
  if (env !== undefined && env.length > 0) {
    if (env.length < 16) throw new PgxError('CONFIG_INVALID', 'PGX_API_TOKEN: the token must be at least 16 characters');
    return env;
  }
  return null;
}

/** A `postgres` entry in the config's users sets the admin's password; it cannot make the admin a tenant. */
function checkConfiguredAdmin(config: RuntimeConfig): void {
  const entry = config.users.find((u) => u.name === ADMIN_ROLE);
  if (entry !== undefined && (entry.superuser === false || entry.mint === false)) {
    throw new PgxError('CONFIG_INVALID', `users: "${ADMIN_ROLE}" is the runtime's admin, always a superuser; its entry can only set the admin password`, {
      hint: `Drop "superuser"/"mint" from the ${ADMIN_ROLE} entry, or give the tenant a name of its own (e.g. "app").`,
    });
  }
}

export interface RunningRuntime {
  /** The HTTP API, when --api-port was given: the port it is bound to. */
  api?: { port: number };
  engine: Engine;
  /** What the HTTP API calls (and tests): create, status, records. */
  databases: DatabaseOperations;
  /** The disposable databases' parts and their life (start, stop). */
  disposableDatabases: DisposableDatabases;
  supervisor: PostgresSupervisor;
  pgVersion: string;
  auth: 'trust' | 'scram';
  /** Where the admin's password comes from (a file's path, PGX_ADMIN_PASSWORD, the config); null: none set. */
  adminPasswordSource: string | null;
  /** The file holding the API token the runtime made itself (a scram runtime given none); else null. */
  apiTokenFile: string | null;
  /** Re-reads the TLS certificate and key (SIGHUP); false without TLS or when the files are bad. */
  reloadTls(): boolean;
  stop(): Promise<void>;
}

/** Starts PostgreSQL and the engine; used by `pgx start` and by tests. */
export async function startRuntime(config: RuntimeConfig, logger: Logger, control?: ControlFunctions): Promise<RunningRuntime> {
  const dataDir = path.resolve(config.dataDir);
  const binaries = await locatePgBinaries({ ...(config.pgBin ? { pgBin: config.pgBin } : {}), logger });
  const osUser = await resolvePgOsUser(logger);
  await assertReachable(dataDir, osUser, 'data-dir');
  await assertReachable(path.join(binaries.binDir, 'postgres'), osUser, 'pg-bin');
  const socketDir = privateSocketDir(dataDir);
  const auth = config.auth ?? (inContainer() ? 'scram' : 'trust');
  let token = config.apiPort === null ? null : apiToken(config);
  // A scram runtime given no token makes one (keptApiToken, once the data directory exists).
  if (config.apiPort !== null && auth !== 'scram') checkApiExposure(config.apiHost, token, logger.child({ component: 'api' }));
  let tokenFile: string | null = null;
  const certificate = tlsCertificate(config, logger.child({ component: 'tls' }));
  checkConfiguredAdmin(config);
  // With passwords checked (scram), minting is PGX's right to grant (pgx_minters): tenants need no
  // CREATEDB, so PostgreSQL's CREATE DATABASE is not in their hands. Trust mode keeps a developer's
  // CREATEDB habit.
  const mintRoles = config.mintRoles ?? (auth === 'scram' ? 'group' : 'createdb');
  const databaseSettings: Partial<DatabaseSettings> = {
    prefix: config.prefix,
    graceSeconds: config.grace,
    tombstoneSeconds: config.tombstone,
    poolSize: config.poolSize,
    mintRoles: Array.isArray(mintRoles) ? { kind: 'list', roles: mintRoles } : { kind: mintRoles },
    maxDatabases: config.maxDatabases,
    maxDatabasesPerRole: config.maxDatabasesPerRole,
    mintQueueSize: config.mintQueueSize,
    mintTimeoutSeconds: config.mintTimeout,
    ...(config.allowExtensions ? { allowedExtensions: config.allowExtensions } : {}),
  };
  // The engine is constructed below; the guard cancels statements through it only after start().
  const disk = new DiskGuard({
    dataDir,
    minFree: minFreeDisk(config.minFreeDisk),
    intervalMs: DISK_CHECK_MS,
    connect: () => supervisor.connect('postgres', 'postgres'),
    cancelStatements: (pids, error) => engine.cancelDiskWriters(pids, error),
    postgresUp: () => supervisor.state === 'ready',
    clock: systemClock,
    logger: logger.child({ component: 'disk' }),
  });
  const supervisor: PostgresSupervisor = new PostgresSupervisor({
    dataDir,
    binDir: binaries.binDir,
    socketDir,
    port: PG_PORT,
    maxConnections: config.maxBackends + ADMIN_CONNECTIONS + DisposableDatabases.adminConnections(databaseSettings),
    settings: config.pgSettings,
    logger: logger.child({ component: 'supervisor' }),
    clock: systemClock,
    osUser,
    restartGate: (signal) => disk.roomToRestart(signal),
  });
  await disk.releaseIfLow();
  await supervisor.start();
  const admin = new AdminConnection(() => supervisor.connect('postgres', 'postgres'));
  // `databases` is made below; logins reach this only once both exist.
  const credentials = new RoleCredentials(() => admin.get(), (role) => databases.isCredential(role), logger.child({ component: 'auth' }));
  let adminLogin: AdminPassword | null = null;
  try {
    await credentials.ensureUsers(config.users, logger);
    const configured = config.users.find((u) => u.name === ADMIN_ROLE)?.password;
    if (auth === 'scram' || configured !== undefined) {
      adminLogin = await adminPassword(dataDir, configured);
      await credentials.setAdminPassword(adminLogin.password);
    }
    if (config.apiPort !== null && token === null && auth === 'scram') {
      const kept = await keptApiToken(dataDir);
      token = kept.token;
      tokenFile = kept.file;
    }
  } catch (err) {
    await admin.close();
    await supervisor.stop();
    throw err;
  }
  const storage = await probeStorage(dataDir).catch(
    (err: unknown): StorageCapability => ({ filesystem: 'unknown', clone: false, detail: `the clone probe failed (${(err as Error).message}); databases are copied, not cloned` }),
  );
  if (storage.clone) logger.info('storage', { ...storage, dataDir });
  else logger.warn('storage-without-clones', { ...storage, dataDir });
  const memory = await memoryLimitSettings(config, logger);
  const databases: DisposableDatabases = new DisposableDatabases({
    connect: (database, user = 'postgres') => supervisor.connect(database, user),
    storage,
    postgres: { socketDir, port: PG_PORT, dataDir },
    // The engine is constructed below; the facade calls these only after start(), when it exists.
    engine: {
      terminateSessions: (database, message, hint) => engine.terminateSessions(database, message, hint),
      sessionsPerDatabase: () => engine.sessionsPerDatabase(),
      closeIdleBackends: (database) => engine.closeIdleBackends(database),
    },
    settings: databaseSettings,
    version: PGX_VERSION,
    postgresVersion: binaries.version,
    postgresPid: () => supervisor.pid,
    disk,
    memoryLimits: () => ({
      session_mb: memory.sessionMb,
      database_mb: memory.databaseMb,
      runtime_mb: memory.runtimeMb,
      cgroup_mb: memory.cgroupMb,
      cgroup_guard_mb: memory.cgroup ? Math.floor(memory.cgroup.limitMb * CGROUP_GUARD) : null,
      postmaster_oom_protected: supervisor.oomProtected,
      ...engine.stats().memory,
    }),
    clock: systemClock,
    logger: logger.child({ component: 'databases' }),
  });
  const engine: Engine = new Engine({
    host: config.host,
    port: config.port,
    socketDir: config.socketDir,
    backend: { socketDir, port: PG_PORT },
    backendStatus: { accepting: () => supervisor.state === 'ready' },
    credentials,
    mockAuthSecret: authSecret(dataDir),
    auth,
    ...(certificate ? { tls: { secureContext: () => certificate.current(), require: config.tlsRequire } } : {}),
    maxClients: config.maxClients,
    maxSessionsPerDatabase: config.maxSessionsPerDb,
    maxActivePerDatabase: config.maxActivePerDb,
    activeWaitTimeoutMs: config.activeWaitTimeout * 1000,
    memoryLimits: {
      sessionMb: memory.sessionMb,
      databaseMb: memory.databaseMb,
      runtimeMb: memory.runtimeMb,
      ...(memory.cgroup ? { cgroup: memory.cgroup } : {}),
      databaseOverride: (database) => databases.memoryLimitMb(database),
      intervalMs: MEMORY_CHECK_MS,
    },
    maxBackends: config.maxBackends,
    ...(config.reservedBackends !== null ? { reservedBackends: config.reservedBackends } : {}),
    ...(config.maxBackendsPerRole !== null ? { maxBackendsPerRole: config.maxBackendsPerRole } : {}),
    ...(config.maxBackendsPerDb !== null ? { maxBackendsPerDatabase: config.maxBackendsPerDb } : {}),
    adminRoles: ['postgres', ...config.users.filter((u) => u.superuser).map((u) => u.name)],
    backendIdleTimeoutMs: config.backendIdleTimeout * 1000,
    maxIdleBackends: config.maxIdleBackends,
    backendWaitTimeoutMs: config.backendWaitTimeout * 1000,
    loginTimeoutMs: config.loginTimeout * 1000,
    loginFailureLimit: config.loginFailureLimit,
    router: databases.router,
    sessionObserver: databases.sessions,
    control: control ?? databases.control,
    logger: logger.child({ component: 'engine' }),
    clock: systemClock,
  });
  let engineListening = false;
  let api: ApiServer | null = null;
  try {
    await disk.start();
    // Records loaded and reconciled before the first client is routed.
    await databases.start();
    await engine.start();
    engineListening = true;
    if (config.apiPort !== null) {
      const engineHost = hostForUrl(reachableHost(config.host));
      api = await startApi({
        host: config.apiHost,
        port: config.apiPort,
        token,
        ctx: {
          databases: databases.operations,
          engineStats: () => engine.stats(),
          postgresUp: () => supervisor.state === 'ready',
          engineListening: () => engineListening,
          connectionUrl: (database) => `postgresql://postgres@${engineHost}:${engine.port}/${encodeURIComponent(database)}`,
        },
        clock: systemClock,
        logger: logger.child({ component: 'api' }),
      });
    }
  } catch (err) {
    await api?.stop();
    await engine.stop();
    await disk.stop();
    await databases.stop();
    await admin.close();
    await supervisor.stop();
    throw err;
  }
  logger.info('runtime ready', { port: engine.port, socketDir: config.socketDir, dataDir, pg: binaries.version, auth, ...(api ? { apiPort: api.port } : {}) });
  return {
    ...(api ? { api: { port: api.port } } : {}),
    engine,
    databases: databases.operations,
    disposableDatabases: databases,
    supervisor,
    pgVersion: binaries.version,
    adminPasswordSource: adminLogin?.source ?? null,
    apiTokenFile: tokenFile,
    auth,
    reloadTls: () => certificate?.reload() ?? false,
    async stop() {
      // The API first: no new requests while the rest stops.
      await api?.stop();
      engineListening = false;
      // Engine first: its sessions end (the facade records when), then the facade's own work stops.
      await engine.stop();
      await disk.stop();
      await databases.stop();
      await admin.close();
      await supervisor.stop();
      logger.info('stopped');
    },
  };
}
