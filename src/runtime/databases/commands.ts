// What a user can do to a minted database besides connecting: pin it against the janitor, unpin it
// (a fresh grace starts), give it a hard TTL or its own limits (the HTTP API's; no SQL function), drop
// it. Each checks who asks against PostgreSQL's catalogs first: superusers, or the database's owner;
// dropping a database PGX did not mint is for superusers only.

import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Dropper } from './dropper.js';
import type { MetadataStore } from './metadata.js';
import { controlSqlName, databaseDoesNotExist, isReservedName, isSystemDatabase } from './names.js';
import { functionDenied, type Permissions } from './permissions.js';
import { BOUNDS, checkBound, type DatabaseRecord } from './records.js';
import type { Registry } from './registry.js';
import type { SessionCounts } from './session-counts.js';
import { Tombstones } from './tombstones.js';


export interface CommandCaller {
  user: string;
  /** The database the caller is connected to (it cannot drop that one). */
  database: string;
}

export interface DatabaseCommandsOptions {
  prefix: string;
  registry: Registry;
  metadata: MetadataStore;
  permissions: Permissions;
  sessions: SessionCounts;
  dropper: Dropper;
  clock: Clock;
}

/** A TTL in seconds within BOUNDS, or null for none. */
export function checkTtl(seconds: number | null): void {
  if (seconds !== null) checkBound('a TTL', seconds, BOUNDS.ttlSeconds, 'or null to clear the TTL');
}

/** A session cap within BOUNDS, or null for the runtime default. */
export function checkConnectionLimit(limit: number | null): void {
  if (limit !== null) checkBound('a connection limit', limit, BOUNDS.connectionLimit, 'or null for the runtime default (--max-sessions-per-db)');
}

/** A memory limit in MB within BOUNDS, or null for the runtime default. */
export function checkMemoryLimit(mb: number | null): void {
  if (mb !== null) checkBound('a memory limit', mb, BOUNDS.memoryLimitMb, 'or null for the runtime default (--database-memory-limit)');
}

export class DatabaseCommands {
  /** Drop calls under way, by name, from their first line: a concurrent call for the name shares one. */
  private readonly drops = new Map<string, Promise<void>>();

  constructor(private readonly opts: DatabaseCommandsOptions) {}

  /** Pins (kept past --grace) or unpins (a fresh grace starts now if it has no sessions). */
  async setPinned(name: string, pinned: boolean, user: string, fn = controlSqlName(pinned ? 'pin_database' : 'unpin_database')): Promise<DatabaseRecord> {
    await this.mintedFor(name, user, { fn });
    const fresh = !pinned && this.opts.sessions.of(name) === 0;
    return this.save(name, fresh ? { pinned, lastSessionEnd: this.opts.clock.now() } : { pinned });
  }

  /** Sets (seconds from now) or clears (null) the hard TTL of a minted database. */
  async setTtl(name: string, seconds: number | null, user: string): Promise<DatabaseRecord> {
    checkTtl(seconds);
    await this.mintedFor(name, user, 'set the TTL of');
    return this.save(name, { expiresAt: seconds === null ? null : this.opts.clock.now() + seconds * 1000 });
  }

  /** Sets (a number >= 1) or clears (null: the runtime default) the session cap of a minted database. */
  async setConnectionLimit(name: string, limit: number | null, user: string): Promise<DatabaseRecord> {
    checkConnectionLimit(limit);
    await this.mintedFor(name, user, 'set the connection limit of');
    return this.save(name, { connectionLimit: limit });
  }

  /** Sets (MB >= 1) or clears (null: the runtime default) the memory limit of a minted database's backends together. */
  async setMemoryLimit(name: string, mb: number | null, user: string): Promise<DatabaseRecord> {
    checkMemoryLimit(mb);
    await this.mintedFor(name, user, 'set the memory limit of');
    return this.save(name, { memoryLimitMb: mb });
  }

