// `pgx start`: wires the runtime together. The supervisor starts PostgreSQL, the engine listens for
// clients, and this file connects the two through the engine's ports (backend status, credentials, and
// the disposable databases' router, session observer and control functions). One teardown (Teardown)
// stops whatever started, in one order, for a start that fails part way and for stop() alike. The
// command line is read in start-args.ts, and what a start decides before anything runs in start-plan.ts.

import { systemClock } from '../clock.js';
import { createLogger, type Logger } from '../log.js';
import { Engine } from '../engine/listener.js';
import { CGROUP_GUARD } from '../engine/memory-watchdog.js';
import type { ControlFunctions, EngineOptions } from '../engine/ports.js';
import { settingsRowsSql } from '../engine/login-check.js';
import { startApi, type ApiListeners } from '../api/index.js';
import { PostgresSupervisor } from '../runtime/postgres/supervisor.js';
import { ADMIN_ROLE, RoleCredentials } from '../runtime/postgres/role-credentials.js';
import { authSecret } from '../runtime/postgres/auth-secret.js';
import { AdminConnection } from '../runtime/postgres/admin-connection.js';
import { adminPassword, keptApiToken, type AdminPassword } from '../runtime/postgres/admin-password.js';
import { DiskGuard, type MinFreeDisk } from '../runtime/postgres/disk-guard.js';
import { probeStorage, type StorageCapability } from '../runtime/postgres/storage-probe.js';
import { DisposableDatabases } from '../runtime/databases/disposable-databases.js';
import type { DatabaseOperations } from '../runtime/databases/operations.js';
import { QuietCollector } from '../runtime/quiet-collector.js';
import { socketPath } from '../wire/socket-path.js';
import type { RuntimeConfig } from './config.js';
import { parseStartArgs } from './start-args.js';
import { memoryLimitSettings, planStart, type MemorySettings, type StartPlan } from './start-plan.js';

export { parseStartArgs, START_HELP } from './start-args.js';

/** Backends kept beyond --max-backends in max_connections: the runtime's own admin sessions, and slack
 * for a backend process that has not quite exited when its slot is reused. */
const ADMIN_CONNECTIONS = 5;
const PG_PORT = 5432;
/** How often tenant backends' memory is read: a runaway sort grows by hundreds of MB a second. */
const MEMORY_CHECK_MS = 100;
/** How often free space on the data filesystem is read near --min-free-disk (a bulk insert writes 100 MB a second and more); further above it, less often. */
const DISK_CHECK_MS = 100;
/** For the status document; kept in step with package.json. */
const PGX_VERSION = '0.1.0';

/** --min-free-disk as configured: MB, "N%", or null for the default. */
function minFreeDisk(v: number | string | null): MinFreeDisk {
  if (v === null) return null;
  return typeof v === 'number' ? { mb: v } : { percent: Number(v.slice(0, -1)) };
}

