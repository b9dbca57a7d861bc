// The janitor's tasks: what ends a database's life (its hard TTL, or the grace period after its last
// session), the removal of stale warm spares, and keeping counters on disk. Each decides from the
// registry and the clock alone, so a pass after a restart resumes from the recorded times. The
// deadlines are indexed (expiries.ts): a pass looks at the due databases only.

import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import type { Counters } from './counters.js';
import type { Dropper, EngineSessions } from './dropper.js';
import type { JanitorTask } from './janitor.js';
import type { MetadataStore } from './metadata.js';
import { Expiries } from './expiries.js';
import type { DatabaseRecord } from './records.js';
import { Tombstones } from './tombstones.js';
import type { Registry } from './registry.js';
import type { SessionCounts } from './session-counts.js';

export { idleDueAt } from './expiries.js';

/** PostgreSQL's object_in_use: a drop refused while a prepared transaction holds the database. */
const OBJECT_IN_USE = '55006';
/** A refused drop is tried again --grace later, and never sooner than this. */
const MIN_REFUSED_RETRY_MS = 1000;

export interface LifecycleOptions {
  prefix: string;
  /** --grace: how long a minted database lives after its last session ends. */
  graceMs: number;
  /** How long a database just minted or routed to is kept although no session has been seen yet. */
  protectMs: number;
  /** At most this many drops per task per pass. */
  batch: number;
  registry: Registry;
  sessions: SessionCounts;
  engine: EngineSessions;
  dropper: Dropper;
  counters: Counters;
  clock: Clock;
  logger: Logger;
}

/**
 * The two tasks that end minted databases' lives, sharing one index of deadlines (expiries.ts): each
 * pass takes only the due databases off it, so an idle pass costs nothing per database that exists.
 */
export function lifecycleTasks(o: LifecycleOptions): JanitorTask[] {
  const expiries = new Expiries(o);
  return [expireTtlTask(o, expiries), dropIdleTask(o, expiries)];
}

/** Drops databases whose hard TTL has passed, ending their sessions with 57P01 first; pins do not help. */
function expireTtlTask(o: LifecycleOptions, expiries: Expiries): JanitorTask {
  return {
    name: 'expire-ttl',
    async run() {
      const due = expiries.takeExpired(o.clock.now(), o.batch);
      await dropEach(o, expiries, due, (d) => {
        const at = new Date(d.expiresAt!).toISOString();
        return o.dropper.drop(
          d.name,
          {
            message: `terminating connection: database "${d.name}" expired at ${at}`,
            hint: `Its TTL ran out and it is being dropped; connect to a new ${o.prefix}${d.template}__<token> name for a fresh copy.`,
          },
          `ttl: expires_at ${at} has passed`,
          Tombstones.reasonFor(d, 'its ttl expired'),
        );
      });
      return due.length;
    },
  };
}

/**
 * Drops unpinned minted databases idle for --grace since their last session (or since minted). A
 * database with a TTL is not one of them: its TTL is its lifetime, sessions or not.
 */
function dropIdleTask(o: LifecycleOptions, expiries: Expiries): JanitorTask {
  return {
    name: 'drop-idle',
    async run() {
      const due = expiries.takeIdle(o.clock.now(), o.batch, () => o.engine.sessionsPerDatabase());
      await dropEach(o, expiries, due, (d) => {
        const idle = `no session for --grace ${o.graceMs / 1000} s`;
        return o.dropper.drop(d.name, null, `idle: ${idle}`, Tombstones.reasonFor(d, idle));
      });
      return due.length;
    },
  };
}

/**
 * Drops `due` one at a time, stopping when the runtime stops. What was taken from the index and not
 * dropped (a stop, a failure) goes back on it, so the next pass (or the next start) tries again. A
 * drop PostgreSQL refuses because the database is in use (55006: a prepared transaction holds it) is
 * logged with what to do and tried again --grace later (1 s at least); the rest of the batch goes on.
 * The janitor never finishes a prepared transaction itself: rolling it back would lose data a
 * client was promised, committing it would be a decision that is not ours.
 */
async function dropEach(o: LifecycleOptions, expiries: Expiries, due: DatabaseRecord[], drop: (d: DatabaseRecord) => Promise<void>): Promise<void> {
  const settled = new Set<string>();
  try {
    for (const d of due) {
      if (o.dropper.closing) break;
      try {
        await drop(d);
      } catch (err) {
        if (!(err instanceof PgxError && err.sqlstate === OBJECT_IN_USE)) throw err;
        const retryMs = Math.max(o.graceMs, MIN_REFUSED_RETRY_MS);
        expiries.retryAt(d.name, o.clock.now() + retryMs);
        settled.add(d.name);
        o.logger.warn('database-drop-refused', { database: d.name, reason: err.message, detail: err.detail, hint: err.hint, retryInSeconds: retryMs / 1000 });
        continue;
      }
      settled.add(d.name);
      o.counters.add('janitor.drops');
    }
  } finally {
    for (const d of due) if (!settled.has(d.name)) expiries.changed(d.name);
  }
}

/** Drops spares of an older template generation (after unseal or reseal) or left suspect by a claim. */
export function dropStaleSparesTask(o: LifecycleOptions): JanitorTask {
  return {
    name: 'drop-stale-spares',
    async run() {
      const stale = o.registry.staleSpares().slice(0, o.batch);
      for (const s of stale) {
        if (o.dropper.closing) break;
        await o.dropper.drop(s.name, null, `stale spare of template "${s.template}": unsealed or resealed since (--pool-size refills it)`);
      }
      return stale.length;
    },
  };
}

/** Writes counters that changed to pgx_control, so they count over the data directory's life. */
export function flushCountersTask(counters: Counters, metadata: MetadataStore): JanitorTask {
  return {
    name: 'flush-counters',
    async run() {
      const changed = counters.takeDirty();
      if (changed.length === 0) return 0;
      try {
        await metadata.saveCounters(changed);
      } catch (err) {
        counters.markDirty(changed.map(([name]) => name));
        throw err;
      }
      return changed.length;
    },
  };
}
