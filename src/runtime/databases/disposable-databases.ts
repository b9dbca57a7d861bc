// Disposable databases: the one object the CLI wires into the engine. It is the engine's Router (mint
// on connect), SessionObserver (the janitor's grace clock) and ControlFunctions (pgx_* SQL functions),
// implemented structurally: runtime/ never imports engine/. Behind it: the registry and pgx_control
// metadata, the minter and its queue, the warm pool, templates, the janitor and the status document.

import { randomBytes } from 'node:crypto';
import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import { Counters } from './counters.js';
import { checkConnectionLimit, checkMemoryLimit, checkTtl, DatabaseCommands } from './commands.js';
import { DEFAULT_DATABASE_SETTINGS, type DatabaseSettings } from './settings.js';
import { credentialDenied, DatabaseCredentials, PREPARED_OWNER, type Credential } from './credentials.js';
import { Dropper, type EngineSessions } from './dropper.js';
import { Janitor, type JanitorTask } from './janitor.js';
import { dropIdleTask, dropStaleSparesTask, expireTtlTask, flushCountersTask, type LifecycleOptions } from './janitor-tasks.js';
import { MetadataStore } from './metadata.js';
import { Minter } from './mint.js';
import { MintQueue } from './mint-queue.js';
import {
  BUILD_PREFIX,
  CONTROL_DATABASE,
  databaseDoesNotExist,
  MAX_NAME_BYTES,
  mintNameProblem,
  isReservedName,
  isUnderPrefix,
  parseMintName,
  prefixProblem,
  SPARE_PREFIX,
} from './names.js';
import { functionDenied, Permissions } from './permissions.js';
import type { DatabaseRecord, InitialSettings, TemplateRecord } from './records.js';
import { Tombstones } from './tombstones.js';
import { reconcile } from './reconcile.js';
import { Registry } from './registry.js';
import { SessionCounts } from './session-counts.js';
import { Snapshots } from '../templates/snapshots.js';
import { ActivityVacuum } from './vacuum.js';
import { quoteLiteral, type SqlClient } from '../postgres/sql-client.js';
import { measureTree, type TreeMemory } from '../postgres/memory.js';
import type { StorageCapability } from '../postgres/storage-probe.js';
import { CLONE_FILES_SQL, closeAllToPublicSql } from './create-database.js';
import { runtimeStatus, type MemoryLimitsStatus, type RuntimeStatus } from '../status.js';
import { runScript } from '../templates/script-build.js';
import { TemplateImports, type ImportJob, type ImportRequest } from '../templates/import.js';
import { Templates, type BuildRequest } from '../templates/templates.js';
import { WarmPool } from './warm-pool.js';
import { installExtensionGuard } from '../templates/extension-guard.js';
import type { DiskRoom } from '../postgres/disk-guard.js';
import { removeOrphanedDatabaseFiles } from '../postgres/orphaned-files.js';

/** How long a reading of the process tree's memory serves the status document. */
const MEMORY_SAMPLE_MS = 1000;

/** The engine's Caller and ControlFunction, restated here because runtime/ does not import engine/. */
export interface Caller {
  user: string;
  database: string;
}

/** The engine's Route: a database's own session cap, when it has one. */
export interface Route {
  maxSessions?: number | null;
}

export type ControlFunction =
  | 'runtime_status'
  | 'seal_template'
  | 'unseal_template'
  | 'pin_database'
  | 'unpin_database'
  | 'drop_database'
  | 'drop_template'
  | 'snapshot_database'
  | 'restore_database';

