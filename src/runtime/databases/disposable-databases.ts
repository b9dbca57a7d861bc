// Disposable databases: the parts made and wired together, and their life (start, stop). What the
// engine sees is a part per port, each implementing it (engine/ports.ts): `router` (router.ts: mint on
// connect), `sessions` (session-observer.ts: the janitor's grace clock), `control` (control-functions.ts:
// the pgx_* SQL functions); the HTTP API gets `operations` (operations.ts). Behind them: the registry
// and pgx_control metadata, the minter and its queue, the warm pool, templates, the janitor. A drop
// takes the database's unkept snapshots with it (dropSnapshotsOf).

import type { Clock } from '../../clock.js';
import type { ControlFunctions } from '../../engine/ports.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import type { DiskRoom } from '../postgres/disk-guard.js';
import { removeOrphanedDatabaseFiles } from '../postgres/orphaned-files.js';
import { CATALOG_ONLY, type SessionSettings, type SqlClient } from '../postgres/sql-client.js';
import type { StorageCapability } from '../postgres/storage-probe.js';
import type { MemoryLimitsStatus } from '../status.js';
import { installExtensionGuard } from '../templates/extension-guard.js';
import { TemplateImports } from '../templates/import.js';
import { Snapshots } from '../templates/snapshots.js';
import { Templates } from '../templates/templates.js';
import { DatabaseCommands } from './commands.js';
import { controlFunctions, controlHandlers } from './control-functions.js';
import { Counters } from './counters.js';
import { CLONE_FILES_SQL, closeAllToPublicSql, unmarkSnapshotsSql } from './create-database.js';
import { DatabaseCredentials } from './credentials.js';
import { Dropper, type EngineSessions } from './dropper.js';
import { Janitor, type JanitorTask } from './janitor.js';
import { dropStaleSparesTask, flushCountersTask, lifecycleTasks, type LifecycleOptions } from './janitor-tasks.js';
import { Lifecycle } from './lifecycle.js';
import { MetadataStore } from './metadata.js';
import { Minter } from './mint.js';
import { MintQueue } from './mint-queue.js';
import { CONTROL_DATABASE, isReservedName, prefixProblem, SPARE_PREFIX } from './names.js';
import { DatabaseOperations } from './operations.js';
import { Permissions } from './permissions.js';
import { LoginTriggers } from './login-triggers.js';
import { reconcile } from './reconcile.js';
import { Registry } from './registry.js';
import { MintRouter } from './router.js';
import { SessionTracker } from './session-observer.js';
import { DEFAULT_DATABASE_SETTINGS, poolSizeFor, type DatabaseSettings } from './settings.js';
import { Tombstones } from './tombstones.js';
import { Trash } from './trash.js';
import { ActivityVacuum } from './vacuum.js';
import { WarmPool } from './warm-pool.js';
import { CatalogPrefetch, clonesStartCold } from './catalog-prefetch.js';

export interface DisposableDatabasesOptions {
  /** A connection to the named database over PostgreSQL's private socket, as `user` (default postgres). */
  connect: (database: string, user?: string, settings?: SessionSettings) => Promise<SqlClient>;
  /** The engine's session table: end sessions on a database, count sessions per database. */
  engine: EngineSessions;
  settings?: Partial<DatabaseSettings>;
  /** What the data directory's filesystem can do (storage-probe.ts). */
  storage: StorageCapability;
  /** PostgreSQL's private socket and data directory, for the client tools of an import. */
  postgres: { socketDir: string; port: number; dataDir: string };
  /** Removes a directory under the data directory with the rights of PostgreSQL's OS user (Supervisor.removeAsOsUser). */
  removeAsOsUser: (dir: string) => Promise<void>;
  /** PGX's version, and PostgreSQL's, for the status document. */
  version: string;
  postgresVersion: string;
  /** The postmaster's pid, while it runs. */
  postgresPid: () => number | undefined;
  /** Memory limits in force and what they did, for the status document; absent: none configured. */
  memoryLimits?: () => MemoryLimitsStatus;
  /** Free space on the data filesystem (disk-guard.ts): new work is refused with 53100 when low. Absent: not watched. */
  disk?: DiskRoom;
  clock: Clock;
  logger: Logger;
}

