// The order of the targets in each round of an interleaved benchmark, so load on a shared machine
// falls on every target alike.

/** Round r's order: a rotation of the targets, reversed on every other pass through the rotations. */
export function roundOrder<T>(targets: readonly T[], round: number): T[] {
  const k = round % targets.length;
  const rotated = [...targets.slice(k), ...targets.slice(0, k)];
  return Math.floor(round / targets.length) % 2 === 0 ? rotated : rotated.reverse();
}
