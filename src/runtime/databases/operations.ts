// The operations the HTTP API calls (api/handlers.ts): create a database (with its settings and
// credential, all or nothing), build, import, rename and drop templates, snapshot and restore, lists
// (templates with their disk use), status (disk use by kind when asked), and the
// setters, which are the owning part's own methods (commands.ts, templates.ts), handed out as they are.

import { randomBytes } from 'node:crypto';
import { statfs } from 'node:fs/promises';
import path from 'node:path';
import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { DiskRoom } from '../postgres/disk-guard.js';
import { measureTree, type TreeMemory } from '../postgres/memory.js';
import { quoteLiteral, type SqlClient } from '../postgres/sql-client.js';
import type { StorageCapability } from '../postgres/storage-probe.js';
import { directoryUse, type DiskUse } from '../postgres/disk-usage.js';
import { runtimeStatus, type DiskUsageStatus, type MemoryLimitsStatus, type RuntimeStatus } from '../status.js';
import type { ImportJob, ImportRequest, TemplateImports } from '../templates/import.js';
import { runScript } from '../templates/script-build.js';
import type { Snapshots } from '../templates/snapshots.js';
import type { BuildRequest, Templates } from '../templates/templates.js';
import { checkConnectionLimit, checkMemoryLimit, checkTtl, type DatabaseCommands } from './commands.js';
import type { Counters } from './counters.js';
import { PREPARED_OWNER, type Credential, type DatabaseCredentials } from './credentials.js';
import type { Dropper } from './dropper.js';
import type { Janitor } from './janitor.js';
import type { Lifecycle } from './lifecycle.js';
import type { MetadataStore } from './metadata.js';
import type { Minter } from './mint.js';
import { BUILD_PREFIX, CONTROL_DATABASE, databaseDoesNotExist, MAX_NAME_BYTES, mintNameProblem, parseMintName, SPARE_PREFIX, TRASH_PREFIX } from './names.js';
import type { DatabaseRecord, InitialSettings, TemplateRecord } from './records.js';
import type { Registry } from './registry.js';
import type { SessionCounts } from './session-counts.js';
import type { Tombstones } from './tombstones.js';
import type { WarmPool } from './warm-pool.js';

/** How long a reading of the process tree's memory serves the status document. */
const MEMORY_SAMPLE_MS = 1000;

/** The parts the operations act through (disposable-databases.ts makes them). */
export interface OperationParts {
  prefix: string;
  lifecycle: Lifecycle;
  registry: Registry;
  metadata: MetadataStore;
  minter: Minter;
  dropper: Dropper;
  tombstones: Tombstones;
  templates: Templates;
  snapshots: Snapshots;
  commands: DatabaseCommands;
  credentials: DatabaseCredentials;
  imports: TemplateImports;
  counters: Counters;
  janitor: Janitor;
  pool: WarmPool;
  sessions: SessionCounts;
  /** A connection to the named database over PostgreSQL's private socket, as `user`. */
  connect: (database: string, user?: string) => Promise<SqlClient>;
  storage: StorageCapability;
  /** The data directory: a database's files are under base/<oid> (template sizes). */
  dataDir: string;
  disk?: DiskRoom | undefined;
  version: string;
  postgresVersion: string;
  postgresPid: () => number | undefined;
  memoryLimits?: (() => MemoryLimitsStatus) | undefined;
  startedAt: number;
  clock: Clock;
  logger: Logger;
}

/** What an explicit create sets from the start (the HTTP API's POST /v1/databases). */
export interface CreateSettings {
  ttlSeconds?: number | null | undefined;
  pinned?: boolean | undefined;
  connectionLimit?: number | null | undefined;
  memoryLimitMb?: number | null | undefined;
}

/** A create, whole: the database, its settings, and a credential for it if asked for. */
export interface CreateRequest {
  /** Default: <prefix><template>__<random token>. */
  name?: string | undefined;
  user: string;
  settings?: CreateSettings | undefined;
  /** A per-database credential made with it (see createCredential); absent: none. */
  credential?: { connectionLimit?: number | undefined } | undefined;
}

export interface CreatedDatabase {
  name: string;
  template: string;
  source: 'warm' | 'cold';
  mint_ms: number;
  /** The credential asked for, with its password (returned here once, stored nowhere); null if none was asked. */
  credential: Credential | null;
}

