// Vacuum where there was activity. PostgreSQL's autovacuum launcher visits every database that has
// statistics once per autovacuum_naptime, forking a worker per visit: with a thousand databases each
// queried once, that is a fork every few hundred milliseconds on a runtime that is otherwise idle. The
// profile therefore sets a long naptime (autovacuum still runs, and still prevents wraparound), and
// this task does what autovacuum would do, only for databases that had sessions since it last looked:
// tables past autovacuum's own thresholds (dead tuples over 50 + 20% of the rows; changes since the
// last analyze over 50 + 10%) get VACUUM (ANALYZE). A database nobody touched costs nothing, and one
// whose rows did not change since the last look (pg_stat_database, read for all of them in one query
// on an existing connection) costs no connection either: only changed ones are connected to.

import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';
import type { JanitorTask } from './janitor.js';
import { quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

export interface ActivityVacuumOptions {
  /** A superuser connection inside the named database, search_path empty (closed after use). */
  connect: (database: string) => Promise<SqlClient>;
  /** A connection kept open (pg_stat_database is a cluster-wide view): the runtime's control connection. */
  shared: () => Promise<SqlClient>;
  /** Whether the database may be connected to and is worth vacuuming (not PGX's, not sealed). */
  exists: (database: string) => boolean;
  /** Databases with sessions open now: looked at every BUSY_EVERY intervals while they stay busy. */
  busy: () => Iterable<string>;
  /** How long after a database's activity it is looked at (its statistics must have been flushed). */
  intervalMs: number;
  /** Databases looked at per pass at most. */
  batch: number;
  clock: Clock;
  logger: Logger;
}

/** Tables autovacuum would pick, by its default thresholds. */
const DUE_TABLES = `
SELECT n.nspname, c.relname
FROM pg_catalog.pg_stat_user_tables s
JOIN pg_catalog.pg_class c ON c.oid = s.relid
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE c.relpersistence = 'p'
  AND (s.n_dead_tup > 50 + 0.2 * greatest(c.reltuples, 0)
       OR s.n_mod_since_analyze > 50 + 0.1 * greatest(c.reltuples, 0))
ORDER BY s.n_dead_tup DESC
LIMIT 20`;

/** A database that stays busy is looked at every this many intervals (5 min by default). */
const BUSY_EVERY = 10;
/** Rows inserted, updated or deleted since the last look below which a database is not connected to (autovacuum's base threshold). */
const MIN_CHANGES = 50;

export class ActivityVacuum {
  /** Database -> Clock.monotonic() of its first activity since it was last looked at. */
  private readonly touched = new Map<string, number>();
  /** Busy database -> when it was last touched for being busy. */
  private readonly busySince = new Map<string, number>();
  /** Database -> its row changes (pg_stat_database) when last looked at. */
  private readonly changesSeen = new Map<string, number>();

  constructor(private readonly opts: ActivityVacuumOptions) {}

  /** A session on `database` ended (or it is busy): look at it on a coming pass. */
  touch(database: string): void {
    if (!this.touched.has(database)) this.touched.set(database, this.opts.clock.monotonic());
  }

  /** `database` was dropped: nothing about it is kept. */
  forget(database: string): void {
    this.touched.delete(database);
    this.busySince.delete(database);
    this.changesSeen.delete(database);
  }

  task(): JanitorTask {
    return { name: 'vacuum-active', run: () => this.pass() };
  }

  private async pass(): Promise<number> {
    const now = this.opts.clock.monotonic();
    this.touchBusy(now);
    const due: string[] = [];
    for (const [database, since] of this.touched) {
      if (due.length >= this.opts.batch) break;
      if (now - since < this.opts.intervalMs) continue;
      this.touched.delete(database);
      if (this.opts.exists(database)) due.push(database);
    }
    if (due.length === 0) return 0;
    let vacuumed = 0;
    for (const database of await this.changed(due)) {
      vacuumed += await this.vacuumDue(database).catch((err: unknown) => {
        // Dropped meanwhile, or busy: the next activity brings it back.
        this.opts.logger.debug('vacuum-skipped', { database, err });
        return 0;
      });
    }
    return vacuumed;
  }

  /** Of `databases`, those with at least MIN_CHANGES rows inserted, updated or deleted since the last look. */
  private async changed(databases: string[]): Promise<string[]> {
    const list = databases.map((d) => quoteLiteral(d)).join(', ');
    const { rows } = await (await this.opts.shared()).query(
      `SELECT datname, tup_inserted + tup_updated + tup_deleted FROM pg_catalog.pg_stat_database WHERE datname IN (${list})`,
    );
    const out: string[] = [];
    for (const [database, total] of rows) {
      const changes = Number(total);
      if (changes - (this.changesSeen.get(database!) ?? 0) >= MIN_CHANGES) out.push(database!);
      this.changesSeen.set(database!, changes);
    }
    // Forget databases that are gone (not in pg_stat_database any more).
    const present = new Set(rows.map(([d]) => d!));
    for (const d of databases) if (!present.has(d)) this.changesSeen.delete(d);
    return out;
  }

  private touchBusy(now: number): void {
    const busy = new Set(this.opts.busy());
    for (const database of this.busySince.keys()) if (!busy.has(database)) this.busySince.delete(database);
    for (const database of busy) {
      const last = this.busySince.get(database);
      if (last !== undefined && now - last < BUSY_EVERY * this.opts.intervalMs) continue;
      this.busySince.set(database, now);
      this.touch(database);
    }
  }

  private async vacuumDue(database: string): Promise<number> {
    const client = await this.opts.connect(database);
    try {
      const { rows } = await client.query(DUE_TABLES);
      for (const [schema, table] of rows) {
        const started = this.opts.clock.monotonic();
        await client.query(`VACUUM (ANALYZE) ${quoteIdent(schema!)}.${quoteIdent(table!)}`);
        this.opts.logger.info('table-vacuumed', { database, table: `${schema}.${table}`, ms: Math.round(this.opts.clock.monotonic() - started) });
      }
      return rows.length;
    } finally {
      await client.close();
    }
  }
}
