// Status conditions (metav1.Condition): set from observed facts, each with the generation it was
// computed from; lastTransitionTime moves only when the status flips, so a pass that observes the same
// thing writes the same conditions and (status.ts) no write at all.

import type { Clock } from '../clock.js';
import type { Condition } from './crds/index.js';

export interface ConditionInput {
  type: string;
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
}

/** `current` with `next` set: the transition time kept unless the status changed. */
export function setCondition(current: readonly Condition[] | undefined, next: ConditionInput, generation: number | undefined, clock: Clock): Condition[] {
  const list = [...(current ?? [])];
  const i = list.findIndex((c) => c.type === next.type);
  const old = i >= 0 ? list[i] : undefined;
  const cond: Condition = {
    type: next.type,
    status: next.status,
    ...(generation !== undefined ? { observedGeneration: generation } : {}),
    lastTransitionTime: old && old.status === next.status ? old.lastTransitionTime : isoSeconds(clock.now()),
    reason: next.reason,
    message: next.message,
  };
  if (i >= 0) list[i] = cond;
  else list.push(cond);
  return list;
}

export function findCondition(list: readonly Condition[] | undefined, type: string): Condition | undefined {
  return list?.find((c) => c.type === type);
}

/** RFC 3339 with second precision, as Kubernetes writes metav1.Time. */
export function isoSeconds(ms: number): string {
  return new Date(Math.floor(ms / 1000) * 1000).toISOString().replace('.000Z', 'Z');
}