export interface DisposableDatabasesOptions {
  /** A connection to the named database over PostgreSQL's private socket, as `user` (default postgres). */
  connect: (database: string, user?: string) => Promise<SqlClient>;
  /** The engine's session table: end sessions on a database, count sessions per database. */
  engine: EngineSessions;
  settings?: Partial<DatabaseSettings>;
  /** What the data directory's filesystem can do (storage-probe.ts). */
  storage: StorageCapability;
  /** PostgreSQL's private socket and data directory, for the client tools of an import. */
  postgres: { socketDir: string; port: number; dataDir: string };
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

type State = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

const RESOLVED = Promise.resolve();

export class DisposableDatabases {
  readonly settings: DatabaseSettings;
  private state: State = 'new';
  private readonly registry = new Registry();
  private readonly counters = new Counters();
  private readonly metadata: MetadataStore;
  private readonly permissions: Permissions;
  private readonly queue: MintQueue;
  /** The connection warm claims run on (mint.ts). */
  private readonly claims: AdminConnection;
  private memorySample: { at: number; value: Promise<TreeMemory> } | null = null;
  private readonly pool: WarmPool;
  private readonly minter: Minter;
  private readonly templates: Templates;
  private readonly dropper: Dropper;
  private readonly sessions: SessionCounts;
  private readonly janitor: Janitor;
  private readonly commands: DatabaseCommands;
  private readonly credentials: DatabaseCredentials;
  private readonly snapshots: Snapshots;
  private readonly vacuum: ActivityVacuum;
  private readonly imports: TemplateImports;
  private readonly tombstones: Tombstones;
  /** Unrecorded databases under the prefix reconcile has logged as not adopted. */
  private readonly notAdopted = new Set<string>();
  /** Scratch databases (template builds, restores) in progress: reconcile leaves them alone. */
  private readonly scratches = new Set<string>();
  /** Databases whose new connects wait (a snapshot or restore in progress), until the promise settles. */
  private readonly held = new Map<string, Promise<unknown>>();
  /** Metadata writes not awaited by their caller (session transitions); stop() waits for them. */
  private readonly writes = new Set<Promise<void>>();
  private readonly startedAt: number;
  private readonly log: Logger;

  /** Admin connections it holds at most: size PostgreSQL's max_connections with this on top. */
  static adminConnections(settings: Partial<DatabaseSettings> = {}): number {
    // metadata + pool refill + dropper + warm claims + a seal's VACUUM connection, and the mint workers.
    return 5 + (settings.mintWorkers ?? DEFAULT_DATABASE_SETTINGS.mintWorkers);
  }

  constructor(private readonly opts: DisposableDatabasesOptions) {
    const s = (this.settings = { ...DEFAULT_DATABASE_SETTINGS, ...opts.settings });
    const problem = prefixProblem(s.prefix);
    if (problem !== null) throw new PgxError('CONFIG_INVALID', `--prefix ${s.prefix}: ${problem}`, { hint: 'Use a prefix like tdb_ (the default).' });
    const { clock, connect } = opts;
    const log = (this.log = opts.logger);
    this.startedAt = clock.monotonic();
    // The connections that run CREATE DATABASE: with clones, FILE_COPY clones files instead of copying.
    const control = async (): Promise<SqlClient> => {
      const client = await connect(CONTROL_DATABASE);
      if (opts.storage.clone) await client.query(CLONE_FILES_SQL);
      return client;
    };
    this.metadata = new MetadataStore(connect, log);
    this.permissions = new Permissions(() => this.metadata.client(), s.mintRoles);
    this.queue = new MintQueue({ workers: s.mintWorkers, maxQueued: s.mintQueueSize, waitTimeoutMs: s.mintTimeoutSeconds * 1000, connect: control });
    const { registry, counters, metadata, permissions, queue } = this;
    const disk = opts.disk;
    this.pool = new WarmPool({ size: s.poolSize, connect: control, connectTo: (db) => connect(db), registry, metadata, counters, mintsWaiting: () => queue.queued > 0, hasRoom: () => disk?.hasRoom() ?? true, clock, logger: log });
    disk?.onRoom(() => this.pool.kick());
    this.claims = new AdminConnection(control);
    this.minter = new Minter({
      maxDatabases: s.maxDatabases,
      maxDatabasesPerRole: s.maxDatabasesPerRole,
      registry,
      metadata,
      pool: this.pool,
      queue,
      claims: this.claims,
      permissions,
      counters,
      ...(disk ? { disk } : {}),
      clock,
      logger: log,
    });
    this.credentials = new DatabaseCredentials({ connect, metadata, logger: log.child({ component: 'credentials' }) });
    this.tombstones = new Tombstones(metadata, s.tombstoneSeconds * 1000, clock);
    this.dropper = new Dropper(control, registry, metadata, opts.engine, log, async (name, tombstone) => {
      this.vacuum.forget(name);
      await this.credentials.databaseDropped(name);
      if (tombstone !== null) await this.tombstones.bury(name, tombstone);
    });
    const pg = opts.postgres;
    this.imports = new TemplateImports({ socketDir: pg.socketDir, port: pg.port, workDir: pg.dataDir, connectAs: (db, user) => connect(db, user) }, clock, log.child({ component: 'import' }));
    this.snapshots = new Snapshots({
      prefix: s.prefix,
      connect: control,
      registry,
      metadata,
      permissions,
      engine: opts.engine,
      storage: opts.storage,
      holdConnects: (db, work) => this.holdConnects(db, work),
      scratches: this.scratches,
      replaced: (db, owner) => this.credentials.databaseReplaced(db, owner, this.registry.databases.has(db)),
      clock,
      logger: log,
    });
    this.templates = new Templates({ prefix: s.prefix, connect, registry, storage: opts.storage, scratches: this.scratches, metadata, permissions, pool: this.pool, engine: opts.engine, allowedExtensions: s.allowedExtensions, clock, logger: log });
    this.vacuum = new ActivityVacuum({
      connect: (db) => connect(db),
      shared: () => this.metadata.client(),
      exists: (db) => !isReservedName(db) && !registry.sealedTemplate(db),
      busy: () => this.sessions.busy(),
      intervalMs: s.vacuumDelayMs,
      batch: s.janitorBatch,
      clock,
      logger: log.child({ component: 'vacuum' }),
    });
    this.sessions = new SessionCounts({ busy: (db) => this.onBusy(db), idle: (db) => this.onIdle(db) });
    this.commands = new DatabaseCommands({ prefix: s.prefix, registry, metadata, permissions, sessions: this.sessions, dropper: this.dropper, clock });
    this.janitor = new Janitor({ intervalMs: s.janitorIntervalMs, tasks: this.janitorTasks(), clock, logger: log.child({ component: 'janitor' }) });
  }

