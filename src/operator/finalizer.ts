// Finalizers: added before the operator makes anything outside the cluster (a template, a database), and
// removed only after that thing is confirmed gone. Both are merge patches carrying the resourceVersion we
// read, so a change made meanwhile (another finalizer added by someone else) is a conflict, never lost.

import type { Kube, CustomObject } from './kube.js';
import { MERGE_PATCH, pgxResource } from './kube.js';

export const TEMPLATE_FINALIZER = 'pgx.dev/template-in-use';
export const BRANCH_FINALIZER = 'pgx.dev/drop-database';
/** Holds a Runtime's deletion while Branches have databases on its pods (deleting it would strand them). */
export const RUNTIME_FINALIZER = 'pgx.dev/runtime-in-use';

export function hasFinalizer(obj: CustomObject, finalizer: string): boolean {
  return obj.metadata?.finalizers?.includes(finalizer) ?? false;
}

/** Sets the finalizers; the object as stored after the patch (its new resourceVersion). */
async function setFinalizers(kube: Kube, plural: 'runtimes' | 'templates' | 'branches', obj: CustomObject, finalizers: string[]): Promise<CustomObject> {
  return (await kube.custom.patchNamespacedCustomObject(
    {
      ...pgxResource(plural),
      namespace: obj.metadata!.namespace!,
      name: obj.metadata!.name!,
      body: { metadata: { finalizers, resourceVersion: obj.metadata!.resourceVersion } },
    },
    MERGE_PATCH,
  )) as CustomObject;
}

/** Adds the finalizer; the object as stored after (a controller may go on with it in the same pass). */
export async function addFinalizer(kube: Kube, plural: 'runtimes' | 'templates' | 'branches', obj: CustomObject, finalizer: string): Promise<CustomObject> {
  return setFinalizers(kube, plural, obj, [...(obj.metadata?.finalizers ?? []), finalizer]);
}

export async function removeFinalizer(kube: Kube, plural: 'runtimes' | 'templates' | 'branches', obj: CustomObject, finalizer: string): Promise<CustomObject> {
  return setFinalizers(kube, plural, obj, (obj.metadata?.finalizers ?? []).filter((f) => f !== finalizer));
}
