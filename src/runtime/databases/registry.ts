// What PGX knows about its templates, minted databases and spares, in memory: routing answers from it
// without a query, and the janitor's deadlines follow it. The metadata store holds the same records on disk; the
// registry is loaded from it at start and every change is written through by its owner. Every change
// to a minted database's record passes through put, update or forget, which tell the watchers (the
// janitor's deadlines, expiries.ts), so nothing has to walk the records to find what changed.

import type { DatabaseRecord, TemplateRecord } from './records.js';

export class Registry {
  readonly templates = new Map<string, TemplateRecord>();
  /** Minted databases (kind ephemeral) by name. */
  readonly databases = new Map<string, DatabaseRecord>();
  /** Warm-pool spares (kind spare) by name, ready or stale. */
  readonly spares = new Map<string, DatabaseRecord>();
  /**
   * Clock.now() of the last route to each minted database: between route() resolving and the engine
   * reporting the session there is a gap in which the janitor must not drop it.
   */
  readonly lastRouted = new Map<string, number>();
  /**
   * The names of `databases` in binary order, kept in step by put() and forget(), so a page of the
   * list (databasesAfter) is a binary search and a slice, not a sort of 10,000 names per request.
   */
  private readonly sortedNames: string[] = [];
  /** Told the name of every database whose record was put, updated or forgotten. */
  private readonly watchers: Array<(name: string) => void> = [];

  watch(watcher: (name: string) => void): void {
    this.watchers.push(watcher);
  }

  load(templates: TemplateRecord[], databases: DatabaseRecord[]): void {
    for (const t of templates) this.templates.set(t.name, t);
    for (const d of databases) this.put(d);
  }

  put(d: DatabaseRecord): void {
    if (d.kind === 'spare') {
      if (this.databases.delete(d.name)) this.unindex(d.name);
      this.spares.set(d.name, d);
    } else {
      this.spares.delete(d.name);
      if (!this.databases.has(d.name)) this.sortedNames.splice(this.firstAfter(d.name, false), 0, d.name);
      this.databases.set(d.name, d);
    }
    this.changed(d.name);
  }

  /**
   * Changes fields of a minted database's record in place of the whole record, so changes made while
   * another is being written (a session end during a pin) are merged, never lost. Returns the result.
   */
  update(name: string, patch: Partial<Omit<DatabaseRecord, 'name' | 'kind'>>): DatabaseRecord | undefined {
    const current = this.databases.get(name);
    if (!current) return undefined;
    const next = { ...current, ...patch };
    this.databases.set(name, next);
    this.changed(name);
    return next;
  }

  forget(name: string): void {
    if (this.databases.delete(name)) this.unindex(name);
    this.spares.delete(name);
    this.lastRouted.delete(name);
    this.changed(name);
  }

  private changed(name: string): void {
    for (const watcher of this.watchers) watcher(name);
  }

  sealedTemplate(name: string): TemplateRecord | undefined {
    const t = this.templates.get(name);
    return t?.sealed ? t : undefined;
  }

  /** A spare may be claimed only if it is a copy of the template's current sealed generation. */
  isFreshSpare(spare: DatabaseRecord): boolean {
    const t = this.sealedTemplate(spare.template);
    return t !== undefined && t.generation === spare.generation;
  }

  freshSpares(template: string): DatabaseRecord[] {
    return [...this.spares.values()].filter((s) => s.template === template && this.isFreshSpare(s));
  }

  /** The names of every template's fresh spares. */
  readySpares(): string[] {
    return [...this.spares.values()].filter((s) => this.isFreshSpare(s)).map((s) => s.name);
  }

  staleSpares(): DatabaseRecord[] {
    return [...this.spares.values()].filter((s) => !this.isFreshSpare(s));
  }

  /**
   * Up to `limit` minted databases whose names sort after `after` (null: from the first), in binary
   * order of the names (as COLLATE "C" sorts them), and whether more follow. A keyset page: a name
   * minted or dropped between two calls moves no other name across the page boundary, so a caller
   * paging with the last name it got sees every database that lived throughout exactly once.
   * A binary search in the sorted names and a slice: the cost of a page, whatever the count.
   */
  databasesAfter(after: string | null, limit: number): { items: DatabaseRecord[]; more: boolean } {
    const from = after === null ? 0 : this.firstAfter(after, true);
    const names = this.sortedNames.slice(from, from + limit);
    return { items: names.map((n) => this.databases.get(n)!), more: from + limit < this.sortedNames.length };
  }

  /** The index of the first sorted name above `name` (`strictly`), or at or above it. */
  private firstAfter(name: string, strictly: boolean): number {
    let lo = 0;
    let hi = this.sortedNames.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      const at = this.sortedNames[mid]!;
      if (at < name || (strictly && at === name)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  private unindex(name: string): void {
    const i = this.firstAfter(name, false);
    if (this.sortedNames[i] === name) this.sortedNames.splice(i, 1);
  }

  ownedBy(owner: string): number {
    let n = 0;
    for (const d of this.databases.values()) if (d.owner === owner) n++;
    return n;
  }
}
