// Where a new Branch's database goes: among the runtime pods that are ready and hold the Template
// sealed, the one with the most free capacity, measured as the fewest databases (from each pod's
// /v1/status, or the Branches the operator already placed there if that is more: status lags a burst),
// then the least memory. Ties go to the pod with fewer placed Branches, then by name, so a burst of
// Branches spreads over the pods instead of piling on the first.
//
// "Placed" must include placements this operator made that its Branch cache does not show yet: in a
// burst, many reconciles place at once, each before the watch has brought back the others' status
// writes, and without the ledger every one of them saw the same counts and chose the same pod.

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

/** Where this operator placed Branches, by Branch key, until its cache shows the placement itself. */
export class PlacementLedger {
  private readonly pods = new Map<string, string>();

  /** Records a choice; call it in the same turn as choosePod, before anything is awaited. */
  record(branchKey: string, pod: string): void {
    this.pods.set(branchKey, pod);
  }

  /** The Branch is gone, or its cache entry now carries its pod (or no pod, after a refusal). */
  forget(branchKey: string): void {
    this.pods.delete(branchKey);
  }

  /**
   * Branches on `pod`: those the cache shows there (key -> pod from status), and those placed there
   * here that the cache does not show with a pod yet.
   */
  placedOn(pod: string, cached: ReadonlyMap<string, string | undefined>): number {
    let n = 0;
    for (const p of cached.values()) if (p === pod) n++;
    for (const [key, p] of this.pods) if (p === pod && cached.get(key) === undefined) n++;
    return n;
  }
}
