// Medians and paired ratios: the only statistics the benchmark reports. On a shared, noisy machine a
// mean is dragged by one bad run; the median of rounds, and the ratio within each round, are not.

export function median(values: readonly number[]): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 === 1 ? sorted[mid]! : (sorted[mid - 1]! + sorted[mid]!) / 2;
}

/** a[i] / b[i] for each round both have; rounds are paired because they ran back to back. */
export function pairedRatios(a: readonly number[], b: readonly number[]): number[] {
  const n = Math.min(a.length, b.length);
  const out: number[] = [];
  for (let i = 0; i < n; i++) out.push(a[i]! / b[i]!);
  return out;
}

/** The p-th percentile (0..100) by the nearest-rank method: with 100 samples, p99 is the 99th smallest. */
export function percentile(values: readonly number[], p: number): number {
  if (values.length === 0) return NaN;
  const sorted = [...values].sort((a, b) => a - b);
  const rank = Math.max(1, Math.ceil((p / 100) * sorted.length));
  return sorted[Math.min(rank, sorted.length) - 1]!;
}