  // --- lifecycle -----------------------------------------------------------------------------------

  /** Opens pgx_control, loads the records, reconciles them with the cluster, starts janitor and pool. */
  async start(): Promise<void> {
    if (this.state !== 'new') return;
    this.state = 'starting';
    try {
      await this.load();
    } catch (err) {
      this.state = 'new';
      throw err;
    }
    this.state = 'running';
    this.janitor.start();
    this.pool.kick();
    this.log.info('disposable-databases-ready', {
      prefix: this.settings.prefix,
      templates: [...this.registry.templates.values()].filter((t) => t.sealed).length,
      databases: this.registry.databases.size,
      spares: this.registry.spares.size,
    });
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
    for (const open of databases.filter((d) => d.inUse)) {
      await metadata.saveDatabase(registry.update(open.name, { inUse: false, lastSessionEnd: clock.now() })!);
    }
    this.counters.load(counters);
    await this.tombstones.load();
    await this.reconcile();
    // Minted databases and spares are closed to PUBLIC when made; this closes those made before.
    await (await metadata.client()).query(closeAllToPublicSql(this.settings.prefix, SPARE_PREFIX));
    // Nothing creates a database yet: a directory under base/ that pg_database does not name is the
    // leftover of a CREATE DATABASE that PostgreSQL did not survive (e.g. a PANIC on a full disk).
    await removeOrphanedDatabaseFiles(this.opts.postgres.dataDir, await this.metadata.client(), this.log);
    await this.credentials.load();
  }

  /** Stops janitor, pool and mints (waiting ones get 57P03), writes what is pending, closes connections. */
  async stop(): Promise<void> {
    if (this.state === 'stopped' || this.state === 'stopping') return;
    this.state = 'stopping';
    this.dropper.stopAccepting(); // the janitor's pass ends after the drop it is in
    await this.janitor.stop();
    await this.queue.stop();
    await this.claims.close();
    await this.pool.stop();
    await this.metadata.flush().catch(() => undefined); // each write logs its own failure
    await Promise.all([...this.writes]);
    await flushCountersTask(this.counters, this.metadata).run().catch((err: unknown) => this.log.warn('counters-not-saved', { err }));
    await this.dropper.close();
    await this.metadata.close();
    this.state = 'stopped';
  }

