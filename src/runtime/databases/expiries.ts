// When each minted database next comes due for the janitor: its TTL deadline, or, unpinned, without a
// TTL and with no session, --grace after its last session. Kept in step with the registry (it watches
// every put, update and forget), so a janitor pass takes the due ones off the top of two deadline
// queues instead of walking every record: an idle pass over 10,000 databases reads none of them. This
// is the index's one owner; the janitor's tasks (janitor-tasks.ts) take from it and put back what they
// could not drop.

import { DeadlineQueue } from './deadline-queue.js';
import type { DatabaseRecord } from './records.js';
import type { Registry } from './registry.js';
import type { SessionCounts } from './session-counts.js';

export interface ExpiryRules {
  /** --grace: how long a minted database lives after its last session ends. */
  graceMs: number;
  /** How long a database just minted or routed to is kept although no session has been seen yet. */
  protectMs: number;
}

/**
 * When an unpinned database with no sessions becomes due: --grace after its last session (or after it
 * was minted, if it never had one). A mint or route not yet followed by a session's end is also
 * protected for a few seconds: the client it was for may not have started its session yet.
 */
export function idleDueAt(d: DatabaseRecord, o: ExpiryRules & { registry: Pick<Registry, 'lastRouted'> }): number {
  const routed = Math.max(d.createdAt, o.registry.lastRouted.get(d.name) ?? 0);
  if (d.lastSessionEnd !== null && d.lastSessionEnd >= routed) return d.lastSessionEnd + o.graceMs;
  return Math.max((d.lastSessionEnd ?? d.createdAt) + o.graceMs, routed + o.protectMs);
}

export class Expiries {
  /** Databases with a TTL, by expires_at. */
  private readonly ttl = new DeadlineQueue();
  /**
   * Databases without a TTL, unpinned and with no session, by idleDueAt. A route since does not move
   * an entry (routes are frequent): the later protection is seen when the entry comes up.
   */
  private readonly idle = new DeadlineQueue();

  constructor(private readonly o: ExpiryRules & { registry: Registry; sessions: SessionCounts }) {
    o.registry.watch((name) => this.changed(name));
    for (const name of o.registry.databases.keys()) this.changed(name);
  }

  /**
   * Reads `name`'s record again and queues its deadline. The registry calls it on every change; a
   * session's start and end reach it that way too (the session observer records them), so a database
   * leaves the idle queue while it has sessions and comes back when its last one ends.
   */
  changed(name: string): void {
    const d = this.o.registry.databases.get(name);
    if (d === undefined) {
      this.ttl.delete(name);
      this.idle.delete(name);
    } else if (d.expiresAt !== null) {
      this.idle.delete(name);
      this.ttl.set(name, d.expiresAt);
    } else {
      this.ttl.delete(name);
      if (d.pinned || this.o.sessions.of(name) > 0) this.idle.delete(name);
      else this.idle.set(name, idleDueAt(d, this.o));
    }
  }

  /** Looks at `name` again no sooner than `at` (a drop that was refused); any change to its record ends the wait. */
  retryAt(name: string, at: number): void {
    const d = this.o.registry.databases.get(name);
    if (d === undefined) return;
    if (d.expiresAt !== null) this.ttl.set(name, Math.max(at, d.expiresAt));
    else if (!d.pinned && this.o.sessions.of(name) === 0) this.idle.set(name, Math.max(at, idleDueAt(d, this.o)));
  }

  /**
   * Up to `limit` databases whose TTL has passed at `now`, earliest first, taken out of the queue: the
   * caller drops them, and calls changed() for those it did not (a database dropped is gone: no-op).
   */
  takeExpired(now: number, limit: number): DatabaseRecord[] {
    const due: DatabaseRecord[] = [];
    let name: string | undefined;
    while (due.length < limit && (name = this.ttl.popDue(now)) !== undefined) {
      const d = this.o.registry.databases.get(name);
      if (d !== undefined && d.expiresAt !== null && d.expiresAt <= now) due.push(d);
    }
    return due;
  }

  /**
   * Up to `limit` databases idle past --grace at `now`, earliest first, taken out of the queue as
   * takeExpired's are. One routed to since its entry was queued goes back at its later time; one the
   * engine still counts a session on (a session the observer was not told of) is looked at again next
   * pass. `engineSessions` is asked only when something is due.
   */
  takeIdle(now: number, limit: number, engineSessions: () => Map<string, number>): DatabaseRecord[] {
    const due: DatabaseRecord[] = [];
    const busy: Array<[string, number]> = [];
    let engine: Map<string, number> | undefined;
    let name: string | undefined;
    while (due.length < limit && (name = this.idle.popDue(now)) !== undefined) {
      const d = this.o.registry.databases.get(name);
      // Not idle-eligible any more: changed() queues it again when that changes.
      if (d === undefined || d.pinned || d.expiresAt !== null || this.o.sessions.of(name) > 0) continue;
      const at = idleDueAt(d, this.o);
      if (at > now) {
        this.idle.set(name, at);
        continue;
      }
      engine ??= engineSessions();
      if ((engine.get(name) ?? 0) > 0) busy.push([name, at]);
      else due.push(d);
    }
    for (const [busyName, at] of busy) this.idle.set(busyName, at);
    return due;
  }
}
