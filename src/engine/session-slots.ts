// Client sessions admitted per database, against each database's cap (--max-sessions-per-db, or a
// per-database limit from the router). A slot is taken when a session is admitted, before it waits for
// a backend, so a burst of connects cannot overshoot the cap while they wait; it is given back when the
// session closes.

export class SessionSlots {
  private readonly held = new Map<string, number>();

  /** Takes a slot on `database` unless `limit` are taken already (null: no limit). */
  take(database: string, limit: number | null): boolean {
    const n = this.held.get(database) ?? 0;
    if (limit !== null && n >= limit) return false;
    this.held.set(database, n + 1);
    return true;
  }

  give(database: string): void {
    const n = this.held.get(database) ?? 0;
    if (n <= 1) this.held.delete(database);
    else this.held.set(database, n - 1);
  }
}
