// Keeping a placed Branch as its spec says: create its database if no create has answered yet, else
// check it is there (a Branch is Ready from what its pod says, never assumed); pinned and limits follow
// the spec; the Secret is the Branch's own and exists. A pod that is away (deleted and re-created, a
// rolling update, a drain) makes the Branch Unavailable, not Lost: the StatefulSet brings the pod back
// under the same name with the same volume, and the Branch is Ready again once its database answers.
// A Branch whose namespace its Runtime no longer admits is cut off (cutOff) until it is admitted again.

import type { V1Pod } from '@kubernetes/client-node';
import { ApiClientError } from '../../api/client.js';
import type { CredentialBody, DatabaseBody } from '../../api/contract.js';
import { findCondition, isoSeconds } from '../conditions.js';
import { podApi, templateNamespaceOf, type OperatorContext } from '../context.js';
import { templateDatabaseName, type BranchSpec, type Runtime } from '../crds/index.js';
import type { ReconcileResult } from '../controller.js';
import type { CustomObject } from '../kube.js';
import { runtimeAdmits } from '../namespaces.js';
import { podEngineEndpoint, podReady } from '../pods.js';
import { create, type CreateOutcome, type Limits } from './branch-create.js';
import { expire } from './branch-expire.js';
import { branchSecretName, clientTls, createBranchSecret, deleteBranchSecret, secretState, type ClientTls } from './branch-secret.js';
import { requeueAtExpiry, setPhase, setReady, type Pass } from './branch-status.js';
import { checkPlacement } from './branch-verify.js';

/** How often a Branch whose pod is away looks again (the pod's own events requeue it sooner). */
const POD_AWAY_RETRY_MS = 5_000;
/** How often a Branch whose Secret name is taken looks again (Secrets are not watched). */
const SECRET_TAKEN_RETRY_MS = 10_000;

/** The Runtime a Branch's pod belongs to, if it still exists and is not being deleted. */
function liveRuntime(ctx: OperatorContext, namespace: string, runtimeName: string | undefined): CustomObject | undefined {
  const rt = runtimeName ? ctx.caches.runtimes.get(runtimeName, namespace) : undefined;
  return rt && !rt.metadata?.deletionTimestamp ? rt : undefined;
}

/** The TLS the Branch's Runtime offers clients (spec.tls and its Secret); a string says why it is not known yet. */
async function runtimeTls(ctx: OperatorContext, namespace: string, rt: Runtime): Promise<ClientTls | string> {
  try {
    return await clientTls(ctx.kube, namespace, rt.spec.tls);
  } catch (err) {
    return `Runtime ${rt.metadata.name}'s TLS Secret ${rt.spec.tls?.secretName}: ${(err as Error).message}`;
  }
}

/** Look again after `ms`, or at expiry if that is sooner. */
function sooner(p: Pass, ms: number): ReconcileResult {
  return { requeueAfterMs: Math.min(ms, requeueAtExpiry(p).requeueAfterMs ?? ms) };
}

/**
 * The Branch's namespace is no longer admitted by its Runtime: every credential of its database is
 * revoked (the password in its Secret, wherever that was copied, stops working) and the Secret deleted;
 * nothing new is made.
 * The database stays on its pod (a label change does not delete data) until the Branch is deleted or
 * expires, which drop it as ever; admitted again, the Branch gets a new credential and Secret.
 */
async function cutOff(p: Pass, spec: BranchSpec, pod: V1Pod, runtime: string, refused: string): Promise<ReconcileResult> {
  const { ctx, old } = p;
  const database = old.database!;
  const secretName = old.secretName ?? branchSecretName(p.obj.metadata!.name!);
  // Cut off by an earlier pass (its Secret is gone from status): nothing to ask the API server or the pod.
  const done = findCondition(old.conditions, 'Ready')?.reason === 'NamespaceNotAllowed' && old.secretName === undefined;
  if (!done) {
    const api = await podApi(ctx, pod, runtime);
    if (!api.ok) return { retry: api.message };
    // Every credential of the database: the Secret's, and any a copy of an earlier Secret still holds.
    await api.client.revokeCredentials(database);
    await deleteBranchSecret(ctx.kube, p.obj, secretName);
  }
  const { secretName: _, ...rest } = old;
  p.old = rest;
  const message = `${refused}. Database ${database} is kept on pod ${old.pod}, but its credential is revoked and Secret ${secretName} deleted; admitted again, the Branch gets a new credential and Secret (deleting the Branch drops the database)`;
  return setPhase(p, 'Pending', { reason: 'NamespaceNotAllowed', message }, spec.ttl);
}