export class DisposableDatabases {
  readonly settings: DatabaseSettings;
  /** The engine's Router. */
  readonly router: MintRouter;
  /** The engine's SessionObserver. */
  readonly sessions: SessionTracker;
  /** The engine's ControlFunctions. */
  readonly control: ControlFunctions;
  /** What the HTTP API calls. */
  readonly operations: DatabaseOperations;
  private readonly lifecycle = new Lifecycle();
  private readonly registry = new Registry();
  private readonly counters = new Counters();
  private readonly metadata: MetadataStore;
  private readonly permissions: Permissions;
  private readonly queue: MintQueue;
  /** The connection warm claims run on (mint.ts). */
  private readonly claims: AdminConnection;
  /** Whether a warm mint's login may go out beside its claim (login-triggers.ts). */
  private readonly loginTriggers = new LoginTriggers();
  private readonly pool: WarmPool;
  private readonly minter: Minter;
  private readonly dropper: Dropper;
  private readonly trash: Trash;
  private readonly prefetch: CatalogPrefetch | null;
  private readonly janitor: Janitor;
  private readonly credentials: DatabaseCredentials;
  private readonly vacuum: ActivityVacuum;
  private readonly tombstones: Tombstones;
  private readonly templates: Templates;
  private readonly snapshots: Snapshots;
  /** Unrecorded databases under the prefix reconcile has logged as not adopted. */
  private readonly notAdopted = new Set<string>();
  /** Scratch databases (template builds, restores) in progress: reconcile leaves them alone. */
  private readonly scratches = new Set<string>();
  private readonly log: Logger;

  /** Admin connections it holds at most: size PostgreSQL's max_connections with this on top. */
  static adminConnections(settings: Partial<DatabaseSettings> = {}): number {
    // metadata + pool refill + dropper + trash + warm claims + a seal's VACUUM connection, and the mint workers.
    return 6 + (settings.mintWorkers ?? DEFAULT_DATABASE_SETTINGS.mintWorkers);
  }

