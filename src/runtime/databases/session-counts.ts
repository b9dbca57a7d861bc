// Client sessions per database, as the engine reports them (SessionObserver). The janitor's grace
// clock starts when a database's count falls to zero; the transitions are handed to the owner, which
// records them.

export interface SessionTransitions {
  /** The first session on `database` began. */
  busy(database: string): void;
  /** The last session on `database` ended. */
  idle(database: string): void;
}

export class SessionCounts {
  private readonly counts = new Map<string, number>();

  constructor(private readonly on: SessionTransitions) {}

  started(database: string): void {
    const n = (this.counts.get(database) ?? 0) + 1;
    this.counts.set(database, n);
    if (n === 1) this.on.busy(database);
  }

  ended(database: string): void {
    const n = this.counts.get(database);
    // An end we never saw start (e.g. an observer attached mid-flight) changes nothing.
    if (n === undefined) return;
    if (n > 1) {
      this.counts.set(database, n - 1);
      return;
    }
    this.counts.delete(database);
    this.on.idle(database);
  }

  of(database: string): number {
    return this.counts.get(database) ?? 0;
  }

  /** Databases with at least one session. */
  busy(): string[] {
    return [...this.counts.keys()];
  }

  /** Sessions over all databases, and how many databases have at least one. */
  totals(): { total: number; databases: number } {
    let total = 0;
    for (const n of this.counts.values()) total += n;
    return { total, databases: this.counts.size };
  }
}
