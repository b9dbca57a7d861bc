// What PGX knows about its templates, minted databases and spares, in memory: routing answers from it
// without a query, and the janitor scans it. The metadata store holds the same records on disk; the
// registry is loaded from it at start and every change is written through by its owner.

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

  load(templates: TemplateRecord[], databases: DatabaseRecord[]): void {
    for (const t of templates) this.templates.set(t.name, t);
    for (const d of databases) this.put(d);
  }

  put(d: DatabaseRecord): void {
    if (d.kind === 'spare') {
      this.databases.delete(d.name);
      this.spares.set(d.name, d);
    } else {
      this.spares.delete(d.name);
      this.databases.set(d.name, d);
    }
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
    return next;
  }

  forget(name: string): void {
    this.databases.delete(name);
    this.spares.delete(name);
    this.lastRouted.delete(name);
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

  staleSpares(): DatabaseRecord[] {
    return [...this.spares.values()].filter((s) => !this.isFreshSpare(s));
  }

  /**
   * Up to `limit` minted databases whose names sort after `after` (null: from the first), in binary
   * order of the names (as COLLATE "C" sorts them), and whether more follow. A keyset page: a name
   * minted or dropped between two calls moves no other name across the page boundary, so a caller
   * paging with the last name it got sees every database that lived throughout exactly once.
   * One pass over the map, sorting only the names after `after`: a few milliseconds at 10,000.
   */
  databasesAfter(after: string | null, limit: number): { items: DatabaseRecord[]; more: boolean } {
    const names: string[] = [];
    for (const name of this.databases.keys()) if (after === null || name > after) names.push(name);
    names.sort(binaryOrder);
    return { items: names.slice(0, limit).map((n) => this.databases.get(n)!), more: names.length > limit };
  }

  ownedBy(owner: string): number {
    let n = 0;
    for (const d of this.databases.values()) if (d.owner === owner) n++;
    return n;
  }
}

/** Names compared by UTF-16 code unit, like COLLATE "C" for the ASCII names PGX mints; never locale-dependent. */
function binaryOrder(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}