  constructor(private readonly opts: DisposableDatabasesOptions) {
    const s = (this.settings = { ...DEFAULT_DATABASE_SETTINGS, ...opts.settings });
    const problem = prefixProblem(s.prefix);
    if (problem !== null) throw new PgxError('CONFIG_INVALID', `--prefix ${s.prefix}: ${problem}`, { hint: 'Use a prefix like tdb_ (the default).' });
    const { clock, connect, disk } = opts;
    // The runtime's own statements in tenants' databases, templates and spares (CATALOG_ONLY).
    const inside = (database: string): Promise<SqlClient> => connect(database, undefined, CATALOG_ONLY);
    const log = (this.log = opts.logger);
    const startedAt = clock.monotonic();
    // The connections that run CREATE DATABASE: with clones, FILE_COPY clones files instead of copying.
    const control = async (): Promise<SqlClient> => {
      const client = await connect(CONTROL_DATABASE);
      if (opts.storage.clone) await client.query(CLONE_FILES_SQL);
      return client;
    };
    const { registry, counters, lifecycle } = this;
    const metadata = (this.metadata = new MetadataStore(connect, log));
    const permissions = (this.permissions = new Permissions(() => metadata.client(), s.mintRoles));
    // Where a clone starts with a cold page cache, each spare's catalogs are read before a client claims it.
    const prefetch = (this.prefetch = opts.storage.clone && clonesStartCold(opts.storage.filesystem) ? new CatalogPrefetch(() => connect(CONTROL_DATABASE), () => registry.readySpares(), log) : null);
    const queue = (this.queue = new MintQueue({ workers: s.mintWorkers, keepOpen: s.mintWorkersIdle, maxQueued: s.mintQueueSize, waitTimeoutMs: s.mintTimeoutSeconds * 1000, connect: control, clock }));
    const pool = (this.pool = new WarmPool({ size: poolSizeFor(s.poolSize, opts.storage.clone), max: s.poolMax, idleMs: s.poolIdleSeconds * 1000, spareWaitMs: s.spareWaitMs, clones: opts.storage.clone, freeBytes: () => (disk ? disk.status().free_mb * 2 ** 20 : null), connect: control, connectTo: inside, registry, metadata, counters, mintsWaiting: () => queue.queued > 0, hasRoom: () => disk?.hasRoom() ?? true, loginTriggers: this.loginTriggers, atRest: prefetch ? () => prefetch.atRest() : undefined, clock, logger: log }));
    disk?.onRoom(() => pool.kick());
    this.claims = new AdminConnection(control);
    const minter = (this.minter = new Minter({
      maxDatabases: s.maxDatabases,
      maxDatabasesPerRole: s.maxDatabasesPerRole,
      registry,
      metadata,
      pool,
      queue,
      claims: this.claims,
      loginTriggers: this.loginTriggers,
      permissions,
      counters,
      ...(disk ? { disk } : {}),
      ...(opts.engine.loginBaselineSql ? { loginBaselineSql: opts.engine.loginBaselineSql } : {}),
      clock,
      logger: log,
    }));
    const credentials = (this.credentials = new DatabaseCredentials({ connect: inside, metadata, logger: log.child({ component: 'credentials' }) }));
    const tombstones = (this.tombstones = new Tombstones(metadata, s.tombstoneSeconds * 1000, clock));
    const trash = (this.trash = new Trash({ connect: () => connect(CONTROL_DATABASE), clones: opts.storage.clone, mintsInFlight: () => queue.pending > 0, hasRoom: () => disk?.hasRoom() ?? true, idleCloseMs: s.dropConnectionIdleMs, counters, clock, logger: log }));
    const inPlace = (name: string): boolean => credentials.rolesOf(name).length > 0;
    const dropper = (this.dropper = new Dropper(control, registry, metadata, opts.engine, log, async (name, tombstone) => {
      this.vacuum.forget(name);
      await credentials.databaseDropped(name);
      if (tombstone !== null) await tombstones.bury(name, tombstone);
      await this.dropSnapshotsOf(name);
    }, { trash, inPlace }, s.dropConnectionIdleMs));
    this.router = new MintRouter({ prefix: s.prefix, lifecycle, registry, credentials, dropper, tombstones, minter, permissions, clock });
    const pg = opts.postgres;
    const imports = new TemplateImports({ socketDir: pg.socketDir, port: pg.port, workDir: pg.dataDir, connectAs: (db, user) => connect(db, user) }, clock, log.child({ component: 'import' }));
    const snapshots = (this.snapshots = new Snapshots({
      prefix: s.prefix,
      connect: control,
      registry,
      metadata,
      permissions,
      engine: opts.engine,
      holdConnects: (db, work) => this.router.holdConnects(db, work),
      scratches: this.scratches,
      replaced: (db, owner) => credentials.databaseReplaced(db, owner, registry.databases.has(db)),
      retention: s.snapshotRetention,
      maxDatabasesPerRole: s.maxDatabasesPerRole,
      dropSnapshot: (name) => templates.drop(name, 'postgres', true),
      clock,
      logger: log,
    }));
    const templates = (this.templates = new Templates({ prefix: s.prefix, connect: inside, registry, scratches: this.scratches, metadata, permissions, pool, engine: opts.engine, allowedExtensions: s.allowedExtensions, clock, logger: log }));
    this.sessions = new SessionTracker({ registry, metadata, idle: (db) => this.vacuum.touch(db), clock, logger: log });
    this.vacuum = new ActivityVacuum({
      connect: inside,
      shared: () => metadata.client(),
      exists: (db) => !isReservedName(db) && !registry.sealedTemplate(db),
      busy: () => this.sessions.counts.busy(),
      intervalMs: s.vacuumDelayMs,
      batch: s.janitorBatch,
      clock,
      logger: log.child({ component: 'vacuum' }),
    });
    const commands = new DatabaseCommands({ prefix: s.prefix, registry, metadata, permissions, sessions: this.sessions.counts, dropper, clock });
    this.janitor = new Janitor({ intervalMs: s.janitorIntervalMs, tasks: this.janitorTasks(), clock, logger: log.child({ component: 'janitor' }) });
    this.operations = new DatabaseOperations({
      prefix: s.prefix,
      lifecycle,
      registry,
      metadata,
      minter,
      dropper,
      tombstones,
      templates,
      snapshots,
      commands,
      credentials,
      imports,
      counters,
      janitor: this.janitor,
      pool,
      sessions: this.sessions.counts,
      connect,
      storage: opts.storage,
      dataDir: opts.postgres.dataDir,
      disk,
      version: opts.version,
      postgresVersion: opts.postgresVersion,
      postgresPid: opts.postgresPid,
      memoryLimits: opts.memoryLimits,
      startedAt,
      clock,
      logger: log,
    });
    this.control = controlFunctions(controlHandlers({ permissions, templates, commands, snapshots, status: () => this.operations.status(), templatesWithUse: () => this.operations.listTemplatesWithUse(), disk }));
  }