  /**
   * Ends the sessions on `name` and drops it. Minted databases: their owner or a superuser; any other
   * database: a superuser only. System databases, sealed templates and the caller's own are refused.
   */
  drop(name: string, caller: CommandCaller, fn = controlSqlName('drop_database')): Promise<void> {
    const earlier = this.drops.get(name);
    const work = this.checkedDrop(name, caller, fn, earlier);
    if (earlier === undefined) {
      this.drops.set(name, work);
      void work.catch(() => undefined).finally(() => this.drops.delete(name));
    }
    return work;
  }

  private async checkedDrop(name: string, caller: CommandCaller, fn: string, earlier: Promise<void> | undefined): Promise<void> {
    if (isReservedName(name)) throw databaseDoesNotExist(name);
    const owner = this.opts.registry.databases.get(name)?.owner;
    const access = await this.opts.permissions.access(caller.user, name);
    if (!access.exists && !this.opts.registry.databases.has(name)) {
      // A drop call for it came first and finished while this caller was checked: this one shares
      // it, as it would have a moment earlier, if the caller could have dropped it.
      if (earlier && (access.superuser || owner === caller.user)) return earlier;
      throw databaseDoesNotExist(name);
    }
    const minted = this.opts.registry.databases.has(name);
    if (!(minted ? access.ownerOrSuperuser : access.superuser)) {
      throw minted ? functionDenied(fn, name) : new PgxError('INSUFFICIENT_PRIVILEGE', `permission denied for function ${fn}`, {
        hint: `Database "${name}" was not minted by PGX: only a superuser may drop it.`,
      });
    }
    if (isSystemDatabase(name)) {
      throw new PgxError('INVALID_PARAMETER', `database "${name}" cannot be dropped: PGX and PostgreSQL rely on it`);
    }
    if (name === caller.database) {
      throw new PgxError('OBJECT_IN_USE', 'cannot drop the currently open database', { hint: 'Connect to another database (e.g. postgres) and drop it from there.' });
    }
    if (this.opts.registry.templates.get(name)?.sealed) {
      throw new PgxError('OBJECT_IN_USE', `cannot drop database "${name}": it is a sealed template`, {
        hint: `Unseal it first: SELECT pgx_unseal_template('${name}').`,
      });
    }
    await this.opts.dropper.drop(
      name,
      { message: `terminating connection: database "${name}" was dropped`, hint: `Role "${caller.user}" called ${fn}('${name}').` },
      `${fn} called by role "${caller.user}"`,
      Tombstones.reasonFor(this.opts.registry.databases.get(name), `dropped by role "${caller.user}"`),
    );
    if (this.opts.registry.templates.has(name)) {
      this.opts.registry.templates.delete(name);
      await this.opts.metadata.deleteTemplate(name);
    }
  }

  /** Changes the record in memory at once (merged with concurrent changes), then on disk. */
  private async save(name: string, patch: Partial<DatabaseRecord>): Promise<DatabaseRecord> {
    const record = this.opts.registry.update(name, patch);
    // Dropped while the caller's permission was being checked.
    if (!record) throw databaseDoesNotExist(name);
    await this.opts.metadata.saveDatabase(record);
    return record;
  }

  /**
   * The record of a minted database the caller owns (or any, for a superuser). `used`: what the caller
   * called, for a refusal: a control function ({ fn }), or an operation with no SQL name (the HTTP API's
   * TTL and limits: 'set the TTL of').
   */
  private async mintedFor(name: string, user: string, used: { fn: string } | string): Promise<DatabaseRecord> {
    if (isReservedName(name)) throw databaseDoesNotExist(name);
    const access = await this.opts.permissions.access(user, name);
    if (!access.exists) throw databaseDoesNotExist(name);
    if (!access.ownerOrSuperuser) {
      if (typeof used !== 'string') throw functionDenied(used.fn, name);
      throw new PgxError('INSUFFICIENT_PRIVILEGE', `permission denied to ${used} database "${name}"`, { hint: `Only a superuser or the owner of database "${name}" may.` });
    }
    const d = this.opts.registry.databases.get(name);
    if (!d) {
      throw new PgxError('INVALID_PARAMETER', `database "${name}" was not minted by PGX`, {
        hint: `Only minted databases (${this.opts.prefix}<template>__<token>) are dropped by the janitor, so only they can be pinned or given a TTL.`,
      });
    }
    return d;
  }
}

