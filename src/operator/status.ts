// Status writes: through the status subresource, as a merge patch carrying the resourceVersion the
// status was computed from (an optimistic lock: a conflict means we acted on a stale read, and the
// controller requeues quietly), and only when something changed, so a pass over unchanged state writes
// nothing. commitStatus is the one pipeline every controller writes through: the write, and an Event
// when Ready changed.

import { isDeepStrictEqual } from 'node:util';
import { findCondition } from './conditions.js';
import type { Condition } from './crds/index.js';
import type { EventRecorder } from './events.js';
import type { CustomObject, Kube } from './kube.js';
import { MERGE_PATCH, pgxResource } from './kube.js';

/** Drops undefined fields, which JSON would drop anyway, so equality means "same JSON". */
function plain(v: unknown): unknown {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
}

/**
 * Writes `status` if it differs from the object's: the object as stored after the write (its new
 * resourceVersion: a controller may go on acting in the same pass, and write again on top of it), or null
 * when nothing needed writing.
 */
async function writeStatusObject(kube: Kube, plural: 'runtimes' | 'templates' | 'branches', obj: CustomObject, status: object): Promise<CustomObject | null> {
  if (isDeepStrictEqual(plain(obj.status ?? {}), plain(status))) return null;
  // A merge patch merges maps: a field we cleared must be sent as null to be removed.
  const body: Record<string, unknown> = { ...(plain(status) as Record<string, unknown>) };
  for (const k of Object.keys((obj.status as Record<string, unknown> | undefined) ?? {})) if (!(k in body)) body[k] = null;
  return (await kube.custom.patchNamespacedCustomObjectStatus(
    {
      ...pgxResource(plural),
      namespace: obj.metadata!.namespace!,
      name: obj.metadata!.name!,
      body: { metadata: { resourceVersion: obj.metadata!.resourceVersion }, status: body },
    },
    MERGE_PATCH,
  )) as CustomObject;
}

/** How an Event reports a change of Ready: Warning for what a person must act on, Normal for progress. */
export type ReadyEvent = { warning: boolean } | { type: 'Normal' | 'Warning'; reason: string; message: string } | null;

/**
 * The one status pipeline of every kind: writes `next` (when it differs) and records an Event when the
 * Ready condition's status or reason changed from what the object showed, so a stuck object gets one
 * Event, not one per pass. `event` overrides what is recorded (null: nothing). The object as stored
 * after the write, or the object as it was when nothing needed writing.
 */
export async function commitStatus<S extends { conditions?: Condition[] }>(
  ctx: { kube: Kube; events: EventRecorder },
  plural: 'runtimes' | 'templates' | 'branches',
  obj: CustomObject,
  next: S,
  event: ReadyEvent = { warning: true },
): Promise<CustomObject> {
  const stored = (await writeStatusObject(ctx.kube, plural, obj, next)) ?? obj;
  if (event === null) return stored;
  if ('reason' in event) {
    await ctx.events.record(stored, event.type, event.reason, event.message);
    return stored;
  }
  const was = findCondition((obj.status as { conditions?: Condition[] } | undefined)?.conditions, 'Ready');
  const now = findCondition(next.conditions, 'Ready');
  if (now && (was?.status !== now.status || was?.reason !== now.reason)) {
    await ctx.events.record(stored, now.status === 'True' ? 'Normal' : event.warning ? 'Warning' : 'Normal', now.reason, now.message);
  }
  return stored;
}
