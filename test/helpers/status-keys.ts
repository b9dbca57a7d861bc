// The status document's field names are a contract (pgx_runtime_status(), GET /v1/status): tests of
// both surfaces check against this one list.

/** Every key path of the status document (with a sealed template tpl_app); adding is fine (extend the list), renaming or removing is not. */
export const PINNED_STATUS_KEYS = [
  'runtime.pid',
  'runtime.postgres_pid',
  'runtime.uptime_s',
  'runtime.version',
  'runtime.postgres_version',
  'memory.pss_mb',
  'memory.rss_mb',
  'memory.processes',
  'sessions.total',
  'sessions.databases',
  'databases.total',
  'databases.ephemeral',
  'databases.spares',
  'databases.pinned',
  'databases.templates',
  'pool.tpl_app.size',
  'pool.tpl_app.ready',
  'pool.tpl_app.handouts',
  'pool.tpl_app.refills',
  'mints.warm',
  'mints.cold',
  'mints.failures',
  'mints.latency_ms.mean',
  'mints.latency_ms.p99',
  'janitor.drops',
  'janitor.last_run',
  'storage.filesystem',
  'storage.clone',
  'storage.detail',
  'limits.memory.session_mb',
  'limits.memory.database_mb',
  'limits.memory.runtime_mb',
  'limits.memory.cgroup_mb',
  'limits.memory.postmaster_oom_protected',
  'limits.memory.peak_mb',
  'limits.memory.canceled.session',
  'limits.memory.canceled.database',
  'limits.memory.canceled.runtime',
  'limits.memory.canceled.cgroup',
  'limits.memory.cgroup_guard_mb',
  'limits.memory.sessions_ended',
  'limits.disk.free_mb',
  'limits.disk.total_mb',
  'limits.disk.min_free_mb',
  'limits.disk.state',
  'limits.disk.reserve_mb',
  'limits.disk.writes_canceled',
  'limits.disk.refusals',
];

export function keyPaths(value: unknown, prefix = ''): string[] {
  if (value === null || typeof value !== 'object') return [prefix];
  return Object.entries(value as Record<string, unknown>).flatMap(([k, v]) => keyPaths(v, prefix ? `${prefix}.${k}` : k));
}
