// One framework lifecycle, as the tests and the benchmark run it: create a database from the template,
// migrate, load fixtures, run model tests, a second migration (a column, an index, constraints, a
// rename), the model tests again, undo the migrations, drop the database. Each framework's module
// (test/compat/lifecycles/<framework>.ts) supplies the middle phases; runLifecycle() times every phase
// and keeps what the lifecycle observed, so the test compares the two targets and the benchmark
// compares their times.

import pg from 'pg';
import { Recorder, type Entry } from './recorder.js';
import type { Settings, Target, TargetName } from './targets.js';

export const PHASES = ['create', 'migrate', 'fixtures', 'model', 'migrate2', 'model2', 'down', 'drop'] as const;
export type Phase = (typeof PHASES)[number];
/** The phases the framework does; create and drop are the database's, the same for every framework. */
export const FRAMEWORK_PHASES = ['migrate', 'fixtures', 'model', 'migrate2', 'model2', 'down'] as const satisfies readonly Phase[];

export interface Context {
  target: TargetName;
  /** This run's database on this target. */
  db: Settings;
  /** What the lifecycle saw; steps record into it. */
  rec: Recorder;
  /** The lifecycle's project directory from prepare(), shared by both targets (read only). */
  projectDir: string;
  /** The tables, columns, constraints and indexes of the database now, through a session of the runner's own. */
  schema(): Promise<SchemaSnapshot>;
  /** Rows of a catalog or bookkeeping query on the runner's own session (not the framework's). */
  inspect(sql: string): Promise<Record<string, unknown>[]>;
}

/** One run of a lifecycle on one target: the framework's phases, in order, then close(). */
export interface LifecycleRun {
  migrate(): Promise<void>;
  fixtures(): Promise<void>;
  model(): Promise<void>;
  migrate2(): Promise<void>;
  model2(): Promise<void>;
  /** Undoes both migrations with the framework's own rollback where it has one. */
  down(): Promise<void>;
  /** Ends every session the run opened (timed as part of drop). */
  close(): Promise<void>;
}

export interface Lifecycle {
  name: string;
  /** What it exercises, one line. */
  about: string;
  /**
   * Once per test run or benchmark, shared by both targets and untimed: writes the project directory
   * (config, migration files; drizzle-kit generate runs here, since it never touches a database).
   */
  prepare(parent: string): Promise<string>;
  start(ctx: Context): LifecycleRun;
}

export interface SchemaSnapshot {
  columns: unknown[];
  constraints: unknown[];
  indexes: unknown[];
}

const USER_SCHEMAS = "n.nspname NOT IN ('pg_catalog', 'information_schema') AND n.nspname NOT LIKE 'pg_toast%'";

async function snapshot(c: pg.Client): Promise<SchemaSnapshot> {
  const columns = await c.query({
    text: `SELECT n.nspname || '.' || cl.relname AS table, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type,
                  a.attnotnull AS not_null, pg_get_expr(d.adbin, d.adrelid) AS default
             FROM pg_class cl JOIN pg_namespace n ON n.oid = cl.relnamespace
             JOIN pg_attribute a ON a.attrelid = cl.oid AND a.attnum > 0 AND NOT a.attisdropped
             LEFT JOIN pg_attrdef d ON d.adrelid = cl.oid AND d.adnum = a.attnum
            WHERE ${USER_SCHEMAS} AND cl.relkind IN ('r', 'p')
            ORDER BY 1, a.attnum`,
    rowMode: 'array',
  });
  const constraints = await c.query({
    text: `SELECT n.nspname || '.' || cl.relname AS table, co.conname, pg_get_constraintdef(co.oid) AS def
             FROM pg_constraint co JOIN pg_class cl ON cl.oid = co.conrelid JOIN pg_namespace n ON n.oid = cl.relnamespace
            WHERE ${USER_SCHEMAS} ORDER BY 1, 2`,
    rowMode: 'array',
  });
  const indexes = await c.query({
    text: `SELECT schemaname || '.' || tablename AS table, indexname, indexdef FROM pg_indexes n
            WHERE ${USER_SCHEMAS.replace(/n\.nspname/g, 'schemaname')} ORDER BY 1, 2`,
    rowMode: 'array',
  });
  return { columns: columns.rows, constraints: constraints.rows, indexes: indexes.rows };
}

export interface RunResult {
  target: TargetName;
  entries: Entry[];
  /** Milliseconds per phase. */
  times: Record<Phase, number>;
}

export interface RunOptions {
  /** Untimed, between create and migrate: the benchmark waits here for the runtime's warm-pool refill. */
  afterCreate?: () => Promise<void>;
}

/**
 * Runs one lifecycle on one target: every phase in order, timed; on a failure the run is still closed
 * and its database dropped, and the error names the phase.
 */
export async function runLifecycle(lifecycle: Lifecycle, target: Target, projectDir: string, opts: RunOptions = {}): Promise<RunResult> {
  const rec = new Recorder();
  const times = {} as Record<Phase, number>;
  let database: string | null = null;
  let run: LifecycleRun | null = null;
  let inspector: pg.Client | null = null;
  let closed = false;
  const timed = async (phase: Phase, fn: () => Promise<void>): Promise<void> => {
    rec.phase = phase;
    const started = performance.now();
    try {
      await fn();
    } catch (err) {
      if (err instanceof Error && !err.message.startsWith(`${phase}:`)) err.message = `${phase}: ${err.message}`;
      throw err;
    }
    times[phase] = performance.now() - started;
  };
  const session = async (): Promise<pg.Client> => {
    if (inspector === null) {
      const c = new pg.Client({ ...target.settings(database!), application_name: 'compat_inspector' });
      c.on('error', () => undefined);
      await c.connect();
      inspector = c;
    }
    return inspector;
  };
  const endInspector = async (): Promise<void> => {
    const c = inspector;
    inspector = null;
    await c?.end().catch(() => undefined);
  };
  try {
    await timed('create', async () => {
      database = await target.create(lifecycle.name);
    });
    await opts.afterCreate?.();
    const ctx: Context = {
      target: target.name,
      db: target.settings(database!),
      rec,
      projectDir,
      schema: async () => snapshot(await session()),
      inspect: async (sql) => (await (await session()).query<Record<string, unknown>>(sql)).rows,
    };
    run = lifecycle.start(ctx);
    for (const phase of FRAMEWORK_PHASES) await timed(phase, () => run![phase]());
    await timed('drop', async () => {
      closed = true;
      await run!.close();
      await endInspector();
      await target.drop(database!);
      database = null;
    });
  } finally {
    if (!closed) await run?.close().catch(() => undefined);
    await endInspector();
    if (database !== null) await target.drop(database).catch(() => undefined);
  }
  return { target: target.name, entries: rec.entries, times };
}

/** `name  target  create 12 | migrate 85 | ... ms`: one line per run, for the test output. */
export function formatTimes(name: string, r: RunResult): string {
  return `${name.padEnd(14)} ${r.target.padEnd(6)} ${PHASES.map((p) => `${p} ${Math.round(r.times[p])}`).join(' | ')} ms`;
}