  /** Opens pgx_control, loads the records, reconciles them with the cluster, starts janitor and pool. */
  async start(): Promise<void> {
    if (this.lifecycle.state !== 'new') return;
    this.lifecycle.state = 'starting';
    try {
      await this.load();
    } catch (err) {
      this.lifecycle.state = 'new';
      throw err;
    }
    this.lifecycle.state = 'running';
    this.janitor.start();
    this.trash.start();
    this.pool.start();
    this.log.info('disposable-databases-ready', {
      prefix: this.settings.prefix,
      templates: [...this.registry.templates.values()].filter((t) => t.sealed).length,
      databases: this.registry.databases.size,
      spares: this.registry.spares.size,
      poolSize: this.pool.size,
    });
  }

  /** Spares kept per sealed template: --pool-size, with auto resolved by the filesystem (poolSizeFor). */
  get poolSize(): number {
    return this.pool.size;
  }

  /** Stops janitor, pool and mints (waiting ones get 57P03), writes what is pending, closes connections. */
  async stop(): Promise<void> {
    if (this.lifecycle.state === 'stopped' || this.lifecycle.state === 'stopping') return;
    this.lifecycle.state = 'stopping';
    this.dropper.stopAccepting(); // the janitor's pass ends after the drop it is in
    await this.janitor.stop();
    await this.queue.stop();
    await this.claims.close();
    await this.pool.stop();
    await this.prefetch?.stop();
    await this.metadata.flush().catch(() => undefined); // each write logs its own failure
    await this.sessions.flushed();
    await flushCountersTask(this.counters, this.metadata).run().catch((err: unknown) => this.log.warn('counters-not-saved', { err }));
    await this.dropper.close();
    await this.trash.stop();
    await this.metadata.close();
    this.lifecycle.state = 'stopped';
  }

  /** A minted database's own memory limit in MB; undefined: the runtime's --database-memory-limit applies. */
  memoryLimitMb(database: string): number | undefined {
    return this.registry.databases.get(database)?.memoryLimitMb ?? undefined;
  }

  /** Whether `role` is a per-database credential this runtime recorded (for the login check). */
  isCredential(role: string): boolean {
    return this.credentials.databaseOf(role) !== undefined;
  }