/** A template built from a SQL script (the HTTP API's POST /v1/templates). */
export type ScriptBuild = Omit<BuildRequest, 'fill' | 'source'> & { sql: string; scriptName?: string | undefined };

export class DatabaseOperations {
  readonly seal: Templates['seal'];
  readonly unseal: Templates['unseal'];
  readonly setPinned: DatabaseCommands['setPinned'];
  readonly setTtl: DatabaseCommands['setTtl'];
  readonly setConnectionLimit: DatabaseCommands['setConnectionLimit'];
  readonly setMemoryLimit: DatabaseCommands['setMemoryLimit'];
  readonly drop: DatabaseCommands['drop'];
  readonly importJob: TemplateImports['get'];
  /** Calls a listener for every mint from now on: source and milliseconds from request to ready. */
  readonly onMint: Counters['onMint'];
  /** One janitor pass now, after any in progress (tests; an API "sweep" later). */
  readonly runJanitor: Janitor['runOnce'];
  private memorySample: { at: number; value: Promise<TreeMemory> } | null = null;

  constructor(private readonly p: OperationParts) {
    const { templates, commands } = p;
    this.seal = templates.seal.bind(templates);
    this.unseal = templates.unseal.bind(templates);
    this.setPinned = commands.setPinned.bind(commands);
    this.setTtl = commands.setTtl.bind(commands);
    this.setConnectionLimit = commands.setConnectionLimit.bind(commands);
    this.setMemoryLimit = commands.setMemoryLimit.bind(commands);
    this.drop = commands.drop.bind(commands);
    this.importJob = p.imports.get.bind(p.imports);
    this.onMint = p.counters.onMint.bind(p.counters);
    this.runJanitor = p.janitor.runOnce.bind(p.janitor);
  }

  /** The mint prefix (the API checks names against it). */
  get settings(): { prefix: string } {
    return { prefix: this.p.prefix };
  }

  /**
   * Mints a database from a sealed template for `req.user`, with its settings and, if asked, a
   * credential: all or nothing (a credential that cannot be made drops the database again). A name
   * that exists already is 42P04; a template missing or not sealed is 3D000 (UNKNOWN_TEMPLATE,
   * TEMPLATE_NOT_SEALED: the caller asked for the template by name, so the error is about it); a bad
   * name is 22023.
   */
  async create(template: string, req: CreateRequest): Promise<CreatedDatabase> {
    const created = await this.mint(template, req);
    if (req.credential === undefined) return { ...created, credential: null };
    try {
      return { ...created, credential: await this.createCredential(created.name, req.credential) };
    } catch (err) {
      // A retry of the request then creates both.
      await this.p.commands
        .drop(created.name, { user: req.user, database: 'postgres' })
        .catch((e: unknown) => this.p.logger.warn('database-not-dropped', { database: created.name, err: e }));
      throw err;
    }
  }

  private async mint(template: string, req: CreateRequest): Promise<Omit<CreatedDatabase, 'credential'>> {
    const { registry, clock, prefix } = this.p;
    const started = clock.monotonic();
    const name = req.name ?? `${prefix}${template}__${randomToken(MAX_NAME_BYTES - Buffer.byteLength(`${prefix}${template}__`))}`;
    const problem = mintNameProblem(name, prefix);
    if (problem !== null) throw new PgxError('INVALID_PARAMETER', `name "${name}" cannot be minted: ${problem}`, { hint: validNameHintFor(prefix) });
    const parsed = parseMintName(name, prefix);
    if (parsed.template !== template) {
      throw new PgxError('INVALID_PARAMETER', `name "${name}" is minted from template "${parsed.template}", not "${template}"`, {
        hint: `Name it ${prefix}${template}__<token>, or leave the name out.`,
      });
    }
    if (this.p.lifecycle.state !== 'running') throw new PgxError('CANNOT_CONNECT_NOW', `cannot create database "${name}": the runtime is not running`, { hint: 'Try again in a moment.' });
    const initial = initialSettings(req.settings ?? {}, clock.now());
    if (!registry.sealedTemplate(template)) throw templateProblem(template, registry.templates.has(template));
    await this.p.dropper.dropping(name)?.catch(() => undefined);
    const duplicate = (): PgxError => new PgxError('DUPLICATE_DATABASE', `database "${name}" already exists`, { hint: 'Pick another name, or leave the name out for a random one.' });
    if (registry.databases.has(name) || this.p.minter.isMinting(name)) throw duplicate();
    // Asking for the name again is the one way to reuse a name PGX dropped.
    await this.p.tombstones.clear(name);
    const outcome = await this.p.minter.mint(parsed, req.user, initial);
    // The caller was promised this lifetime: on disk before the answer, not a moment later.
    await this.p.metadata.flush();
    return { name, template, source: outcome, mint_ms: Math.round((clock.monotonic() - started) * 100) / 100 };
  }

