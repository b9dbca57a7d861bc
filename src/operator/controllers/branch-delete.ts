// Deleting a Branch: its finalizer is removed only after the runtime confirmed the drop of its
// database (404 counts as dropped). While its pod is away but its Runtime is there, the pod comes back
// (a StatefulSet keeps names and volumes) and the database with it: the deletion waits, saying so.
// Only the database this operator would have named for this Branch, on a pod of its Runtime, is
// dropped (branch-verify.ts): a status that names another is let go without a drop, with a Warning.

import { podApi, templateNamespaceOf } from '../context.js';
import type { ReconcileResult } from '../controller.js';
import { BRANCH_FINALIZER, hasFinalizer, removeFinalizer } from '../finalizer.js';
import { kubeMessage } from '../kube.js';
import { setPhase, type Pass } from './branch-status.js';
import { checkPlacement } from './branch-verify.js';

/** How often a Branch whose drop cannot be confirmed (its pod is gone) looks again. */
const DROP_PENDING_RETRY_MS = 30_000;

export async function finalize(p: Pass): Promise<ReconcileResult> {
  const { ctx, obj, old } = p;
  if (!hasFinalizer(obj, BRANCH_FINALIZER)) return {};
  const namespace = templateNamespaceOf(obj); // where its pod and Runtime are
  const label = `${obj.metadata!.namespace}/${obj.metadata!.name}`;
  if (old.database && old.pod) {
    const check = checkPlacement(ctx, obj, { pod: old.pod, database: old.database });
    if (check.kind === 'unknown') return { retry: check.message };
    if (check.kind === 'tampered') {
      // The database named may be another Branch's: nothing is dropped, and the Branch is let go.
      ctx.logger.warn('branch released without a drop: its status names a database or pod that is not its own', { branch: label, pod: old.pod, database: old.database, problem: check.message });
      await ctx.events.record(obj, 'Warning', 'StatusTampered', `released without dropping anything: ${check.message}`);
    } else {
      // 'gone': no Runtime is there to bring its pod back, so there is nothing to wait for.
      const runtime = check.kind === 'trusted' ? check.runtime : undefined;
      const pod = runtime !== undefined ? ctx.caches.pods.get(old.pod, namespace) : undefined;
      if (!pod) {
        // Waits only while the Runtime is there and not being deleted: a Runtime going away (its
        // finalizer let it go because no Branch held it, or its namespace is being deleted) brings no pod back.
        const rt = runtime !== undefined ? ctx.caches.runtimes.get(runtime, namespace) : undefined;
        if (rt && !rt.metadata?.deletionTimestamp) {
          const message = `waiting for pod ${old.pod} to come back to drop database ${old.database}; to let go without dropping it, remove the finalizer ${BRANCH_FINALIZER}`;
          await setPhase(p, 'Deleting', { reason: 'DropPending', message }, (obj.spec as { ttl?: string } | undefined)?.ttl);
          return { requeueAfterMs: DROP_PENDING_RETRY_MS };
        }
        ctx.logger.warn('branch released without a drop: its runtime is gone', { branch: label, database: old.database });
      } else {
        const api = await podApi(ctx, pod, runtime!);
        if (!api.ok) return { retry: api.message };
        try {
          await api.client.dropDatabase(old.database); // 204 also when it is already gone
        } catch (err) {
          return { retry: `cannot drop ${old.database} on pod ${old.pod}: ${kubeMessage(err)}` };
        }
        // The pod's kept status still counts the database: the next placement asks the pod again.
        ctx.pods.forgetStatus(namespace, old.pod);
        ctx.logger.info('database dropped', { branch: label, pod: old.pod, database: old.database });
        await ctx.events.record(obj, 'Normal', 'DatabaseDropped', `dropped database ${old.database} on pod ${old.pod}`);
      }
    }
  }
  await removeFinalizer(ctx.kube, 'branches', obj, BRANCH_FINALIZER);
  return {};
}