export async function runStart(argv: string[]): Promise<number> {
  const config = parseStartArgs(argv);
  new QuietCollector().start();
  const logger = createLogger({ format: config.logFormat ?? (process.stderr.isTTY ? 'text' : 'json'), level: config.logLevel });
  const runtime = await startRuntime(config, logger);
  const url = `postgresql://postgres@${hostForUrl(config.host)}:${runtime.engine.port}/postgres`;
  const socketNote = config.socketDir ? `, socket ${socketPath(config.socketDir, runtime.engine.port)}` : '';
  const apiNote = runtime.api ? `, API http://${hostForUrl(config.apiHost)}:${runtime.api.port}/v1${runtime.apiTokenFile ? ` (token in ${runtime.apiTokenFile})` : ''}` : '';
  const metricsNote = runtime.metrics ? `, metrics http://${hostForUrl(config.metricsHost ?? config.apiHost)}:${runtime.metrics.port}/metrics` : '';
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
    process.stdout.write(`PGX ready: ${url} (PostgreSQL ${runtime.pgVersion}, auth ${runtime.auth}${passwordNote}${socketNote}${apiNote}${metricsNote}, data ${config.dataDir})\n`);
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

export interface RunningRuntime {
  /** The HTTP API, when --api-port was given: the port it is bound to. */
  api?: { port: number };
  /** The metrics-only listener, when --metrics-port was given: the port it is bound to. */
  metrics?: { port: number };
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

/** The parts that stop, in the order they stop: no new requests, then no new sessions (the engine's
 * end, and the databases record when), then the databases' own work, and PostgreSQL last. */
const STOP_ORDER = ['api', 'engine', 'disk', 'databases', 'admin', 'supervisor'] as const;
type Part = (typeof STOP_ORDER)[number];

/**
 * The runtime's one teardown, for a start that fails part way and for stop() alike: each part adds its
 * stop once its start has begun, and run() stops what was added, in STOP_ORDER, once.
 */
class Teardown {
  private readonly stops = new Map<Part, () => Promise<void>>();

  add(part: Part, stop: () => Promise<void>): void {
    this.stops.set(part, stop);
  }

  async run(): Promise<void> {
    for (const part of STOP_ORDER) {
      const stop = this.stops.get(part);
      this.stops.delete(part);
      await stop?.();
    }
  }
}

/** The roles from the config, the admin's password (scram, or when configured) and a kept API token. */
async function prepareLogins(config: RuntimeConfig, plan: StartPlan, credentials: RoleCredentials, logger: Logger): Promise<{ adminLogin: AdminPassword | null; token: string | null; tokenFile: string | null }> {
  await credentials.ensureUsers(config.users, logger);
  let adminLogin: AdminPassword | null = null;
  const configured = config.users.find((u) => u.name === ADMIN_ROLE)?.password;
  if (plan.auth === 'scram' || configured !== undefined) {
    adminLogin = await adminPassword(plan.dataDir, configured);
    await credentials.setAdminPassword(adminLogin.password);
  }
  if (config.apiPort !== null && plan.token === null && plan.auth === 'scram') {
    const kept = await keptApiToken(plan.dataDir);
    return { adminLogin, token: kept.token, tokenFile: kept.file };
  }
  return { adminLogin, token: plan.token, tokenFile: null };
}

/** Starts PostgreSQL and the engine; used by `pgx start` and by tests. */
export async function startRuntime(config: RuntimeConfig, logger: Logger, control?: ControlFunctions): Promise<RunningRuntime> {
  const plan = await planStart(config, logger);
  const { dataDir, binaries, socketDir, auth, certificate, databaseSettings } = plan;
  const teardown = new Teardown();
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
    mintPrefix: databaseSettings.prefix,
    clock: systemClock,
    osUser: plan.osUser,
    restartGate: (signal) => disk.roomToRestart(signal),
  });
  await disk.releaseIfLow();
  // A failed start stops what it started itself.
  await supervisor.start();
  teardown.add('supervisor', () => supervisor.stop());
  const admin = new AdminConnection(() => supervisor.connect('postgres', 'postgres'));
  teardown.add('admin', () => admin.close());
  // `databases` is made below; logins reach this only once both exist.
  const credentials = new RoleCredentials(() => admin.get(), (role) => databases.isCredential(role), logger.child({ component: 'auth' }));
  let databases: DisposableDatabases;
  let engine: Engine;
  let engineListening = false;
  let listeners: ApiListeners | null = null;
  let logins: Awaited<ReturnType<typeof prepareLogins>>;
  try {
    logins = await prepareLogins(config, plan, credentials, logger);
    const storage = await probeStorage(dataDir).catch(
      (err: unknown): StorageCapability => ({ filesystem: 'unknown', clone: false, detail: `the clone probe failed (${(err as Error).message}); databases are copied, not cloned` }),
    );
    if (storage.clone) logger.info('storage', { ...storage, dataDir });
    else logger.warn('storage-without-clones', { ...storage, dataDir });
    const memory = await memoryLimitSettings(config, logger);
    databases = new DisposableDatabases({
      connect: (database, user = 'postgres', settings) => supervisor.connect(database, user, settings),
      storage,
      postgres: { socketDir, port: PG_PORT, dataDir },
      removeAsOsUser: (dir) => supervisor.removeAsOsUser(dir),
      // The engine is constructed below; the databases call these only after start(), when it exists.
      engine: {
        terminateSessions: (database, message, hint) => engine.terminateSessions(database, message, hint),
        sessionsPerDatabase: () => engine.sessionsPerDatabase(),
        closeIdleBackends: (database) => engine.closeIdleBackends(database),
        loginBaselineSql: settingsRowsSql,
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
    engine = new Engine(engineOptions(config, plan, { memory, credentials, databases, control, postgresReady: () => supervisor.state === 'ready' }, logger));
    teardown.add('engine', async () => {
      engineListening = false;
      await engine.stop();
    });
    teardown.add('disk', () => disk.stop());
    teardown.add('databases', () => databases.stop());
    await disk.start();
    // Records loaded and reconciled before the first client is routed.
    await databases.start();
    await engine.start();
    engineListening = true;
    if (config.apiPort !== null || config.metricsPort !== null) {
      const engineHost = hostForUrl(reachableHost(config.host));
      listeners = await startApi({
        host: config.apiHost,
        port: config.apiPort,
        metrics: config.metricsPort === null ? null : { host: config.metricsHost ?? config.apiHost, port: config.metricsPort },
        token: logins.token,
        pool: { size: databases.poolSize, max: config.poolMax },
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
      const started = listeners;
      teardown.add('api', () => started.stop());
    }
  } catch (err) {
    await teardown.run();
    throw err;
  }
  const api = listeners?.api ?? null;
  const metricsListener = listeners?.metrics ?? null;
  logger.info('runtime ready', {
    port: engine.port, socketDir: config.socketDir, dataDir, pg: binaries.version, auth,
    ...(api ? { apiPort: api.port } : {}), ...(metricsListener ? { metricsPort: metricsListener.port } : {}),
  });
  return {
    ...(api ? { api: { port: api.port } } : {}),
    ...(metricsListener ? { metrics: { port: metricsListener.port } } : {}),
    engine,
    databases: databases.operations,
    disposableDatabases: databases,
    supervisor,
    pgVersion: binaries.version,
    adminPasswordSource: logins.adminLogin?.source ?? null,
    apiTokenFile: logins.tokenFile,
    auth,
    reloadTls: () => certificate?.reload() ?? false,
    async stop() {
      await teardown.run();
      logger.info('stopped');
    },
  };
}

/** What the engine is given beyond the config: the parts that fill its ports. */
interface EngineParts {
  memory: MemorySettings;
  credentials: RoleCredentials;
  databases: DisposableDatabases;
  /** A control port of the caller's (tests); absent: the databases' own. */
  control: ControlFunctions | undefined;
  /** PostgreSQL answers: new clients are refused (57P03) while it does not. */
  postgresReady: () => boolean;
}

/** The engine's options: listeners, limits, and the databases' parts as its ports. */
function engineOptions(config: RuntimeConfig, plan: StartPlan, parts: EngineParts, logger: Logger): EngineOptions {
  const { certificate } = plan;
  const { memory, credentials, databases, control } = parts;
  return {
    host: config.host,
    port: config.port,
    socketDir: config.socketDir,
    backend: { socketDir: plan.socketDir, port: PG_PORT },
    backendStatus: { accepting: parts.postgresReady },
    credentials,
    mockAuthSecret: authSecret(plan.dataDir),
    auth: plan.auth,
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
  };
}