  // --- Router --------------------------------------------------------------------------------------

  /**
   * Resolves when `database` can be connected to: at once for names outside the prefix (PostgreSQL
   * answers 3D000 itself if absent), after minting it for a new name under the prefix. PGX's own
   * databases (pgx_control, spares) are refused as if they did not exist.
   */
  route(caller: Caller): Promise<Route | void> {
    const held = this.held.get(caller.database);
    if (held) return held.then(() => this.route(caller));
    if (isReservedName(caller.database)) return Promise.reject(databaseDoesNotExist(caller.database));
    // A per-database credential reaches its own database only (and never mints one).
    const home = this.credentials.databaseOf(caller.user);
    if (home !== undefined && home !== caller.database) return Promise.reject(credentialDenied(caller.database));
    if (!isUnderPrefix(caller.database, this.settings.prefix)) return RESOLVED;
    return this.routeMinted(caller.database, caller.user);
  }

  private async routeMinted(database: string, user: string): Promise<Route | void> {
    const name = parseMintName(database, this.settings.prefix);
    if (this.state !== 'running') {
      throw new PgxError('CANNOT_CONNECT_NOW', `cannot create database "${database}": the runtime is ${this.state === 'new' || this.state === 'starting' ? 'starting up' : 'shutting down'}`, {
        hint: 'Connect again in a moment.',
      });
    }
    // A name being dropped (idle, expired) is minted afresh once the drop is done.
    await this.dropper.dropping(database)?.catch(() => undefined);
    if (!this.registry.databases.has(database)) {
      const buried = this.tombstones.refusal(database);
      if (buried !== null) throw buried;
      await this.minter.mint(name, user);
    }
    else this.registry.lastRouted.set(database, this.opts.clock.now());
    const limit = this.registry.databases.get(database)?.connectionLimit ?? null;
    return limit === null ? undefined : { maxSessions: limit };
  }

  // --- SessionObserver -----------------------------------------------------------------------------

  sessionStarted(database: string): void {
    this.sessions.started(database);
  }

  sessionEnded(database: string): void {
    this.sessions.ended(database);
  }

  private onBusy(database: string): void {
    const d = this.registry.update(database, { inUse: true });
    if (d) this.persist(d);
  }

  private onIdle(database: string): void {
    this.vacuum.touch(database);
    const d = this.registry.update(database, { inUse: false, lastSessionEnd: this.opts.clock.now() });
    if (d) this.persist(d);
  }

  /** On disk soon, batched with other changes; a failed write is logged (memory rules until restart). */
  private persist(record: DatabaseRecord): void {
    const write: Promise<void> = this.metadata
      .saveDatabaseLater(record)
      .catch((err: unknown) => this.log.warn('metadata-write-failed', { database: record.name, err }))
      .finally(() => this.writes.delete(write));
    this.writes.add(write);
  }

  // --- ControlFunctions ----------------------------------------------------------------------------

  /** Runs a pgx_* control function for `caller`; the result is the function's text value. */
  async call(fn: ControlFunction, args: (string | null)[], caller: Caller): Promise<string> {
    const sqlName = `pgx_${fn}`;
    switch (fn) {
      case 'runtime_status': {
        const access = await this.permissions.access(caller.user, caller.database);
        if (!access.ownerOrSuperuser) throw functionDenied(sqlName, caller.database);
        return JSON.stringify(await this.status());
      }
      case 'seal_template':
        return (await this.templates.seal(nameArg(sqlName, args), caller.user, sqlName, caller.database)).name;
      case 'unseal_template':
        return (await this.templates.unseal(nameArg(sqlName, args), caller.user, sqlName)).name;
      case 'pin_database':
        return (await this.commands.setPinned(nameArg(sqlName, args), true, caller.user, sqlName)).name;
      case 'unpin_database':
        return (await this.commands.setPinned(nameArg(sqlName, args), false, caller.user, sqlName)).name;
      case 'drop_database':
        await this.commands.drop(nameArg(sqlName, args), caller, sqlName);
        return nameArg(sqlName, args);
      case 'drop_template': {
        const [name, force] = dropTemplateArgs(sqlName, args);
        await this.templates.drop(name, caller.user, force, sqlName);
        return name;
      }
      case 'snapshot_database': {
        const [db, name, force] = snapshotArgs(sqlName, args);
        this.opts.disk?.assertRoom(`cannot snapshot database "${db}"`);
        return (await this.snapshots.snapshot(db, name, caller, force, sqlName)).name;
      }
      case 'restore_database': {
        const [db, name, force] = snapshotArgs(sqlName, args);
        this.opts.disk?.assertRoom(`cannot restore database "${db}"`);
        await this.snapshots.restore(db, name, caller, force, sqlName);
        return db;
      }
    }
    // A function the engine learned before this runtime did.
    throw new PgxError('FEATURE_NOT_SUPPORTED', `${sqlName} is not supported by this runtime`);
  }

