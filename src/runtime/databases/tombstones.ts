// Names PGX dropped whose address a user may still hold (see Tombstone in records.ts). Kept in memory
// for routing, and in pgx_control so they outlive a restart; each lasts --tombstone seconds, then the
// janitor forgets it and the name mints on connect again.
//
// Without them a TTL database that expired, or an API database dropped after its grace, would be
// minted again, empty, by the next client using the URL it was handed: a user reads that as data loss.

import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import type { JanitorTask } from './janitor.js';
import type { MetadataStore } from './metadata.js';
import type { DatabaseRecord, Tombstone } from './records.js';

export class Tombstones {
  private readonly byName = new Map<string, Tombstone>();

  constructor(
    private readonly metadata: MetadataStore,
    /** How long a tombstone lasts (--tombstone); 0 keeps none. */
    private readonly keepMs: number,
    private readonly clock: Clock,
  ) {}

  async load(): Promise<void> {
    for (const t of await this.metadata.loadTombstones()) this.byName.set(t.name, t);
  }

  /**
   * Why a dropped database leaves a tombstone, or null when it does not: one with a TTL (its lifetime
   * was chosen) or created by a request (its address was handed out). A database minted by connecting
   * and dropped after its grace leaves none, so a CI job that reconnects to its own name mints it again.
   */
  static reasonFor(d: DatabaseRecord | undefined, why: string): string | null {
    if (d === undefined || (d.expiresAt === null && d.origin !== 'request')) return null;
    return why;
  }

  async bury(name: string, reason: string): Promise<void> {
    if (this.keepMs <= 0) return;
    const t: Tombstone = { name, droppedAt: this.clock.now(), reason };
    this.byName.set(name, t);
    await this.metadata.saveTombstone(t);
  }

  /** The 3D000 a client connecting to a buried name gets, or null when the name is not buried. */
  refusal(name: string): PgxError | null {
    const t = this.byName.get(name);
    if (t === undefined || this.expired(t)) return null;
    const at = new Date(t.droppedAt).toISOString().replace('T', ' ').replace(/\.\d+Z$/, ' UTC');
    // 3D000, as for a database that does not exist, worded so the user learns what happened to theirs.
    // Each surface says how to create the name again in its own terms (DATABASE_DROPPED); SQL has no create.
    return new PgxError('DATABASE_DROPPED', `database "${name}" was dropped at ${at} (${t.reason})`, {
      hint: 'PGX keeps a dropped name for a while (--tombstone) rather than mint it again empty: connect to a new name to mint one.',
    });
  }

  /** An explicit create of the name ends its tombstone. */
  async clear(name: string): Promise<void> {
    if (!this.byName.delete(name)) return;
    await this.metadata.deleteTombstones([name]);
  }

  get size(): number {
    return this.byName.size;
  }

  /** The janitor's task: forgets tombstones older than --tombstone, a batch per pass. */
  task(batch: number): JanitorTask {
    return {
      name: 'forget-tombstones',
      run: async () => {
        const old = [...this.byName.values()].filter((t) => this.expired(t)).slice(0, batch).map((t) => t.name);
        if (old.length === 0) return 0;
        await this.metadata.deleteTombstones(old);
        for (const name of old) this.byName.delete(name);
        return old.length;
      },
    };
  }

  private expired(t: Tombstone): boolean {
    return this.clock.now() - t.droppedAt >= this.keepMs;
  }
}
