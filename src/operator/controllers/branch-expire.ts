// Expiry of a Branch: at creationTimestamp + ttl (whether or not it ever became Ready), or when the
// runtime dropped its unpinned database when idle. expiryPolicy says what then happens:
//   Delete (the default): the Branch is marked Expired and deleted; its finalizer drops the database,
//     so cleanup has one path.
//   Retain: the database is dropped and the Secret deleted here, and the Branch stays, phase Expired
//     with the condition Expired True, so a GitOps tool that applied it (Argo CD, Flux) sees it there
//     and does not re-create it with an empty database. An Expired Branch stays as it is. A status that
//     names a database or pod not its own (branch-verify.ts) drops nothing.

import { ApiClientError } from '../../api/client.js';
import { podApi, templateNamespaceOf } from '../context.js';
import type { BranchSpec, BranchStatus } from '../crds/index.js';
import type { ReconcileResult } from '../controller.js';
import { isNotFound, kubeMessage, pgxResource } from '../kube.js';
import { podReady } from '../pods.js';
import { deleteBranchSecret } from './branch-secret.js';
import { setExpired, type Pass } from './branch-status.js';
import { checkPlacement } from './branch-verify.js';

export async function expire(p: Pass, spec: Pick<BranchSpec, 'expiryPolicy' | 'ttl'>, reason: string, message: string): Promise<ReconcileResult> {
  const { ctx } = p;
  const label = `${p.obj.metadata!.namespace}/${p.obj.metadata!.name}`;
  if (spec.expiryPolicy === 'Retain') return retain(p, spec, reason, message);
  await setExpired(p, reason, message, spec.ttl, { ...p.old });
  try {
    await ctx.kube.custom.deleteNamespacedCustomObject({ ...pgxResource('branches'), namespace: p.obj.metadata!.namespace!, name: p.obj.metadata!.name! });
    ctx.metrics.branchesDeleted.inc();
    ctx.logger.info('branch expired; deleted', { branch: label, reason });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  return {};
}

/** Drops the database and deletes the Secret; the Branch stays, Expired, without pod, database or Secret. */
async function retain(p: Pass, spec: Pick<BranchSpec, 'ttl'>, reason: string, message: string): Promise<ReconcileResult> {
  const { ctx, old } = p;
  const namespace = templateNamespaceOf(p.obj); // where its pod is; its Secret is in the Branch's
  if (old.database && old.pod) {
    const label = `${p.obj.metadata!.namespace}/${p.obj.metadata!.name}`;
    const check = checkPlacement(ctx, p.obj, { pod: old.pod, database: old.database });
    if (check.kind === 'tampered') {
      // The database named may be another Branch's: nothing is dropped (branch-verify.ts).
      ctx.logger.warn('branch expired without a drop: its status names a database or pod that is not its own', { branch: label, pod: old.pod, database: old.database, problem: check.message });
      await ctx.events.record(p.obj, 'Warning', 'StatusTampered', `expired without dropping anything: ${check.message}`);
    } else {
      const pod = ctx.caches.pods.get(old.pod, namespace);
      if (check.kind !== 'trusted' || !pod || !podReady(pod)) return { retry: `pod ${old.pod} is away: database ${old.database} is dropped when it is back` };
      const api = await podApi(ctx, pod, check.runtime);
      if (!api.ok) return { retry: api.message };
      try {
        await api.client.dropDatabase(old.database); // 204 also when it is already gone
      } catch (err) {
        if (!(err instanceof ApiClientError && err.status === 404)) return { retry: `cannot drop ${old.database} on pod ${old.pod}: ${kubeMessage(err)}` };
      }
      ctx.pods.forgetStatus(namespace, old.pod);
      ctx.logger.info('branch expired; database dropped, object kept (expiryPolicy Retain)', { branch: label, database: old.database });
    }
  }
  await deleteBranchSecret(ctx.kube, p.obj, old.secretName ?? `${p.obj.metadata!.name}-db`);
  const { pod: _pod, database: _db, secretName: _secret, ...kept } = old;
  const fields: BranchStatus = kept;
  if (p.old.phase !== 'Expired') ctx.metrics.branchesDeleted.inc();
  await setExpired(p, reason, `${message}; database dropped, the Branch kept (expiryPolicy Retain): delete it when done`, spec.ttl, fields);
  return {};
}
