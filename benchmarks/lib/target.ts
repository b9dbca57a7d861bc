// A target is one way of reaching the same PostgreSQL: directly, through the PGX engine, or through
// PgBouncer. libpq clients take it as PGHOST/PGPORT (a directory in PGHOST means a Unix socket).

export type TargetName = 'direct' | 'pgx' | 'pgbouncer';

export const TARGET_NAMES: readonly TargetName[] = ['direct', 'pgx', 'pgbouncer'];

export const TARGET_LABELS: Record<TargetName, string> = {
  direct: 'PostgreSQL direct',
  pgx: 'PGX engine',
  pgbouncer: 'PgBouncer',
};

export interface Target {
  name: TargetName;
  /** 127.0.0.1 for TCP, or the socket directory. */
  host: string;
  port: number;
}

export const BENCH_DATABASE = 'bench';
export const BENCH_USER = 'postgres';

/** Environment for psql/pgbench aimed at a target; no inherited PG* variable leaks in. */
export function clientEnv(target: Target, database = BENCH_DATABASE): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG')) env[k] = v;
  return { ...env, PGHOST: target.host, PGPORT: String(target.port), PGUSER: BENCH_USER, PGDATABASE: database, PGCONNECT_TIMEOUT: '10' };
}
