// The shapes PGX records about templates and the databases it minted, shared by the metadata store
// (which persists them) and the registry (which holds them in memory for routing and the janitor),
// and the ranges their numbers take.

import { PgxError } from '../../errors.js';

export interface TemplateRecord {
  name: string;
  /** Sealed: ALLOW_CONNECTIONS false, frozen, and IS_TEMPLATE unless a snapshot (create-database.ts sealSql); only sealed templates are minted from. */
  sealed: boolean;
  /** Clock.now() of the last seal, or null if never sealed. */
  sealedAt: number | null;
  /** Bumped at every seal; a spare made from an older generation is stale. */
  generation: number;
  /** A snapshot (pgx_snapshot_database) of this database, or null for a template sealed as such. */
  snapshotOf: string | null;
  /**
   * A snapshot kept past its database (keep): false, it goes when PGX drops its database, and counts
   * against --snapshot-retention. Templates are always kept (true).
   */
  kept: boolean;
  /**
   * The first generation from which every sealed generation carries the credentials' group grants
   * (credentials.ts, prepareDatabase); null: not known to (sealed by an older PGX, a snapshot).
   */
  groupGrantsFrom: number | null;
}

/** ephemeral: minted for a client, dropped by the janitor. spare: a warm-pool copy waiting to be claimed. */
export type DatabaseKind = 'ephemeral' | 'spare';

/**
 * How a minted database came to be: `connect`, minted by connecting to its name; `request`, created by
 * an explicit request (the HTTP API, and so `pgx db create`, MCP and the operator), whose caller was
 * handed its address. A dropped `request` database leaves a tombstone (see Tombstone).
 */
export type DatabaseOrigin = 'connect' | 'request';

export interface DatabaseRecord {
  name: string;
  kind: DatabaseKind;
  template: string;
  /** The template generation it was copied from (what makes a spare stale after a reseal). */
  generation: number;
  owner: string;
  /** Clock.now() when minted (claimed, for a warm mint) or created (a spare). */
  createdAt: number;
  /** Clock.now() when its last client session ended; null if it has not had one since it was minted. */
  lastSessionEnd: number | null;
  /** True while sessions are open: after a crash, such a database counts as idle since the restart. */
  inUse: boolean;
  pinned: boolean;
  /** Hard TTL: Clock.now() at which it is dropped whatever its sessions or pin; null for none. */
  expiresAt: number | null;
  /** Client sessions allowed at once (the engine refuses more with 53300); null: the runtime default. */
  connectionLimit: number | null;
  /** MB its backends may hold together (the engine cancels past it with 53200); null: the runtime default. */
  memoryLimitMb: number | null;
  origin: DatabaseOrigin;
}

/** What a minted database starts with besides its name and template (an explicit create sets them at once). */
export type InitialSettings = Partial<Pick<DatabaseRecord, 'pinned' | 'expiresAt' | 'connectionLimit' | 'memoryLimitMb' | 'origin'>>;

/**
 * A name PGX dropped whose address a user may still hold: a database with a TTL, or one created by a
 * request. Connecting to it answers 3D000 with the reason for --tombstone seconds, instead of minting an
 * empty database under an address that used to hold data.
 */
export interface Tombstone {
  name: string;
  /** Clock.now() of the drop. */
  droppedAt: number;
  /** Why, in a few words: "its ttl expired", "no session for --grace 15 s", ... */
  reason: string;
}

/** A record for a database just made (minted, a spare, or found without a record): no session yet, not pinned, no TTL or own limit. */
export function newDatabaseRecord(r: Pick<DatabaseRecord, 'name' | 'kind' | 'template' | 'generation' | 'owner' | 'createdAt'>): DatabaseRecord {
  return { ...r, lastSessionEnd: null, inUse: false, pinned: false, expiresAt: null, connectionLimit: null, memoryLimitMb: null, origin: 'connect' };
}

/** A range a number takes, and how a person is told it. */
export interface Bound {
  min: number;
  max: number;
  /** Whole numbers only. */
  int: boolean;
  /** min itself is out of range (a TTL must be above 0). */
  exclusiveMin?: boolean;
  text: string;
}

/**
 * The ranges of a minted database's own settings. The API's schemas (api/contract.ts), the CLI's flags
 * and the runtime's commands all check them, so nothing stored is beyond what a later read can show:
 * ten years of TTL keeps every expiry a date with a four-digit year (what ISO 8601 and most clients'
 * parsers take), and the limits sit far inside PostgreSQL's integer columns.
 */
export const BOUNDS = {
  ttlSeconds: { min: 0, exclusiveMin: true, max: 315_360_000, int: false, text: 'a number of seconds above 0 and at most 315360000 (3650 days)' },
  connectionLimit: { min: 1, max: 100_000, int: true, text: 'a whole number from 1 to 100000' },
  /** A credential role's CONNECTION LIMIT; -1 for none, as PostgreSQL has it. */
  credentialConnectionLimit: { min: -1, max: 100_000, int: true, text: 'a whole number from -1 (no limit) to 100000' },
  memoryLimitMb: { min: 1, max: 1_048_576, int: true, text: 'a whole number of MB from 1 to 1048576 (1 TiB)' },
} as const satisfies Record<string, Bound>;

export function withinBound(n: number, b: Bound): boolean {
  return Number.isFinite(n) && (!b.int || Number.isInteger(n)) && (b.exclusiveMin ? n > b.min : n >= b.min) && n <= b.max;
}

/** 0001-01-01T00:00:00.000Z and 9999-12-31T23:59:59.999Z: the times a record holds, written with four-digit years. */
const EARLIEST_TIME_MS = -62_135_596_800_000;
const LATEST_TIME_MS = 253_402_300_799_999;

/** A time clamped to what records hold (NaN reads as the latest: never). */
export function clampTime(ms: number): number {
  if (Number.isNaN(ms)) return LATEST_TIME_MS;
  return Math.min(Math.max(ms, EARLIEST_TIME_MS), LATEST_TIME_MS);
}

/** 22023 for a number outside its range, the hint giving the range. */
export function checkBound(what: string, n: number, bound: Bound, orElse?: string): void {
  if (withinBound(n, bound)) return;
  throw new PgxError('INVALID_PARAMETER', `${what} of ${n} is out of range`, { hint: `Give ${bound.text}${orElse ? `, ${orElse}` : ''}.` });
}
