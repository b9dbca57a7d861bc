// The status document (pgx_runtime_status(), GET /v1/status). Its field names are a contract
// with clients and the operator: add fields, never rename or remove one. Every value is observed
// (counted, measured or read from PostgreSQL), never a configured value passed off as a measurement,
// except where the field says it is a setting (pool.size).

import type { Counters } from './databases/counters.js';
import type { DiskStatus } from './postgres/disk-guard.js';
import type { TreeMemory } from './postgres/memory.js';
import type { Registry } from './databases/registry.js';
import type { StorageCapability } from './postgres/storage-probe.js';
import type { WarmPoolStats, WarmPool } from './databases/warm-pool.js';

export interface RuntimeStatus {
  runtime: {
    /** The runtime (node) process. */
    pid: number;
    /** The supervised postmaster, null while PostgreSQL is down. */
    postgres_pid: number | null;
    uptime_s: number;
    version: string;
    postgres_version: string;
  };
  /** The whole process tree (node, postmaster, backends), measured when the status was asked for. */
  memory: TreeMemory;
  sessions: {
    /** Client sessions the engine reported open. */
    total: number;
    /** Databases with at least one open session. */
    databases: number;
  };
  databases: {
    /** Databases in pg_database, PGX's own (pgx_control, spares, trash) not counted. */
    total: number;
    /** Minted databases alive (spares and templates excluded). */
    ephemeral: number;
    /** Warm spares in the cluster, stale ones waiting to be dropped included. */
    spares: number;
    /** Minted databases pinned against the janitor. */
    pinned: number;
    /** Sealed templates, snapshots included. */
    templates: number;
    /**
     * Dropped databases whose DROP DATABASE has not run yet (renamed pgx_trash_<oid>, dropped in the
     * background; see trash.ts). Each still holds its disk (in disk_usage.other_mb and used_mb): a
     * backlog that grows means drops lag behind.
     */
    trash: number;
  };
  /** Per sealed template. */
  pool: Record<string, WarmPoolStats>;
  mints: {
    warm: number;
    cold: number;
    /** Mints attempted (template sealed, role allowed) that did not produce a database: caps, queue, errors. */
    failures: number;
    latency_ms: { mean: number; p99: number };
  };
  janitor: {
    /** Minted databases dropped by the janitor (idle past --grace, or TTL expired). */
    drops: number;
    /** ISO time of the janitor's last pass, null before the first. */
    last_run: string | null;
  };
  /** The data directory's filesystem, probed at start: whether databases are clones of their template. */
  storage: StorageCapability;
  /**
   * Memory limits (settings) and what the engine's watchdog saw and did (observed); free space on the
   * data filesystem and what the disk guard did (null values when the runtime does not watch it).
   */
  limits: { memory: MemoryLimitsStatus; disk: DiskStatus | NoDiskStatus };
  /**
   * Disk used by templates, snapshots and databases, and the data filesystem's free space; measured
   * only when asked for (GET /v1/status?disk=true, pgx status): it reads every database's size. Null
   * otherwise.
   */
  disk_usage: DiskUsageStatus | null;
}

/**
 * MB by kind of database, as PostgreSQL counts them (pg_database_size: the files' apparent sizes). On a
 * filesystem that clones, clones share blocks with their template (and snapshots with their database),
 * so these add up to more than the space used: `used_mb` (the filesystem's) is what they cost together.
 */
export interface DiskUsageStatus {
  /** Sealed or unsealed templates PGX knows, snapshots not counted. */
  templates_mb: number;
  snapshots_mb: number;
  /** Minted databases. */
  databases_mb: number;
  spares_mb: number;
  /** Every other database: postgres, template0/1, pgx_control, trash not dropped yet, databases PGX does not manage. */
  other_mb: number;
  /** Clones share blocks: the kinds' sizes overlap, and used_mb is their real cost. */
  clones_share_blocks: boolean;
  /** The data filesystem (statfs). */
  used_mb: number;
  free_mb: number;
  total_mb: number;
}