export async function converge(p: Pass, spec: BranchSpec, limits: Limits): Promise<ReconcileResult> {
  const { ctx, old } = p;
  // The pod, Template and Runtime are in the Template's namespace; the Secret in the Branch's.
  const tplNamespace = templateNamespaceOf(p.obj);
  const podName = old.pod!;
  const database = old.database!;
  const tplName = spec.templateRef.name;
  // Only what this operator would have written for this Branch is acted on (branch-verify.ts).
  const check = checkPlacement(ctx, p.obj, { pod: podName, database });
  if (check.kind === 'tampered') return setPhase(p, 'Failed', { reason: 'StatusTampered', message: check.message }, spec.ttl);
  if (check.kind === 'unknown') return { retry: check.message };
  const pod = ctx.caches.pods.get(podName, tplNamespace);
  if (check.kind === 'gone' && pod) return { retry: `${check.message}; its pod ${podName} is going too` };
  const runtimeName = check.kind === 'trusted' ? check.runtime : undefined;
  if (!pod || !podReady(pod)) {
    if (!pod && !liveRuntime(ctx, tplNamespace, runtimeName)) {
      return setPhase(p, 'Lost', {
        reason: 'PodGone',
        message: `pod ${podName}, which held database ${database}, is gone with its Runtime ${runtimeName ?? ''}; no new database is made in its place: delete this Branch and create another`,
      }, spec.ttl);
    }
    if (old.phase === 'Creating' && old.createdAt === undefined) return { retry: `pod ${podName} is ${pod ? 'not ready' : 'gone'}` };
    // Away, and coming back: the StatefulSet re-creates it with the same name and volume.
    await setPhase(p, 'Unavailable', { reason: 'PodUnavailable', message: `pod ${podName}, which holds database ${database}, is ${pod ? 'not ready' : 'being re-created'}; the Branch is Ready again when the pod is back and the database answers` }, spec.ttl);
    return sooner(p, POD_AWAY_RETRY_MS);
  }
  // The echo of this operator's own Ready write: the pass that wrote it had just seen the database and
  // the Secret, and nobody has changed the Branch since. The next event or resync looks at them again.
  if (p.echo && old.phase === 'Ready') return requeueAtExpiry(p);
  if (check.kind !== 'trusted') return { retry: check.message }; // (a Runtime that is gone returned above)
  // Admission is not placement's alone: a Runtime that stops taking the Branch's namespace (its
  // allowedNamespaces changed, or the namespace's labels) cuts its placed Branches off, as a Gateway
  // API route detaches from a listener that stops allowing it. Labels cannot be read: nothing changes.
  const admitted = await runtimeAdmits(ctx, check.rt, p.obj.metadata!.namespace!);
  if (!admitted.ok) return admitted.unknown ? { retry: admitted.message } : cutOff(p, spec, pod, check.runtime, admitted.message);
  const api = await podApi(ctx, pod, check.runtime);
  if (!api.ok) return { retry: api.message };

  let db: DatabaseBody | undefined;
  let created: CreateOutcome | undefined;
  if (old.phase === 'Creating' && old.createdAt === undefined) {
    // Not made yet as far as this Branch knows: create straight away (the request id makes a repeat of
    // an earlier attempt answer that attempt's result, and a database made by it is not made twice).
    created = await create(p, api.client, spec, limits, templateDatabaseName(tplName), database);
  } else {
    try {
      db = await api.client.getDatabase(database);
    } catch (err) {
      if (!(err instanceof ApiClientError && err.status === 404)) return { retry: `pod ${podName}: ${(err as Error).message}` };
      if (old.createdAt !== undefined) {
        if (!spec.pinned && old.phase === 'Ready') return expire(p, spec, 'DroppedWhenIdle', `the runtime dropped ${database} a grace period after its last session (pinned: false)`);
        return setPhase(p, 'Lost', { reason: 'DatabaseGone', message: `database ${database} no longer exists on pod ${podName}; no new database is made in its place: delete this Branch and create another` }, spec.ttl);
      }
      created = await create(p, api.client, spec, limits, templateDatabaseName(tplName), database);
    }
  }
  // A credential made with the database, in the create call; null when the create did not make one.
  let fresh: CredentialBody | null = null;
  if (created !== undefined) {
    if ('stop' in created) return created.stop;
    // The create's answer is the database as a GET would show it; a database made earlier is asked for.
    db = created.made ?? (await api.client.getDatabase(database));
    fresh = created.made?.credential ?? null;
  }
  db = db!; // read above, or created (or returned)
  const createdAt = old.createdAt ?? isoSeconds(Date.parse(db.created_at));

  // The spec may have changed since creation: pinned and the limits follow it; a limit taken out of the
  // spec goes back to the runtime's default (null), as it would have been had it never been set.
  if (db.pinned !== spec.pinned) db = spec.pinned ? await api.client.pin(database) : await api.client.unpin(database);
  if (db.connection_limit !== limits.connections) db = await api.client.setConnectionLimit(database, limits.connections);
  if (db.memory_limit_mb !== limits.memoryMb) db = await api.client.setMemoryLimit(database, limits.memoryMb);

  const secretName = old.secretName ?? branchSecretName(p.obj.metadata!.name!);
  // A Branch being created has no Secret yet as far as it knows: the create below finds one an earlier
  // pass made (ours), or one that is not ours. Otherwise it is looked for, and made again (with a new
  // credential) if it was lost. The credential the create call made serves; without one, one is made.
  const state = old.phase === 'Creating' && old.secretName === undefined ? ({ kind: 'absent' } as const) : await secretState(ctx.kube, p.obj, secretName);
  let madeSecret = false;
  let takenBy: string | null = state.kind === 'taken' ? state.owner : null;
  let waiting: string | null = null;
  if (state.kind === 'absent' || state.kind === 'stale') {
    // A stale Secret (an earlier Branch's of this name) is replaced by createBranchSecret.
    // The Runtime as checkPlacement read it: no second look in the cache.
    const tls = await runtimeTls(ctx, tplNamespace, check.rt);
    if (typeof tls === 'string') return { retry: tls };
    // A Branch hands out one credential, its Secret's: one made for a Secret that was lost (deleted, or
    // its copies leaked) is revoked before the new one is made.
    if (fresh === null) await api.client.revokeCredentials(database);
    const credential = fresh ?? (await api.client.createCredential(database, {}));
    const made = await createBranchSecret(ctx.kube, p.obj, secretName, podEngineEndpoint(pod, ctx.net), database, credential, tls);
    if (made === 'made') madeSecret = true;
    else await api.client.revokeCredential(database, credential.user);
    if (typeof made === 'object') {
      if ('taken' in made) takenBy = made.taken;
      else waiting = made.waiting;
    }
  } else if (fresh !== null) {
    await api.client.revokeCredential(database, fresh.user);
  }
  if (waiting !== null) {
    await setPhase(p, 'Pending', { reason: 'SecretDeleting', message: `database ${database} is on pod ${podName}; ${waiting}` }, spec.ttl, { pod: podName, database, createdAt });
    return { retry: waiting };
  }
  if (takenBy !== null) {
    const { secretName: _, ...rest } = old;
    p.old = rest;
    await setPhase(p, 'Pending', {
      reason: 'SecretNameTaken',
      message: `database ${database} is on pod ${podName}, but Secret ${secretName} already exists and belongs to ${takenBy}, not this Branch; it is neither changed nor reported. Delete or rename that Secret, or give the Branch another name`,
    }, spec.ttl, { pod: podName, database, createdAt });
    return sooner(p, SECRET_TAKEN_RETRY_MS);
  }
  const message = `database ${database} on pod ${podName}; connection details in Secret ${secretName}`;
  return setReady(p, { pod: podName, database, secretName, createdAt }, message, spec.ttl, madeSecret);
}
