// The first entry where two transcripts differ, shown both ways: a diff of a few hundred entries by
// chai's deep-equal message is unreadable.

import { isDeepStrictEqual } from 'node:util';
import type { Entry } from './recorder.js';

/** `other` names the transcript compared with the direct one (the engine's, or another proxy's). */
export function firstDifference(direct: readonly Entry[], pgx: readonly Entry[], other = 'engine'): string | null {
  const n = Math.max(direct.length, pgx.length);
  for (let i = 0; i < n; i++) {
    if (!isDeepStrictEqual(direct[i], pgx[i])) {
      return [`entry ${i} of ${direct.length} (direct) / ${pgx.length} (${other}):`, `  direct: ${JSON.stringify(direct[i] ?? null)}`, `  ${other}: ${JSON.stringify(pgx[i] ?? null)}`].join('\n');
    }
  }
  return null;
}
