// Where a new Branch's database goes: among the runtime pods that are ready and hold the Template
// sealed, the one with the most free capacity, measured as the fewest databases (from each pod's
// /v1/status, or the Branches the operator already placed there if that is more: status lags a burst),
// then the least memory. Ties go to the pod with fewer placed Branches, then by name, so a burst of
// Branches spreads over the pods instead of piling on the first.

export interface Candidate {
  pod: string;
  /** Minted databases the pod reports (null when its status could not be read). */
  databases: number | null;
  /** PSS of the runtime in bytes (null when unknown). */
  memoryBytes: number | null;
  /** Branches the operator has already placed on this pod. */
  placed: number;
}

export function choosePod(candidates: readonly Candidate[]): string | null {
  const usable = candidates.filter((c) => c.databases !== null);
  if (usable.length === 0) return null;
  const load = (c: Candidate): number => Math.max(c.databases ?? 0, c.placed);
  const sorted = [...usable].sort(
    (a, b) => load(a) - load(b) || (a.memoryBytes ?? 0) - (b.memoryBytes ?? 0) || a.placed - b.placed || a.pod.localeCompare(b.pod),
  );
  return sorted[0]!.pod;
}