  // --- operations (also for the HTTP API) ----------------------------------------------------------

  /**
   * Mints a database from a sealed template for `user` (the HTTP API's POST /v1/databases): `name`
   * defaults to <prefix><template>__<random token>. A name that exists already is 42P04; a template
   * that is not sealed is 3D000; a bad name is 22023.
   */
  async create(template: string, opts: { name?: string | undefined; user: string; settings?: CreateSettings }): Promise<CreatedDatabase> {
    const started = this.opts.clock.monotonic();
    const prefix = this.settings.prefix;
    const name = opts.name ?? `${prefix}${template}__${randomToken(MAX_NAME_BYTES - Buffer.byteLength(`${prefix}${template}__`))}`;
    const problem = mintNameProblem(name, prefix);
    if (problem !== null) throw new PgxError('INVALID_PARAMETER', `name "${name}" cannot be minted: ${problem}`, { hint: validNameHintFor(prefix) });
    const parsed = parseMintName(name, prefix);
    if (parsed.template !== template) {
      throw new PgxError('INVALID_PARAMETER', `name "${name}" is minted from template "${parsed.template}", not "${template}"`, {
        hint: `Name it ${prefix}${template}__<token>, or leave the name out.`,
      });
    }
    if (this.state !== 'running') throw new PgxError('CANNOT_CONNECT_NOW', `cannot create database "${name}": the runtime is not running`, { hint: 'Try again in a moment.' });
    const initial = initialSettings(opts.settings ?? {}, this.opts.clock.now());
    if (!this.registry.sealedTemplate(template)) {
      throw databaseDoesNotExist(template, {
        hint: this.registry.templates.has(template)
          ? `Template "${template}" is unsealed; seal it again (POST /v1/templates/${template}/seal).`
          : `There is no sealed template "${template}"; create that database and seal it (POST /v1/templates/${template}/seal).`,
      });
    }
    await this.dropper.dropping(name)?.catch(() => undefined);
    const duplicate = (): PgxError => new PgxError('DUPLICATE_DATABASE', `database "${name}" already exists`, { hint: 'Pick another name, or leave the name out for a random one.' });
    if (this.registry.databases.has(name) || this.minter.isMinting(name)) throw duplicate();
    // Asking for the name again is the one way to reuse a name PGX dropped.
    await this.tombstones.clear(name);
    const outcome = await this.minter.mint(parsed, opts.user, initial);
    if (outcome === 'existing') throw duplicate();
    // The caller was promised this lifetime: on disk before the answer, not a moment later.
    await this.metadata.flush();
    return { name, template, source: outcome, mint_ms: Math.round((this.opts.clock.monotonic() - started) * 100) / 100 };
  }

