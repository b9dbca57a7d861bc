// A target is one way of reaching the same PostgreSQL: directly, through the PGX engine, or through
// PgBouncer; in the overhead benchmark, on request, also through a bare relay on Node.js or on Bun. libpq clients
// take it as PGHOST/PGPORT (a directory in PGHOST means a Unix socket).

/** The three targets every benchmark compares (the frameworks bench keys its tables by these). */
export type TargetName = 'direct' | 'pgx' | 'pgbouncer';

export const TARGET_NAMES: readonly TargetName[] = ['direct', 'pgx', 'pgbouncer'];

/**
 * The overhead benchmark's targets: the three, and the opt-in `relay` (node-relay-main.ts), the floor
 * any Node.js proxy has on the machine, with `bun-relay`, the same relay run by Bun, and `pgx-bun`, a
 * PGX runtime of its own run by Bun (`bun bin/pgx.js start`), `pgx-node`, the same
 * on Node.js (`node bin/pgx.js start`: its CPU read from /proc like PgBouncer's, none of the
 * benchmark's in it), and `pooler` (node-pooler-main.ts), the
 * floor of a Node.js session pooler per connection. A separate union, so
 * benchmarks that only know the three keep exhaustive records of them.
 */
export type OverheadTargetName = TargetName | 'relay' | 'bun-relay' | 'pgx-bun' | 'pgx-node' | 'pooler';

export const OVERHEAD_TARGET_NAMES: readonly OverheadTargetName[] = ['direct', 'pgx', 'pgbouncer', 'relay', 'bun-relay', 'pgx-bun', 'pgx-node', 'pooler'];

export const TARGET_LABELS: Record<OverheadTargetName, string> = {
  direct: 'PostgreSQL direct',
  pgx: 'PGX engine',
  pgbouncer: 'PgBouncer',
  relay: 'Node relay',
  'bun-relay': 'Bun relay',
  'pgx-bun': 'PGX engine on Bun',
  'pgx-node': 'PGX engine, own process',
  pooler: 'Node pooler',
};

export interface Target {
  name: OverheadTargetName;
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