  /** Templates PGX knows (sealed now or once), by name. */
  listTemplates(): TemplateRecord[] {
    return [...this.p.registry.templates.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /**
   * Templates and snapshots with what each costs on disk (see postgres/disk-usage.ts): apparent and
   * allocated bytes, and on a filesystem that clones, the bytes shared with another database.
   */
  async listTemplatesWithUse(): Promise<(TemplateRecord & { use: DiskUse })[]> {
    const templates = this.listTemplates();
    if (templates.length === 0) return [];
    const { rows } = await (await this.p.metadata.client()).query(
      `SELECT datname, oid FROM pg_catalog.pg_database WHERE datname = ANY (ARRAY[${templates.map((t) => quoteLiteral(t.name)).join(', ')}]::text[])`,
    );
    const oids = new Map(rows.map(([name, oid]) => [name!, oid!]));
    const none: DiskUse = { apparent_bytes: 0, allocated_bytes: 0, shared_bytes: null };
    const out: (TemplateRecord & { use: DiskUse })[] = [];
    for (const t of templates) {
      const oid = oids.get(t.name);
      out.push({ ...t, use: oid === undefined ? none : await directoryUse(path.join(this.p.dataDir, 'base', oid), this.p.storage.clone) });
    }
    return out;
  }

  /** Keeps snapshot `name` past its database, or gives it back (see Snapshots.keep). */
  keepSnapshot(name: string, keep: boolean, user: string): Promise<TemplateRecord> {
    this.p.lifecycle.assertRunning(`cannot keep snapshot "${name}"`);
    return this.p.snapshots.keep(name, keep, user);
  }

  /** Renames template or snapshot `name` (see Templates.rename). */
  renameTemplate(name: string, to: string, user: string): Promise<TemplateRecord> {
    this.p.lifecycle.assertRunning(`cannot rename template "${name}"`);
    return this.p.templates.rename(name, to, user);
  }

  /** Minted databases alive (spares excluded), by name. */
  listDatabases(): DatabaseRecord[] {
    return [...this.p.registry.databases.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  /** A page of them: up to `limit` after name `after`, in binary name order (see Registry.databasesAfter). */
  listDatabasesAfter(after: string | null, limit: number): { items: DatabaseRecord[]; more: boolean } {
    return this.p.registry.databasesAfter(after, limit);
  }

  /** True when PostgreSQL answers a query on the control connection (the API's /readyz). */
  async ping(): Promise<boolean> {
    if (this.p.lifecycle.state !== 'running') return false;
    await (await this.p.metadata.client()).query('SELECT 1');
    return true;
  }

  /** Drops template or snapshot `name` (see Templates.drop); `force` although databases were minted from it. */
  dropTemplate(name: string, user: string, force: boolean): Promise<void> {
    this.p.lifecycle.assertRunning(`cannot drop template "${name}"`);
    return this.p.templates.drop(name, user, force);
  }

  /** A template from a SQL script (see script-build.ts), sealed unless `seal` is false. */
  buildTemplate(req: ScriptBuild, user: string): Promise<TemplateRecord> {
    this.assertRoomFor(`cannot build template "${req.name}"`);
    const { sql, scriptName, ...rest } = req;
    const what = scriptName === undefined ? `the script for template "${req.name}"` : `${scriptName} (the script for template "${req.name}")`;
    const fill = async (database: string, owner: string): Promise<void> => {
      const run = await runScript(this.p.connect, database, owner, sql, what);
      // A pg_dump file's owners and grants name the source's roles: left out, as pg_restore --no-owner does.
      this.p.logger.info('template-script-ran', { template: req.name, statements: run.statements, skippedOwnershipAndPrivileges: run.skipped });
    };
    return this.p.templates.build({ ...rest, fill, source: 'script' }, user);
  }

  /**
   * Starts importing template `name` from a source database (see templates/import.ts); the job is
   * read with importJob(id) while it runs.
   */
  importTemplate(req: ImportRequest, user: string): ImportJob {
    this.assertRoomFor(`cannot import template "${req.name}"`);
    const { sourceUrl: _, mask: __, ...build } = req;
    return this.p.imports.start(req, (fill) => this.p.templates.build({ ...build, fill, source: 'import' }, user));
  }

  /**
   * A snapshot of `db` as sealed template `name` (see snapshots.ts); `force` ends open sessions; `keep`
   * lets it outlive `db` (else it goes with it, and counts against --snapshot-retention).
   */
  snapshot(db: string, name: string, user: string, force = false, keep = false): Promise<TemplateRecord> {
    this.assertRoomFor(`cannot snapshot database "${db}"`);
    return this.p.snapshots.snapshot(db, name, { user, database: null }, force, undefined, keep);
  }

  /** Puts `db` back to snapshot `name`; `force` ends open sessions (57P01), else they make it fail (55006). */
  restore(db: string, name: string, user: string, force = false): Promise<void> {
    this.assertRoomFor(`cannot restore database "${db}"`);
    return this.p.snapshots.restore(db, name, { user, database: null }, force);
  }

  /**
   * A new per-database credential for the minted database `name` (see credentials.ts): a login role
   * that reaches only that database. The password is in the result and nowhere else.
   */
  createCredential(name: string, opts: { connectionLimit?: number | undefined } = {}): Promise<Credential> {
    this.p.lifecycle.assertRunning(`cannot create a credential for database "${name}"`);
    const record = this.p.registry.databases.get(name);
    if (!record) throw databaseDoesNotExist(name, { hint: `Credentials are for databases PGX minted (${this.p.prefix}<template>__<token>).` });
    // A copy of a template generation sealed with the group's grants, owned by the role they were made for.
    const from = this.p.registry.templates.get(record.template)?.groupGrantsFrom ?? null;
    const prepared = record.owner === PREPARED_OWNER && from !== null && record.generation >= from;
    return this.p.credentials.create(name, record.owner, opts.connectionLimit ?? -1, prepared);
  }

  /** Drops the credential `user` of `name`; false when there was none (idempotent). */
  revokeCredential(name: string, user: string): Promise<boolean> {
    this.p.lifecycle.assertRunning(`cannot revoke a credential of database "${name}"`);
    const owner = this.p.registry.databases.get(name)?.owner ?? 'postgres';
    return this.p.credentials.revoke(name, user, owner);
  }

  /** Drops every credential of `name`: its roles, in order; how many there were (0: none, idempotent). */
  async revokeCredentials(name: string): Promise<number> {
    this.p.lifecycle.assertRunning(`cannot revoke the credentials of database "${name}"`);
    const owner = this.p.registry.databases.get(name)?.owner ?? 'postgres';
    let revoked = 0;
    for (const user of this.p.credentials.rolesOf(name)) if (await this.p.credentials.revoke(name, user, owner)) revoked++;
    return revoked;
  }

  /** The status document (see status.ts for what each field means); `diskUsage` measures disk_usage too. */
  async status(opts: { diskUsage?: boolean } = {}): Promise<RuntimeStatus> {
    const p = this.p;
    const { rows } = await (await p.metadata.client()).query(
      `SELECT count(*) FROM pg_catalog.pg_database WHERE datname <> ${quoteLiteral(CONTROL_DATABASE)} ` +
        `AND NOT starts_with(datname::text, ${quoteLiteral(SPARE_PREFIX)}) AND NOT starts_with(datname::text, ${quoteLiteral(BUILD_PREFIX)}) AND NOT starts_with(datname::text, ${quoteLiteral(TRASH_PREFIX)})`,
    );
    return runtimeStatus({
      pid: process.pid,
      postgresPid: p.postgresPid() ?? null,
      uptimeMs: p.clock.monotonic() - p.startedAt,
      version: p.version,
      postgresVersion: p.postgresVersion,
      memory: await this.treeMemory(),
      sessions: p.sessions.totals(),
      clusterDatabases: Number(rows[0]?.[0] ?? 0),
      trashBacklog: p.dropper.trashBacklog,
      registry: p.registry,
      pool: p.pool,
      counters: p.counters,
      janitorLastRun: p.janitor.lastRun,
      storage: p.storage,
      memoryLimits: p.memoryLimits?.() ?? null,
      disk: p.disk?.status() ?? null,
      diskUsage: opts.diskUsage ? await this.diskUsage() : null,
    });
  }

  /** MB per kind of database, as pg_database_size counts them, and the data filesystem's space. */
  private async diskUsage(): Promise<DiskUsageStatus> {
    const { registry, dataDir, storage } = this.p;
    const { rows } = await (await this.p.metadata.client()).query('SELECT datname, pg_catalog.pg_database_size(oid) FROM pg_catalog.pg_database');
    const bytes = { templates: 0, snapshots: 0, databases: 0, spares: 0, other: 0 };
    for (const [name, size] of rows) {
      const n = Number(size ?? 0);
      const t = registry.templates.get(name!);
      if (t) bytes[t.snapshotOf === null ? 'templates' : 'snapshots'] += n;
      else if (registry.databases.has(name!)) bytes.databases += n;
      else if (registry.spares.has(name!)) bytes.spares += n;
      else bytes.other += n;
    }
    const fs = await statfs(dataDir);
    const mb = (n: number): number => Math.round((n / 1048576) * 10) / 10;
    return {
      templates_mb: mb(bytes.templates),
      snapshots_mb: mb(bytes.snapshots),
      databases_mb: mb(bytes.databases),
      spares_mb: mb(bytes.spares),
      other_mb: mb(bytes.other),
      clones_share_blocks: storage.clone,
      used_mb: mb((fs.blocks - fs.bfree) * fs.bsize),
      free_mb: mb(fs.bavail * fs.bsize),
      total_mb: mb(fs.blocks * fs.bsize),
    };
  }

  /** For a name PGX dropped lately (its tombstone): the 3D000 saying when and why; else null. */
  dropped(name: string): PgxError | null {
    return this.p.registry.databases.has(name) ? null : this.p.tombstones.refusal(name);
  }

  /** The record of a minted database, or null (a snapshot for tests and the API). */
  database(name: string): DatabaseRecord | null {
    return this.p.registry.databases.get(name) ?? null;
  }

  /** Refuses work that writes a whole database unless running and the disk has room (57P03, 53100). */
  private assertRoomFor(what: string): void {
    this.p.lifecycle.assertRunning(what);
    this.p.disk?.assertRoom(what);
  }

  /**
   * The process tree's memory, read at most once a second: reading every process's smaps_rollup costs
   * milliseconds per process, and the operator's placement and Prometheus ask for the status often.
   */
  private treeMemory(): Promise<TreeMemory> {
    const now = this.p.clock.monotonic();
    if (this.memorySample === null || now - this.memorySample.at >= MEMORY_SAMPLE_MS) {
      this.memorySample = { at: now, value: measureTree(process.pid) };
    }
    return this.memorySample.value;
  }
}

/**
 * Why a create cannot copy `template`: a record without a seal is unsealed; without a record, nothing
 * PGX knows of (an ordinary database of that name is not a template either). Each surface hints how to
 * seal or list in its own terms; SQL's are here.
 */
function templateProblem(template: string, recorded: boolean): PgxError {
  return recorded
    ? new PgxError('TEMPLATE_NOT_SEALED', `template "${template}" is not sealed`, {
        detail: 'Databases are minted only from a sealed template; unsealed, it is open for changes.',
        hint: `Seal it: SELECT pgx_seal_template('${template}').`,
      })
    : new PgxError('UNKNOWN_TEMPLATE', `there is no template "${template}"`, {
        hint: `Create database ${template}, fill it, and seal it: SELECT pgx_seal_template('${template}').`,
      });
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

/** A random token for a minted name: lower-case hex, 16 characters or as many as fit in `room` bytes. */
function randomToken(room: number): string {
  return randomBytes(8).toString('hex').slice(0, Math.max(1, Math.min(16, room)));
}

function validNameHintFor(prefix: string): string {
  return `Name it ${prefix}<template>__<token> (lower-case letters, digits and underscores, at most ${MAX_NAME_BYTES} bytes), or leave the name out.`;
}
