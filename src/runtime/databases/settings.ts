// The settings of disposable databases, with their defaults. The CLI maps flags and the config file
// onto them (zod at that edge); each names the flag its error hints mention.

import type { MintRoles } from './permissions.js';
import { DEFAULT_ALLOWED_EXTENSIONS } from '../templates/extension-guard.js';

export interface DatabaseSettings {
  /** Names under it are minted on connect (--prefix). */
  prefix: string;
  /** Seconds a minted database lives after its last session (--grace). */
  graceSeconds: number;
  /** Seconds a name PGX dropped answers 3D000 with the reason instead of minting (--tombstone); 0: none. */
  tombstoneSeconds: number;
  /** Seconds a database just minted or routed to is kept with no session seen yet. */
  protectSeconds: number;
  /** Warm spares per sealed template (--pool-size); 0 disables the pool; 'auto': poolSizeFor(). */
  poolSize: number | 'auto';
  /** Spares per template at most after bursts (--pool-max): a mint that found none ready asks one for each mint of the template under way. */
  poolMax: number;
  /** Seconds without a mint of a template after which its pool shrinks back to poolSize (--pool-idle). */
  poolIdleSeconds: number;
  /** Who may mint on connect (--mint-roles): default roles with CREATEDB (and superusers). */
  mintRoles: MintRoles;
  /** Minted databases at most (--max-databases). */
  maxDatabases: number;
  /** Minted databases per owning role at most (--max-databases-per-role); null: no cap. */
  maxDatabasesPerRole: number | null;
  /** Connections creating databases at once. */
  mintWorkers: number;
  /** Mint worker connections kept open while no mint waits; the others open for a burst and close after it. */
  mintWorkersIdle: number;
  /** Mint requests allowed to wait for a worker (--mint-queue-size). */
  mintQueueSize: number;
  /** Seconds the mint queue may go without a request finishing; then those waiting get 57P03 (--mint-timeout). */
  mintTimeoutSeconds: number;
  janitorIntervalMs: number;
  /** Drops per janitor task per pass at most. */
  janitorBatch: number;
  /** How often the janitor checks the records against pg_database. */
  reconcileIntervalMs: number;
  /** How soon after a database's activity the runtime looks for tables to vacuum (vacuum.ts). */
  vacuumDelayMs: number;
  /** Extensions tenants may create (--allow-extensions); extension-guard.ts. */
  allowedExtensions: readonly string[];
  /** Snapshots a database keeps at most, those taken with keep not counted (--snapshot-retention); null: no cap. */
  snapshotRetention: number | null;
  /**
   * How long the dropper's and the trash's connections stay after their last drop: a loop of drops
   * (several a second) keeps its backends, those of a burst that is over are gone soon after.
   */
  dropConnectionIdleMs: number;
  /** How long a mint that found no spare ready waits for the one a refill is making before it copies the template itself. */
  spareWaitMs: number;
}

export const DEFAULT_DATABASE_SETTINGS: DatabaseSettings = {
  prefix: 'tdb_',
  graceSeconds: 15,
  tombstoneSeconds: 86_400,
  protectSeconds: 5,
  poolSize: 'auto',
  // Idle spares cost no memory (the density benchmark: PSS flat from 0 to 1,000 untouched databases);
  // on disk the pool caps extra spares of a copying filesystem at a tenth of the free space.
  poolMax: 500,
  poolIdleSeconds: 600,
  mintRoles: { kind: 'createdb' },
  maxDatabases: 10_000,
  maxDatabasesPerRole: null,
  // A burst of cold mints: on the 2-core machine 8 CREATE DATABASE at once made 1.5-4x the databases a
  // second of 2 at once (noisy, 2026-12-02; WAL_LOG and FILE_COPY alike), and PostgreSQL alone makes
  // the same at 100 in flight. One stays connected while no mint waits: warm claims have their own
  // connection, so an idle worker serves only a cold mint with no spare ready, and each idle backend
  // holds 2-4 MB (its own memory and its share of PostgreSQL's mapped files), which density counts.
  mintWorkers: 8,
  mintWorkersIdle: 1,
  // A waiter costs a promise and a closure; a burst of thousands must wait, not be refused.
  mintQueueSize: 10_000,
  mintTimeoutSeconds: 30,
  janitorIntervalMs: 1000,
  janitorBatch: 64,
  reconcileIntervalMs: 60_000,
  // Long enough for backends to have flushed their statistics (PostgreSQL does within 10 s of idling).
  vacuumDelayMs: 30_000,
  allowedExtensions: DEFAULT_ALLOWED_EXTENSIONS,
  snapshotRetention: null,
  dropConnectionIdleMs: 10_000,
  // A spare of a small template took 20-60 ms at nice 19 beside 4 clients' lifecycles on 2 cores (p50
  // 32 ms, p90 58 ms), a copy on the client's path 40-70 ms. The bound keeps a refill stuck behind
  // the template's lock from holding a client longer than a copy of its own would.
  spareWaitMs: 100,
};

/**
 * The spares --pool-size auto keeps per template. Where the filesystem clones, a spare costs a
 * directory of metadata on disk and no memory at rest (density: PSS flat from 0 to 1,000 untouched
 * databases), and four clients minting in a loop find a pool of 2 empty while its refill runs: their
 * mint p99 read 4.3-5.6x its p50 with 2 spares, 2.2-3.5x with 8, every mint warm (2026-12-05,
 * docs/benchmarks.md, Lifecycles). Where files are copied, each spare holds a template's size of
 * disk, so the pool stays at 2 and grows only under bursts.
 */
export const AUTO_POOL_SIZE = { clones: 8, copies: 2 } as const;

/** The --pool-size a runtime keeps: the setting, or for 'auto' AUTO_POOL_SIZE by its filesystem. */
export function poolSizeFor(setting: number | 'auto', clones: boolean): number {
  if (setting !== 'auto') return setting;
  return clones ? AUTO_POOL_SIZE.clones : AUTO_POOL_SIZE.copies;
}
