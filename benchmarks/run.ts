// `npm run bench -- NAME [options]`: runs one benchmark by name. Each benchmark is a module with a
// `main(argv)` that returns an exit code.

interface Benchmark {
  about: string;
  load(): Promise<{ main(argv: string[]): Promise<number> }>;
}

const BENCHMARKS: Record<string, Benchmark> = {
  overhead: {
    about: 'pgbench -S / -C and a 1M-row scan: PostgreSQL direct vs the PGX engine vs PgBouncer, one run',
    load: () => import('./overhead.js'),
  },
  mint: {
    about: 'warm and cold mint vs a plain connect and CREATE DATABASE + connect on PostgreSQL 18',
    load: () => import('./mint.js'),
  },
  burst: {
    about: '500 simultaneous connects to new names: errors and drain time, vs CREATE DATABASE on PG18',
    load: () => import('./burst.js'),
  },
  density: {
    about: 'memory (PSS) and idle CPU with 1,000 databases, untouched and queried once; autovacuum',
    load: () => import('./density.js'),
  },
  operator: {
    about: '200 Branches applied at once: apply -> Ready and TTL expiry -> dropped, API double + runtimes',
    load: () => import('./operator.js'),
  },
  credentials: {
    about: 'runtime CPU per credential and per create through the HTTP API (what a Branch costs the runtime)',
    load: () => import('./credentials.js'),
  },
  churn: {
    about: '10,000 create -> query -> drop lifecycles: memory retained per lifecycle, lifecycles/s',
    load: () => import('./churn.js'),
  },
  lifecycles: {
    about: 'create -> migrate -> 20 queries -> drop by 1/4/16 workers: pgx_drop_database, grace expiry, vs CREATE/DROP DATABASE',
    load: () => import('./lifecycles.js'),
  },
  'first-session': {
    about: "a new database's first client (connect, a migration, 20 statements) now and then on XFS: PGX vs CREATE DATABASE",
    load: () => import('./first-session.js'),
  },
  isolation: {
    about: 'victim p50/p99 beside a 50-connection migration neighbour, no cap vs --max-active-per-db 1/2/5; runaway query to 53200',
    load: () => import('./isolation.js'),
  },
  cow: {
    about: 'branches of 1-10 GB templates on XFS reflink: ready time, new storage, vs full copies; neighbour latency',
    load: () => import('./cow.js'),
  },
  'mint-ab': {
    about: 'warm mint A/B in one run: --base DIR (a commit before) vs this tree, against a plain connect, samples interleaved',
    load: () => import('./mint-ab.js'),
  },
  'login-check': {
    about: 'A/B of pgbench -S -C through two runtimes, --base DIR (a commit before) vs this tree: the reuse login check',
    load: () => import('./login-check.js'),
  },
  frameworks: {
    about: 'framework lifecycles (pg, postgres.js, Knex, Kysely, TypeORM, Sequelize, Drizzle) per phase, engine vs direct',
    load: () => import('./frameworks.js'),
  },
};

function usage(): string {
  const names = Object.entries(BENCHMARKS).map(([name, b]) => `  ${name.padEnd(12)} ${b.about}`);
  return ['Usage: npm run bench -- NAME [options]   (NAME --help for its options)', '', 'Benchmarks:', ...names, ''].join('\n');
}

async function run(argv: string[]): Promise<number> {
  const [name, ...rest] = argv;
  const bench = name === undefined ? undefined : BENCHMARKS[name];
  if (!bench) {
    if (name !== undefined && name !== '--help' && name !== '-h') process.stderr.write(`unknown benchmark: ${name}\n\n`);
    process.stderr.write(usage());
    return name === undefined || name === '--help' || name === '-h' ? 0 : 2;
  }
  return (await bench.load()).main(rest);
}

run(process.argv.slice(2)).then(
  (code) => (process.exitCode = code),
  (err: unknown) => {
    const e = err as Error & { hint?: string };
    process.stderr.write(`benchmark failed: ${e.message}\n${e.hint ? `hint: ${e.hint}\n` : ''}`);
    process.exitCode = 1;
  },
);