export interface MemoryLimitsStatus {
  /** Settings, MB; null for no limit. runtime_mb defaults to 75% of cgroup_mb. */
  session_mb: number | null;
  database_mb: number | null;
  runtime_mb: number | null;
  /** The memory limit of the runtime's cgroup (v1 or v2), MB; null when it has none. */
  cgroup_mb: number | null;
  /** The postmaster runs with oom_score_adj -1000, so the kernel's OOM killer never picks it. */
  postmaster_oom_protected: boolean;
  /** Largest sum of tenant backends' memory seen since start, MB. */
  peak_mb: number;
  /** The cgroup guard (90% of cgroup_mb) when the runtime limit is derived from the cgroup's; else null. */
  cgroup_guard_mb: number | null;
  /** Statements canceled with 53200, per limit (cgroup: the guard). */
  canceled: { session: number; database: number; runtime: number; cgroup: number };
  /** Sessions ended with FATAL 53200 for the memory they held between statements (runtime limit). */
  sessions_ended: number;
}

/** limits.disk of a runtime that does not watch its data filesystem: the same keys, nothing observed. */
export type NoDiskStatus = { [K in keyof DiskStatus]: null };

const NO_DISK: NoDiskStatus = { free_mb: null, total_mb: null, min_free_mb: null, state: null, reserve_mb: null, writes_canceled: null, refusals: null };

const NO_MEMORY_LIMITS: MemoryLimitsStatus = {
  session_mb: null,
  database_mb: null,
  runtime_mb: null,
  cgroup_mb: null,
  postmaster_oom_protected: false,
  peak_mb: 0,
  cgroup_guard_mb: null,
  canceled: { session: 0, database: 0, runtime: 0, cgroup: 0 },
  sessions_ended: 0,
};

export interface StatusInputs {
  pid: number;
  postgresPid: number | null;
  uptimeMs: number;
  version: string;
  postgresVersion: string;
  memory: TreeMemory;
  sessions: { total: number; databases: number };
  /** Counted in pg_database when the status was asked for. */
  clusterDatabases: number;
  /** Trash databases not dropped yet (Trash.backlog). */
  trashBacklog: number;
  registry: Registry;
  pool: WarmPool;
  counters: Counters;
  janitorLastRun: number | null;
  storage: StorageCapability;
  memoryLimits: MemoryLimitsStatus | null;
  disk: DiskStatus | null;
  diskUsage: DiskUsageStatus | null;
}

export function runtimeStatus(i: StatusInputs): RuntimeStatus {
  const { registry, counters } = i;
  let pinned = 0;
  for (const d of registry.databases.values()) if (d.pinned) pinned++;
  const sealed = [...registry.templates.values()].filter((t) => t.sealed);
  const pool: Record<string, WarmPoolStats> = {};
  // Snapshots get no spares (warm-pool.ts): they are restored from, seldom minted from.
  for (const t of sealed.filter((t) => t.snapshotOf === null).map((t) => t.name).sort()) pool[t] = i.pool.stats(t);
  return {
    runtime: {
      pid: i.pid,
      postgres_pid: i.postgresPid,
      uptime_s: Math.floor(i.uptimeMs / 1000),
      version: i.version,
      postgres_version: i.postgresVersion,
    },
    memory: i.memory,
    sessions: { total: i.sessions.total, databases: i.sessions.databases },
    databases: {
      total: i.clusterDatabases,
      ephemeral: registry.databases.size,
      spares: registry.spares.size,
      pinned,
      templates: sealed.length,
      trash: i.trashBacklog,
    },
    pool,
    mints: {
      warm: counters.get('mints.warm'),
      cold: counters.get('mints.cold'),
      failures: counters.get('mints.failures'),
      latency_ms: counters.latency(),
    },
    janitor: {
      drops: counters.get('janitor.drops'),
      last_run: i.janitorLastRun === null ? null : new Date(i.janitorLastRun).toISOString(),
    },
    storage: { ...i.storage },
    limits: {
      memory: i.memoryLimits ?? { ...NO_MEMORY_LIMITS, canceled: { ...NO_MEMORY_LIMITS.canceled } },
      disk: i.disk ?? { ...NO_DISK },
    },
    disk_usage: i.diskUsage,
  };
}