  /** Templates PGX knows (sealed now or once), by name. */
  listTemplates(): TemplateRecord[] {
    return [...this.registry.templates.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** Minted databases alive (spares excluded), by name. */
  listDatabases(): DatabaseRecord[] {
    return [...this.registry.databases.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** True when PostgreSQL answers a query on the control connection (the API's /readyz). */
  async ping(): Promise<boolean> {
    if (this.state !== 'running') return false;
    await (await this.metadata.client()).query('SELECT 1');
    return true;
  }

  /** Drops template or snapshot `name` (see Templates.drop); `force` although databases were minted from it. */
  dropTemplate(name: string, user: string, force: boolean): Promise<void> {
    this.assertRunning(`cannot drop template "${name}"`);
    return this.templates.drop(name, user, force);
  }

  seal(name: string, user: string): Promise<TemplateRecord> {
    return this.templates.seal(name, user);
  }

  unseal(name: string, user: string): Promise<TemplateRecord> {
    return this.templates.unseal(name, user);
  }

  /** A template from a SQL script (see template-build.ts), sealed unless `seal` is false. */
  buildTemplate(req: ScriptBuild, user: string): Promise<TemplateRecord> {
    this.assertRunning(`cannot build template "${req.name}"`);
    this.opts.disk?.assertRoom(`cannot build template "${req.name}"`);
    const { sql, scriptName, ...rest } = req;
    const what = scriptName === undefined ? `the script for template "${req.name}"` : `${scriptName} (the script for template "${req.name}")`;
    const fill = async (database: string, owner: string): Promise<void> => {
      const run = await runScript(this.opts.connect, database, owner, sql, what);
      // A pg_dump file's owners and grants name the source's roles: left out, as pg_restore --no-owner does.
      this.log.info('template-script-ran', { template: req.name, statements: run.statements, skippedOwnershipAndPrivileges: run.skipped });
    };
    return this.templates.build({ ...rest, fill, source: 'script' }, user);
  }

  setPinned(name: string, pinned: boolean, user: string): Promise<DatabaseRecord> {
    return this.commands.setPinned(name, pinned, user);
  }

  setTtl(name: string, seconds: number | null, user: string): Promise<DatabaseRecord> {
    return this.commands.setTtl(name, seconds, user);
  }

  /**
   * Starts importing template `name` from a source database (see template-import.ts); the job is
   * read with importJob(id) while it runs.
   */
  importTemplate(req: ImportRequest, user: string): ImportJob {
    this.assertRunning(`cannot import template "${req.name}"`);
    this.opts.disk?.assertRoom(`cannot import template "${req.name}"`);
    const { sourceUrl: _, mask: __, ...build } = req;
    return this.imports.start(req, (fill) => this.templates.build({ ...build, fill, source: 'import' }, user));
  }

  importJob(id: string): ImportJob | undefined {
    return this.imports.get(id);
  }

  /** A snapshot of `db` as sealed template `name` (see snapshots.ts); `force` ends open sessions. */
  snapshot(db: string, name: string, user: string, force = false): Promise<TemplateRecord> {
    this.assertRunning(`cannot snapshot database "${db}"`);
    this.opts.disk?.assertRoom(`cannot snapshot database "${db}"`);
    return this.snapshots.snapshot(db, name, { user, database: null }, force);
  }

  /** Puts `db` back to snapshot `name`; `force` ends open sessions (57P01), else they make it fail (55006). */
  restore(db: string, name: string, user: string, force = false): Promise<void> {
    this.assertRunning(`cannot restore database "${db}"`);
    this.opts.disk?.assertRoom(`cannot restore database "${db}"`);
    return this.snapshots.restore(db, name, { user, database: null }, force);
  }

  setConnectionLimit(name: string, limit: number | null, user: string): Promise<DatabaseRecord> {
    return this.commands.setConnectionLimit(name, limit, user);
  }

  setMemoryLimit(name: string, mb: number | null, user: string): Promise<DatabaseRecord> {
    return this.commands.setMemoryLimit(name, mb, user);
  }

  /** A minted database's own memory limit in MB; undefined: the runtime's --database-memory-limit applies. */
  memoryLimitMb(database: string): number | undefined {
    return this.registry.databases.get(database)?.memoryLimitMb ?? undefined;
  }

  drop(name: string, caller: Caller): Promise<void> {
    return this.commands.drop(name, caller);
  }

  /**
   * A new per-database credential for the minted database `name` (see database-credentials.ts): a
   * login role that reaches only that database. The password is in the result and nowhere else.
   */
  createCredential(name: string, opts: { connectionLimit?: number | undefined } = {}): Promise<Credential> {
    this.assertRunning(`cannot create a credential for database "${name}"`);
    const record = this.mintedRecord(name);
    // A copy of a template generation sealed with the group's grants, owned by the role they were made for.
    const from = this.registry.templates.get(record.template)?.groupGrantsFrom ?? null;
    const prepared = record.owner === PREPARED_OWNER && from !== null && record.generation >= from;
    return this.credentials.create(name, record.owner, opts.connectionLimit ?? -1, prepared);
  }

  /** Whether `role` is a per-database credential this runtime recorded (for the login check). */
  isCredential(role: string): boolean {
    return this.credentials.databaseOf(role) !== undefined;
  }

  /** Drops the credential `user` of `name`; false when there was none (idempotent). */
  revokeCredential(name: string, user: string): Promise<boolean> {
    this.assertRunning(`cannot revoke a credential of database "${name}"`);
    const owner = this.registry.databases.get(name)?.owner ?? 'postgres';
    return this.credentials.revoke(name, user, owner);
  }

  private mintedRecord(name: string): DatabaseRecord {
    const record = this.registry.databases.get(name);
    if (!record) throw databaseDoesNotExist(name, { hint: 'Credentials are for minted databases; GET /v1/databases lists them.' });
    return record;
  }

  private assertRunning(what: string): void {
    if (this.state !== 'running') throw new PgxError('CANNOT_CONNECT_NOW', `${what}: the runtime is not running`, { hint: 'Try again in a moment.' });
  }

  /**
   * The process tree's memory, read at most once a second: reading every process's smaps_rollup costs
   * milliseconds per process, and the operator's placement and Prometheus ask for the status often.
   */
  private async treeMemory(): Promise<TreeMemory> {
    const now = this.opts.clock.monotonic();
    if (this.memorySample === null || now - this.memorySample.at >= MEMORY_SAMPLE_MS) {
      this.memorySample = { at: now, value: measureTree(process.pid) };
    }
    return this.memorySample.value;
  }

  /** The status document (see status.ts for what each field means). */
  async status(): Promise<RuntimeStatus> {
    const { rows } = await (await this.metadata.client()).query(
      `SELECT count(*) FROM pg_catalog.pg_database WHERE datname <> ${quoteLiteral(CONTROL_DATABASE)} ` +
        `AND NOT starts_with(datname::text, ${quoteLiteral(SPARE_PREFIX)}) AND NOT starts_with(datname::text, ${quoteLiteral(BUILD_PREFIX)})`,
    );
    return runtimeStatus({
      pid: process.pid,
      postgresPid: this.opts.postgresPid() ?? null,
      uptimeMs: this.opts.clock.monotonic() - this.startedAt,
      version: this.opts.version,
      postgresVersion: this.opts.postgresVersion,
      memory: await this.treeMemory(),
      sessions: this.sessions.totals(),
      clusterDatabases: Number(rows[0]?.[0] ?? 0),
      registry: this.registry,
      pool: this.pool,
      counters: this.counters,
      janitorLastRun: this.janitor.lastRun,
      storage: this.opts.storage,
      memoryLimits: this.opts.memoryLimits?.() ?? null,
      disk: this.opts.disk?.status() ?? null,
    });
  }

  /** Calls `listener` for every mint from now on: source and milliseconds from request to ready. */
  onMint(listener: (source: 'warm' | 'cold', ms: number) => void): void {
    this.counters.onMint(listener);
  }

  /** One janitor pass now, after any in progress (tests; an API "sweep" later). */
  runJanitor(): Promise<void> {
    return this.janitor.runOnce();
  }

  /** For a name PGX dropped lately (its tombstone): the 3D000 saying when and why; else null. */
  dropped(name: string): PgxError | null {
    return this.registry.databases.has(name) ? null : this.tombstones.refusal(name);
  }

  /** The record of a minted database, or null (a snapshot for tests and the API). */
  database(name: string): DatabaseRecord | null {
    return this.registry.databases.get(name) ?? null;
  }

  // --- internals -----------------------------------------------------------------------------------

  /** Runs `work` while route() holds new connects to `db` (they proceed once it settles). */
  private holdConnects<T>(db: string, work: () => Promise<T>): Promise<T> {
    const run = (this.held.get(db) ?? Promise.resolve()).catch(() => undefined).then(work);
    const settled = run.catch(() => undefined);
    this.held.set(db, settled);
    void settled.then(() => {
      if (this.held.get(db) === settled) this.held.delete(db);
    });
    return run;
  }

  private reconcile(): Promise<number> {
    return reconcile({
      prefix: this.settings.prefix,
      registry: this.registry,
      metadata: this.metadata,
      reported: this.notAdopted,
      busy: (name) => this.minter.isMinting(name) || this.pool.isBusy(name) || this.scratches.has(name) || this.dropper.dropping(name) !== undefined,
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
      sessions: this.sessions,
      engine: this.opts.engine,
      dropper: this.dropper,
      counters: this.counters,
      clock: this.opts.clock,
      logger: this.log,
    };
    let lastReconcile = this.opts.clock.monotonic();
    return [
      expireTtlTask(lifecycle),
      dropIdleTask(lifecycle),
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

/** What an explicit create sets from the start (the HTTP API's POST /v1/databases). */
export interface CreateSettings {
  ttlSeconds?: number | null | undefined;
  pinned?: boolean | undefined;
  connectionLimit?: number | null | undefined;
  memoryLimitMb?: number | null | undefined;
}

/** The record fields of an explicit create, checked as the separate setters check them. */
function initialSettings(s: CreateSettings, now: number): InitialSettings {
  const ttl = s.ttlSeconds ?? null;
  const connectionLimit = s.connectionLimit ?? null;
  const memoryLimitMb = s.memoryLimitMb ?? null;
  checkTtl(ttl);
  checkConnectionLimit(connectionLimit);
  checkMemoryLimit(memoryLimitMb);
  return { origin: 'request', pinned: s.pinned ?? false, expiresAt: ttl === null ? null : now + ttl * 1000, connectionLimit, memoryLimitMb };
}

/** A template built from a SQL script (the HTTP API's POST /v1/templates). */
export type ScriptBuild = Omit<BuildRequest, 'fill' | 'source'> & { sql: string; scriptName?: string | undefined };

export interface CreatedDatabase {
  name: string;
  template: string;
  source: 'warm' | 'cold';
  mint_ms: number;
}

/** A random token for a minted name: lower-case hex, 16 characters or as many as fit in `room` bytes. */
function randomToken(room: number): string {
  return randomBytes(8).toString('hex').slice(0, Math.max(1, Math.min(16, room)));
}

function validNameHintFor(prefix: string): string {
  return `Name it ${prefix}<template>__<token> (lower-case letters, digits and underscores, at most ${MAX_NAME_BYTES} bytes), or leave the name out.`;
}

/** The one argument of a control function: a database name, not NULL. */
function nameArg(fn: string, args: (string | null)[]): string {
  const name = args[0];
  if (args.length !== 1 || name === null || name === undefined) {
    throw new PgxError('INVALID_PARAMETER', `${fn}(name) takes one database name, not ${args.length === 1 ? 'NULL' : `${args.length} arguments`}`, {
      hint: `For example: SELECT ${fn}('tpl_app').`,
    });
  }
  return name;
}

/** (template [, force]): a name that is not NULL, and an optional boolean. */
function dropTemplateArgs(fn: string, args: (string | null)[]): [string, boolean] {
  const [name, force] = args;
  if (args.length < 1 || args.length > 2 || name == null) {
    throw new PgxError('INVALID_PARAMETER', `${fn}(template [, force]) takes a template name that is not NULL`, { hint: `For example: SELECT ${fn}('tpl_old').` });
  }
  return [name, forceArg(fn, force)];
}

/** (db, name [, force]): two database names and an optional boolean, as pgx_snapshot/restore_database take. */
function snapshotArgs(fn: string, args: (string | null)[]): [string, string, boolean] {
  const [db, name, force] = args;
  if (args.length < 2 || args.length > 3 || db == null || name == null) {
    throw new PgxError('INVALID_PARAMETER', `${fn}(database, snapshot [, force]) takes two names that are not NULL`, {
      hint: `For example: SELECT ${fn}('tdb_app__agent42', 'agent42_before_migration').`,
    });
  }
  return [db, name, forceArg(fn, force)];
}

/** A control function's optional force argument: absent or NULL is false. */
function forceArg(fn: string, force: string | null | undefined): boolean {
  if (force != null && force !== 'true' && force !== 'false') throw new PgxError('INVALID_PARAMETER', `${fn}: force must be true or false, not "${force}"`);
  return force === 'true';
}
