// The janitor's tasks: what ends a database's life (its hard TTL, or the grace period after its last
// session), the removal of stale warm spares, and keeping counters on disk. Each decides from the
// registry and the clock alone, so a pass after a restart resumes from the recorded times.

import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';
import type { Counters } from './counters.js';
import type { Dropper, EngineSessions } from './dropper.js';
import type { JanitorTask } from './janitor.js';
import type { MetadataStore } from './metadata.js';
import type { DatabaseRecord } from './records.js';
import { Tombstones } from './tombstones.js';
import type { Registry } from './registry.js';
import type { SessionCounts } from './session-counts.js';

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

/** Drops databases whose hard TTL has passed, ending their sessions with 57P01 first; pins do not help. */
export function expireTtlTask(o: LifecycleOptions): JanitorTask {
  return {
    name: 'expire-ttl',
    async run() {
      const now = o.clock.now();
      const due = [...o.registry.databases.values()].filter((d) => d.expiresAt !== null && d.expiresAt <= now).slice(0, o.batch);
      for (const d of due) {
        if (o.dropper.closing) break;
        const at = new Date(d.expiresAt!).toISOString();
        await o.dropper.drop(
          d.name,
          {
            message: `terminating connection: database "${d.name}" expired at ${at}`,
            hint: `Its TTL ran out and it is being dropped; connect to a new ${o.prefix}${d.template}__<token> name for a fresh copy.`,
          },
          `ttl: expires_at ${at} has passed`,
          Tombstones.reasonFor(d, 'its ttl expired'),
        );
        o.counters.add('janitor.drops');
      }
      return due.length;
    },
  };
}

/**
 * Drops unpinned minted databases idle for --grace since their last session (or since minted). A
 * database with a TTL is not one of them: its TTL is its lifetime, sessions or not.
 */
export function dropIdleTask(o: LifecycleOptions): JanitorTask {
  return {
    name: 'drop-idle',
    async run() {
      const now = o.clock.now();
      const engineCounts = o.engine.sessionsPerDatabase();
      const due = [...o.registry.databases.values()]
        .filter((d) => !d.pinned && d.expiresAt === null && o.sessions.of(d.name) === 0 && (engineCounts.get(d.name) ?? 0) === 0 && idleDueAt(d, o) <= now)
        .slice(0, o.batch);
      for (const d of due) {
        if (o.dropper.closing) break;
        const idle = `no session for --grace ${o.graceMs / 1000} s`;
        await o.dropper.drop(d.name, null, `idle: ${idle}`, Tombstones.reasonFor(d, idle));
        o.counters.add('janitor.drops');
      }
      return due.length;
    },
  };
}

/**
 * When an unpinned database with no sessions becomes due: --grace after its last session (or after it
 * was minted, if it never had one). A mint or route not yet followed by a session's end is also
 * protected for a few seconds: the client it was for may not have started its session yet.
 */
export function idleDueAt(d: DatabaseRecord, o: Pick<LifecycleOptions, 'graceMs' | 'protectMs' | 'registry'>): number {
  const routed = Math.max(d.createdAt, o.registry.lastRouted.get(d.name) ?? 0);
  if (d.lastSessionEnd !== null && d.lastSessionEnd >= routed) return d.lastSessionEnd + o.graceMs;
  return Math.max((d.lastSessionEnd ?? d.createdAt) + o.graceMs, routed + o.protectMs);
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
