// The engine's SessionObserver (engine/ports.ts): client sessions starting and ending on a database,
// counted (session-counts.ts); a database's first session and its last ending are recorded in
// pgx_control (in use; when it went idle: the janitor's grace clock) without the session waiting.

import type { Clock } from '../../clock.js';
import type { SessionObserver } from '../../engine/ports.js';
import type { Logger } from '../../log.js';
import type { MetadataStore } from './metadata.js';
import type { DatabaseRecord } from './records.js';
import type { Registry } from './registry.js';
import { SessionCounts } from './session-counts.js';

export interface SessionTrackerOptions {
  registry: Registry;
  metadata: MetadataStore;
  /** A database went idle: its activity counts for the vacuum (vacuum.ts). */
  idle: (database: string) => void;
  clock: Clock;
  logger: Logger;
}

export class SessionTracker implements SessionObserver {
  readonly counts: SessionCounts;
  /** Metadata writes not awaited by their caller; flushed() waits for them. */
  private readonly writes = new Set<Promise<void>>();

  constructor(private readonly o: SessionTrackerOptions) {
    this.counts = new SessionCounts({ busy: (db) => this.onBusy(db), idle: (db) => this.onIdle(db) });
  }

  sessionStarted(database: string): void {
    this.counts.started(database);
  }

  sessionEnded(database: string): void {
    this.counts.ended(database);
  }

  /** Settles when the writes begun so far are done (each logs its own failure). */
  async flushed(): Promise<void> {
    await Promise.all([...this.writes]);
  }

  private onBusy(database: string): void {
    const d = this.o.registry.update(database, { inUse: true });
    if (d) this.persist(d);
  }

  private onIdle(database: string): void {
    this.o.idle(database);
    const d = this.o.registry.update(database, { inUse: false, lastSessionEnd: this.o.clock.now() });
    if (d) this.persist(d);
  }

  /** On disk soon, batched with other changes; a failed write is logged (memory rules until restart). */
  private persist(record: DatabaseRecord): void {
    const write: Promise<void> = this.o.metadata
      .saveDatabaseLater(record)
      .catch((err: unknown) => this.o.logger.warn('metadata-write-failed', { database: record.name, err }))
      .finally(() => this.writes.delete(write));
    this.writes.add(write);
  }
}
