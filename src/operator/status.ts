// Status writes: through the status subresource, as a merge patch carrying the resourceVersion the
// status was computed from (an optimistic lock: a conflict means we acted on a stale read, and the
// controller requeues quietly), and only when something changed, so a pass over unchanged state writes
// nothing.

import { isDeepStrictEqual } from 'node:util';
import type { CustomObject, Kube } from './kube.js';
import { MERGE_PATCH, pgxResource } from './kube.js';

/** Drops undefined fields, which JSON would drop anyway, so equality means "same JSON". */
function plain(v: unknown): unknown {
  return v === undefined ? undefined : JSON.parse(JSON.stringify(v));
}

/** Writes `status` if it differs from the object's; true if it wrote. */
export async function writeStatus(kube: Kube, plural: 'runtimes' | 'templates' | 'branches', obj: CustomObject, status: object): Promise<boolean> {
  return (await writeStatusObject(kube, plural, obj, status)) !== null;
}

/**
 * Writes `status` if it differs from the object's: the object as stored after the write (its new
 * resourceVersion: a controller may go on acting in the same pass, and write again on top of it), or null
 * when nothing needed writing.
 */
export async function writeStatusObject(kube: Kube, plural: 'runtimes' | 'templates' | 'branches', obj: CustomObject, status: object): Promise<CustomObject | null> {
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
