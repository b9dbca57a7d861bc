// PGX's own records, kept in a control database inside the cluster (pgx_control) so they live and die
// with the data directory: templates, the databases PGX minted (and its warm spares), counters. Pins,
// TTLs and live databases therefore survive a runtime restart, and the janitor resumes from the
// recorded times.
//
// Tenants never reach pgx_control: route() refuses the name as if it did not exist (the engine asks the
// router for every connect), and CONNECT is revoked from PUBLIC as a second wall for direct access.
//
// One connection, one query at a time: writes are applied in the order they are issued, so a write
// that is not awaited (a session-end time) can never overtake a later one for the same row.
//
// Rows of the databases table are written in batches: every change is queued per name (the last one
// wins), and a batch goes out in one transaction either at once (a caller that waits for it) or
// WRITE_BEHIND_MS after the first change nobody waits for (a mint's record, a session's start and
// end). Those come on a client's path: written at once, their INSERT and commit would compete for
// the CPU with the client's own first queries, and a burst of mints would send three statements each.

import type { Logger } from '../../log.js';
import { AdminConnection } from '../postgres/admin-connection.js';
import { COPY_STRATEGY } from './create-database.js';
import { CONTROL_DATABASE } from './names.js';
import { BOUNDS, clampTime, withinBound, type Bound, type DatabaseKind, type DatabaseRecord, type TemplateRecord, type Tombstone } from './records.js';
import { postgresSqlstate, quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

/** How long a database row's change nobody waits for may wait to be written with others. */
const WRITE_BEHIND_MS = 250;

/** Idempotent: run at every start. Later versions add columns with ADD COLUMN IF NOT EXISTS. */
const SCHEMA = `
CREATE TABLE IF NOT EXISTS templates (
  name        text PRIMARY KEY,
  sealed      boolean NOT NULL,
  sealed_at   timestamptz,
  strategy    text NOT NULL,
  generation  integer NOT NULL
);
CREATE TABLE IF NOT EXISTS databases (
  name              text PRIMARY KEY,
  kind              text NOT NULL CHECK (kind IN ('ephemeral', 'spare')),
  template          text NOT NULL,
  generation        integer NOT NULL,
  owner             text NOT NULL,
  created_at        timestamptz NOT NULL,
  last_session_end  timestamptz,
  in_use            boolean NOT NULL DEFAULT false,
  pinned            boolean NOT NULL DEFAULT false,
  expires_at        timestamptz
);
ALTER TABLE databases ADD COLUMN IF NOT EXISTS connection_limit integer;
ALTER TABLE databases ADD COLUMN IF NOT EXISTS memory_limit_mb integer;
ALTER TABLE databases ADD COLUMN IF NOT EXISTS origin text NOT NULL DEFAULT 'connect';
ALTER TABLE templates ADD COLUMN IF NOT EXISTS snapshot_of text;
ALTER TABLE templates ADD COLUMN IF NOT EXISTS group_grants_from integer;
-- Snapshots recorded before retention existed were promised to outlive their database: they are kept.
ALTER TABLE templates ADD COLUMN IF NOT EXISTS kept boolean NOT NULL DEFAULT true;
-- Templates sealed while the credentials' group had ALL on their tables (TRIGGER and MAINTAIN with it;
-- credentials.ts TABLE_RIGHTS) count as not carrying the group's grants: a credential of their copies
-- has the grants made inside its database again, which takes those two back. Rows older than the
-- column are those; rows written since get its default.
ALTER TABLE templates ADD COLUMN IF NOT EXISTS grants_without_trigger boolean;
ALTER TABLE templates ALTER COLUMN grants_without_trigger SET DEFAULT true;
UPDATE templates SET group_grants_from = NULL, grants_without_trigger = true WHERE grants_without_trigger IS NULL;
CREATE TABLE IF NOT EXISTS counters (
  name   text PRIMARY KEY,
  value  bigint NOT NULL
);
CREATE SEQUENCE IF NOT EXISTS spare_numbers;
CREATE TABLE IF NOT EXISTS tombstones (
  name        text PRIMARY KEY,
  dropped_at  timestamptz NOT NULL,
  reason      text NOT NULL
);
CREATE TABLE IF NOT EXISTS credentials (
  role        text PRIMARY KEY,
  database    text NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now()
);
`;

/** Queued changes to database rows, by name: the row to write, or null to delete it. */
interface Batch {
  rows: Map<string, DatabaseRecord | null>;
  written: Promise<void>;
  resolve: () => void;
  reject: (err: unknown) => void;
}

export class MetadataStore {
  private readonly conn: AdminConnection;
  private batch: Batch | null = null;
  private batchTimer: NodeJS.Timeout | null = null;

  constructor(
    /** A superuser connection to the named database over PostgreSQL's private socket. */
    private readonly connect: (database: string) => Promise<SqlClient>,
    private readonly log: Logger,
  ) {
    this.conn = new AdminConnection(() => connect(CONTROL_DATABASE));
  }

  /**
   * The connection to pgx_control. pg_database and pg_roles are shared catalogs, so catalog lookups
   * (permissions, existence) use it too instead of holding another connection open.
   */
  client(): Promise<SqlClient> {
    return this.conn.get();
  }

  /** Creates pgx_control on first start and its tables if missing. */
  async open(): Promise<void> {
    const admin = await this.connect('postgres');
    try {
      const { rows } = await admin.query(`SELECT 1 FROM pg_catalog.pg_database WHERE datname = ${quoteLiteral(CONTROL_DATABASE)}`);
      if (rows.length === 0) {
        // template0: never modified, so the control database holds nothing a user put in template1.
        // FILE_COPY: WAL_LOG would read template0 through shared buffers (794 of them) at every new
        // runtime's start, where they stay in the runtime's PSS.
        await ignoreDuplicate(admin.query(`CREATE DATABASE ${quoteIdent(CONTROL_DATABASE)} TEMPLATE template0 STRATEGY FILE_COPY`));
        this.log.info('control-database-created', { database: CONTROL_DATABASE });
      }
      await admin.query(`REVOKE CONNECT, TEMPORARY ON DATABASE ${quoteIdent(CONTROL_DATABASE)} FROM PUBLIC`);
    } finally {
      await admin.close();
    }
    await (await this.client()).query(SCHEMA);
  }

  /** Writes what is queued first. */
  async close(): Promise<void> {
    await this.flush().catch((err: unknown) => this.log.warn('metadata-write-failed', { err }));
    await this.conn.close();
  }

  async loadTemplates(): Promise<TemplateRecord[]> {
    const { rows } = await (await this.client()).query(
      `SELECT name, sealed, ${epochMs('sealed_at')}, generation, snapshot_of, group_grants_from, kept FROM templates ORDER BY name`,
    );
    return rows.map(([name, sealed, sealedAt, generation, snapshotOf, groupGrantsFrom, kept]) => ({
      name: name!,
      sealed: sealed === 't',
      sealedAt: this.storedTime(sealedAt, name!, 'sealed_at'),
      generation: Number(generation),
      snapshotOf: snapshotOf ?? null,
      kept: kept !== 'f',
      groupGrantsFrom: groupGrantsFrom === null || groupGrantsFrom === undefined ? null : Number(groupGrantsFrom),
    }));
  }

  async loadDatabases(): Promise<DatabaseRecord[]> {
    const { rows } = await (await this.client()).query(
      `SELECT name, kind, template, generation, owner, ${epochMs('created_at')}, ${epochMs('last_session_end')}, ` +
        `in_use, pinned, ${epochMs('expires_at')}, connection_limit, memory_limit_mb, origin FROM databases ORDER BY name`,
    );
    return rows.map(([name, kind, template, generation, owner, createdAt, lastEnd, inUse, pinned, expiresAt, connectionLimit, memoryLimitMb, origin]) => ({
      name: name!,
      kind: (kind === 'spare' ? 'spare' : 'ephemeral') satisfies DatabaseKind,
      template: template!,
      generation: Number(generation),
      owner: owner!,
      createdAt: this.storedTime(createdAt, name!, 'created_at')!,
      lastSessionEnd: this.storedTime(lastEnd, name!, 'last_session_end'),
      inUse: inUse === 't',
      pinned: pinned === 't',
      expiresAt: this.storedTime(expiresAt, name!, 'expires_at'),
      connectionLimit: this.storedNumber(connectionLimit, name!, 'connection_limit', BOUNDS.connectionLimit),
      memoryLimitMb: this.storedNumber(memoryLimitMb, name!, 'memory_limit_mb', BOUNDS.memoryLimitMb),
      origin: origin === 'request' ? 'request' : 'connect',
    }));
  }

  async loadTombstones(): Promise<Tombstone[]> {
    const { rows } = await (await this.client()).query(`SELECT name, ${epochMs('dropped_at')}, reason FROM tombstones`);
    return rows.map(([name, droppedAt, reason]) => ({ name: name!, droppedAt: Number(droppedAt), reason: reason! }));
  }

  async saveTombstone(t: Tombstone): Promise<void> {
    await (await this.client()).query(
      `INSERT INTO tombstones (name, dropped_at, reason) VALUES (${quoteLiteral(t.name)}, ${timestamp(t.droppedAt)}, ${quoteLiteral(t.reason)}) ` +
        `ON CONFLICT (name) DO UPDATE SET dropped_at = EXCLUDED.dropped_at, reason = EXCLUDED.reason`,
    );
  }

  async deleteTombstones(names: string[]): Promise<void> {
    if (names.length === 0) return;
    await (await this.client()).query(`DELETE FROM tombstones WHERE name IN (${names.map(quoteLiteral).join(', ')})`);
  }

  /**
   * A stored time (epoch ms as text, 'Infinity' for PostgreSQL's infinity) clamped to the times a record
   * holds: a row from an older runtime or written by hand (year 200000, 'infinity') reads as the latest
   * time, 9999-12-31T23:59:59.999Z (for an expiry: never, in effect), instead of failing this load or a
   * later GET. Each clamp is logged with the stored value.
   */
  private storedTime(text: string | null | undefined, name: string, column: string): number | null {
    if (text === null || text === undefined) return null;
    const stored = Number(text);
    const ms = clampTime(Math.round(stored));
    if (ms !== Math.round(stored)) this.log.warn('metadata-value-clamped', { name, column, stored: text, used: new Date(ms).toISOString() });
    return ms;
  }

  /** A stored limit clamped into its range (records.ts BOUNDS), logged; the columns are integers, so never NaN. */
  private storedNumber(text: string | null | undefined, name: string, column: string, bound: Bound): number | null {
    if (text === null || text === undefined) return null;
    const stored = Number(text);
    if (withinBound(stored, bound)) return stored;
    const used = Math.min(Math.max(stored, bound.min), bound.max);
    this.log.warn('metadata-value-clamped', { name, column, stored: text, used });
    return used;
  }

  async loadCounters(): Promise<Map<string, number>> {
    const { rows } = await (await this.client()).query('SELECT name, value FROM counters');
    return new Map(rows.map(([name, value]) => [name!, Number(value)]));
  }

  async saveTemplate(t: TemplateRecord): Promise<void> {
    await (await this.client()).query(saveTemplateSql(t));
  }

  /**
   * The record of `from` now under `to` (a rename): one query string is one implicit transaction, so
   * never both and never neither, and nothing is left open on the shared connection if it fails.
   */
  async renameTemplate(from: string, to: TemplateRecord): Promise<void> {
    await (await this.client()).query(`DELETE FROM templates WHERE name = ${quoteLiteral(from)}; ${saveTemplateSql(to)}`);
  }

  async deleteTemplate(name: string): Promise<void> {
    await (await this.client()).query(`DELETE FROM templates WHERE name = ${quoteLiteral(name)}`);
  }

  /**
   * Inserts or replaces the whole row (every change, pin, TTL or session end, is one write shape) now,
   * with whatever else is queued; resolves once committed.
   */
  saveDatabase(r: DatabaseRecord): Promise<void> {
    return this.queue([[r.name, r]], true);
  }

  /** saveDatabase for many rows in one transaction (a start's sessions-ended rewrite: one round trip, not one each). */
  saveDatabases(records: DatabaseRecord[]): Promise<void> {
    if (records.length === 0) return Promise.resolve();
    return this.queue(records.map((r): [string, DatabaseRecord] => [r.name, r]), true);
  }

  /**
   * Writes the row within WRITE_BEHIND_MS, batched with other changes; `replaces` (a claimed spare's
   * row) goes in the same transaction. Resolves once committed; a crash before that loses the change,
   * which reconcile makes good at the next start (it adopts a minted database with no row).
   */
  saveDatabaseLater(r: DatabaseRecord, replaces?: string): Promise<void> {
    return this.queue(replaces === undefined ? [[r.name, r]] : [[replaces, null], [r.name, r]], false);
  }

  deleteDatabase(name: string): Promise<void> {
    return this.queue([[name, null]], true);
  }

  /** Writes every queued change now. */
  flush(): Promise<void> {
    const batch = this.batch;
    if (batch === null) return Promise.resolve();
    this.batch = null;
    if (this.batchTimer !== null) clearTimeout(this.batchTimer);
    this.batchTimer = null;
    const deletes = [...batch.rows].filter(([, r]) => r === null).map(([name]) => quoteLiteral(name));
    const upserts = [...batch.rows.values()].filter((r) => r !== null);
    const sql = [
      ...(deletes.length > 0 ? [`DELETE FROM databases WHERE name IN (${deletes.join(', ')})`] : []),
      ...(upserts.length > 0 ? [upsertDatabases(upserts)] : []),
    ];
    // One query string is one transaction: the whole batch is written, or none of it.
    this.client()
      .then((client) => client.query(sql.join('; ')))
      .then(() => batch.resolve(), batch.reject);
    return batch.written;
  }

  private queue(changes: [string, DatabaseRecord | null][], now: boolean): Promise<void> {
    if (this.batch === null) {
      let resolve!: () => void;
      let reject!: (err: unknown) => void;
      const written = new Promise<void>((res, rej) => ((resolve = res), (reject = rej)));
      this.batch = { rows: new Map(), written, resolve, reject };
    }
    const batch = this.batch;
    for (const [name, row] of changes) batch.rows.set(name, row);
    if (now) return this.flush();
    this.batchTimer ??= setTimeout(() => {
      this.flush().catch(() => undefined); // each caller hears of a failure through its own promise
    }, WRITE_BEHIND_MS);
    return batch.written;
  }

  /** Per-database credentials: login role -> the one database it may reach. */
  async loadCredentials(): Promise<Map<string, string>> {
    const { rows } = await (await this.client()).query('SELECT role, database FROM credentials ORDER BY role');
    return new Map(rows.map(([role, database]) => [role!, database!]));
  }

  async saveCredential(role: string, database: string): Promise<void> {
    await (await this.client()).query(
      `INSERT INTO credentials (role, database) VALUES (${quoteLiteral(role)}, ${quoteLiteral(database)}) ON CONFLICT (role) DO UPDATE SET database = EXCLUDED.database`,
    );
  }

  async deleteCredential(role: string): Promise<void> {
    await (await this.client()).query(`DELETE FROM credentials WHERE role = ${quoteLiteral(role)}`);
  }

  /** A number never handed out before in this data directory, for naming a spare. */
  async nextSpareNumber(): Promise<number> {
    const { rows } = await (await this.client()).query(`SELECT nextval('spare_numbers')`);
    return Number(rows[0]![0]);
  }

  async saveCounters(values: Iterable<[string, number]>): Promise<void> {
    const tuples = [...values].map(([name, value]) => `(${quoteLiteral(name)}, ${int(value)})`);
    if (tuples.length === 0) return;
    await (await this.client()).query(
      `INSERT INTO counters (name, value) VALUES ${tuples.join(', ')} ON CONFLICT (name) DO UPDATE SET value = EXCLUDED.value`,
    );
  }
}

function upsertDatabases(records: DatabaseRecord[]): string {
  return (
    `INSERT INTO databases (name, kind, template, generation, owner, created_at, last_session_end, in_use, pinned, expires_at, connection_limit, memory_limit_mb, origin) VALUES ` +
    records.map(databaseValues).join(', ') +
    ` ON CONFLICT (name) DO UPDATE SET kind = EXCLUDED.kind, template = EXCLUDED.template, generation = EXCLUDED.generation, ` +
    `owner = EXCLUDED.owner, created_at = EXCLUDED.created_at, last_session_end = EXCLUDED.last_session_end, ` +
    `in_use = EXCLUDED.in_use, pinned = EXCLUDED.pinned, expires_at = EXCLUDED.expires_at, connection_limit = EXCLUDED.connection_limit, memory_limit_mb = EXCLUDED.memory_limit_mb, origin = EXCLUDED.origin`
  );
}

function databaseValues(r: DatabaseRecord): string {
  return (
    '(' +
    [
      quoteLiteral(r.name),
      quoteLiteral(r.kind),
      quoteLiteral(r.template),
      int(r.generation),
      quoteLiteral(r.owner),
      timestamp(r.createdAt),
      timestamp(r.lastSessionEnd),
      String(r.inUse),
      String(r.pinned),
      timestamp(r.expiresAt),
      r.connectionLimit === null ? 'NULL' : int(r.connectionLimit),
      r.memoryLimitMb === null ? 'NULL' : int(r.memoryLimitMb),
      quoteLiteral(r.origin),
    ].join(', ') +
    ')'
  );
}

/** Clock milliseconds as a timestamptz, so people reading pgx_control see real times. */
function timestamp(ms: number | null): string {
  if (ms === null) return 'NULL';
  return `to_timestamp(${finite(ms) / 1000})`;
}

/** Epoch ms as text: no cast that could fail ('infinity' reads 'Infinity'); storedTime clamps it. */
function epochMs(column: string): string {
  return `(extract(epoch FROM ${column}) * 1000)::text`;
}

function int(n: number): string {
  return String(Math.trunc(finite(n)));
}

function finite(n: number): number {
  // Numbers are inlined into SQL text: never let NaN or Infinity through.
  if (!Number.isFinite(n)) throw new RangeError(`not a finite number: ${n}`);
  return n;
}

/** A create that finds the object already there (42P04) did what was asked. */
async function ignoreDuplicate<T>(work: Promise<T>): Promise<T | undefined> {
  try {
    return await work;
  } catch (err) {
    if (postgresSqlstate(err) === '42P04') return undefined;
    throw err;
  }
}

function saveTemplateSql(t: TemplateRecord): string {
  return (
    `INSERT INTO templates (name, sealed, sealed_at, strategy, generation, snapshot_of, group_grants_from, kept) VALUES ` +
    `(${quoteLiteral(t.name)}, ${t.sealed}, ${timestamp(t.sealedAt)}, ${quoteLiteral(COPY_STRATEGY)}, ${int(t.generation)}, ` +
    `${t.snapshotOf === null ? 'NULL' : quoteLiteral(t.snapshotOf)}, ${t.groupGrantsFrom === null ? 'NULL' : int(t.groupGrantsFrom)}, ${t.kept}) ` +
    `ON CONFLICT (name) DO UPDATE SET sealed = EXCLUDED.sealed, sealed_at = EXCLUDED.sealed_at, ` +
    `strategy = EXCLUDED.strategy, generation = EXCLUDED.generation, snapshot_of = EXCLUDED.snapshot_of, ` +
    `group_grants_from = EXCLUDED.group_grants_from, kept = EXCLUDED.kept`
  );
}