  private async load(): Promise<void> {
    const { metadata, registry } = this;
    const { clock } = this.opts;
    await metadata.open();
    await this.permissions.ensureMintersGroup();
    // Databases made with a plain CREATE DATABASE copy template1: they get the extension allow-list too.
    const template1 = await this.opts.connect('template1');
    try {
      await installExtensionGuard(template1, this.settings.allowedExtensions);
    } finally {
      await template1.close();
    }
    const [templates, databases, counters] = [await metadata.loadTemplates(), await metadata.loadDatabases(), await metadata.loadCounters()];
    registry.load(templates, databases);
    // Sessions open when the last runtime stopped (or died) ended with it: their grace starts now.
    await metadata.saveDatabases(databases.filter((d) => d.inUse).map((open) => registry.update(open.name, { inUse: false, lastSessionEnd: clock.now() })!));
    this.counters.load(counters);
    await this.tombstones.load();
    await this.reconcile();
    // Minted databases and spares are closed to PUBLIC when made, and snapshots sealed without
    // IS_TEMPLATE; this does both for those made by an older runtime.
    await (await metadata.client()).query(closeAllToPublicSql(this.settings.prefix, SPARE_PREFIX));
    const snapshots = [...registry.templates.values()].filter((t) => t.snapshotOf !== null).map((t) => t.name);
    if (snapshots.length > 0) await (await metadata.client()).query(unmarkSnapshotsSql(snapshots));
    // Nothing creates a database yet: a directory under base/ that pg_database does not name is the
    // leftover of a CREATE DATABASE that PostgreSQL did not survive (e.g. a PANIC on a full disk).
    await removeOrphanedDatabaseFiles(this.opts.postgres.dataDir, await this.metadata.client(), this.log, this.opts.removeAsOsUser);
    await this.credentials.load();
  }

  /**
   * A database PGX dropped takes its snapshots with it, those taken with keep excepted. A snapshot
   * that cannot be dropped now stays (logged); it can be dropped by hand (pgx_drop_template).
   */
  private async dropSnapshotsOf(database: string): Promise<void> {
    for (const snapshot of this.snapshots.ownedBy(database)) {
      await this.templates
        .drop(snapshot.name, 'postgres', true)
        .then(() => this.log.info('snapshot-dropped-with-database', { database, snapshot: snapshot.name }))
        .catch((err: unknown) => this.log.warn('snapshot-not-dropped', { database, snapshot: snapshot.name, err }));
    }
  }

  private reconcile(): Promise<number> {
    return reconcile({
      prefix: this.settings.prefix,
      registry: this.registry,
      metadata: this.metadata,
      reported: this.notAdopted,
      busy: (name) => this.minter.isMinting(name) || this.pool.isBusy(name) || this.scratches.has(name) || this.dropper.dropping(name) !== undefined,
      trash: (name) => this.trash.add(name),
      clock: this.opts.clock,
      logger: this.log,
    });
  }

  private janitorTasks(): JanitorTask[] {
    const s = this.settings;
    const lifecycle: LifecycleOptions = {
      prefix: s.prefix,
      graceMs: s.graceSeconds * 1000,
      protectMs: s.protectSeconds * 1000,
      batch: s.janitorBatch,
      registry: this.registry,
      sessions: this.sessions.counts,
      engine: this.opts.engine,
      dropper: this.dropper,
      counters: this.counters,
      clock: this.opts.clock,
      logger: this.log,
    };
    let lastReconcile = this.opts.clock.monotonic();
    return [
      ...lifecycleTasks(lifecycle),
      dropStaleSparesTask(lifecycle),
      {
        name: 'reconcile',
        run: async () => {
          if (this.opts.clock.monotonic() - lastReconcile < s.reconcileIntervalMs) return 0;
          lastReconcile = this.opts.clock.monotonic();
          return this.reconcile();
        },
      },
      this.vacuum.task(),
      this.tombstones.task(s.janitorBatch),
      flushCountersTask(this.counters, this.metadata),
    ];
  }
}
