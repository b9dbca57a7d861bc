// Counts of what the runtime did (mints warm and cold, failures, drops, spare handouts and refills),
// kept in memory, persisted to pgx_control by the janitor when they changed, and reloaded at start, so
// they count over the data directory's life. Mint latencies are a window of recent samples in memory.

export type MintSource = 'warm' | 'cold';

/** Recent mint latencies kept for mean and p99: enough for a stable p99, small enough to sort. */
const LATENCY_WINDOW = 1024;

export class Counters {
  private readonly values = new Map<string, number>();
  private readonly dirty = new Set<string>();
  private readonly latencies: number[] = [];
  private next = 0;
  private readonly mintListeners: ((source: MintSource, ms: number) => void)[] = [];

  load(saved: Map<string, number>): void {
    for (const [name, value] of saved) this.values.set(name, value);
  }

  add(name: string, by = 1): void {
    this.values.set(name, (this.values.get(name) ?? 0) + by);
    this.dirty.add(name);
  }

  get(name: string): number {
    return this.values.get(name) ?? 0;
  }

  recordMint(source: MintSource, ms: number): void {
    this.add(`mints.${source}`);
    if (this.latencies.length < LATENCY_WINDOW) this.latencies.push(ms);
    else this.latencies[this.next] = ms;
    this.next = (this.next + 1) % LATENCY_WINDOW;
    for (const listener of this.mintListeners) listener(source, ms);
  }

  /** Every mint from now on, as it happens (the /metrics histogram). */
  onMint(listener: (source: MintSource, ms: number) => void): void {
    this.mintListeners.push(listener);
  }

  /** Mean and p99 of the recent mints, in milliseconds rounded to 0.01; zeros before the first. */
  latency(): { mean: number; p99: number } {
    const n = this.latencies.length;
    if (n === 0) return { mean: 0, p99: 0 };
    const sorted = [...this.latencies].sort((a, b) => a - b);
    const mean = sorted.reduce((s, v) => s + v, 0) / n;
    const p99 = sorted[Math.min(n - 1, Math.ceil(n * 0.99) - 1)]!;
    return { mean: round2(mean), p99: round2(p99) };
  }

  /** The counters changed since the last call, for the metadata store; clears the change set. */
  takeDirty(): [string, number][] {
    const out: [string, number][] = [...this.dirty].map((name) => [name, this.get(name)]);
    this.dirty.clear();
    return out;
  }

  /** Puts back what takeDirty() returned when writing it failed, so the next flush retries. */
  markDirty(names: Iterable<string>): void {
    for (const n of names) this.dirty.add(n);
  }
}

function round2(v: number): number {
  return Math.round(v * 100) / 100;
}
