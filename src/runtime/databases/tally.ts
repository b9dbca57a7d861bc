// A count per key of things under way (mints per role or template, spares being made per template):
// a key leaves the map when its count falls back to zero, so the map holds only what is in flight.

export class Tally {
  private readonly counts = new Map<string, number>();

  of(key: string): number {
    return this.counts.get(key) ?? 0;
  }

  add(key: string): void {
    this.counts.set(key, this.of(key) + 1);
  }

  remove(key: string): void {
    const n = this.of(key) - 1;
    if (n <= 0) this.counts.delete(key);
    else this.counts.set(key, n);
  }
}
