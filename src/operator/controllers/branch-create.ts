// Creating a Branch's database: placement (a pod of the Template's Runtime that is ready and holds the
// Template sealed; placement.ts weighs them), written to status first (phase Creating), so a retry
// creates on the same pod under the same name; then the one-call create with its credential, whose
// request id makes a repeat answer the first result.

import type { V1Pod } from '@kubernetes/client-node';
import { ApiClientError, type ApiClient } from '../../api/client.js';
import type { CreateDatabaseRequest, CreatedDatabaseBody } from '../../api/contract.js';
import { setCondition } from '../conditions.js';
import { podApi, runtimePods, runtimeRefOf, templateNamespaceOf } from '../context.js';
import { runtimeAdmits } from '../namespaces.js';
import { parseObject, runtime as runtimeSchema, type BranchSpec, type TemplateStatus } from '../crds/index.js';
import type { ReconcileResult } from '../controller.js';
import { addFinalizer, hasFinalizer, RUNTIME_FINALIZER } from '../finalizer.js';
import { keyOf } from '../kube.js';
import { choosePod, type Candidate } from '../placement.js';
import { podReady } from '../pods.js';
import { setPhase, write, type Pass } from './branch-status.js';
import { branchDatabaseName } from './branch-verify.js';

/** What the database's limits should be; null: the runtime's default (--max-sessions-per-db, --database-memory-limit). */
export interface Limits {
  connections: number | null;
  memoryMb: number | null;
}

/** Chooses a pod and writes it to status (phase Creating): null when placed, else what the reconcile returns. */
export async function place(p: Pass, spec: BranchSpec): Promise<ReconcileResult | null> {
  const { ctx } = p;
  // The Template's namespace: its Runtime, pods and database are there; the Branch may be elsewhere.
  const namespace = templateNamespaceOf(p.obj);
  const tplName = spec.templateRef.name;
  const pending = (reason: string, message: string) => setPhase(p, 'Pending', { reason, message }, spec.ttl);
  const tpl = ctx.caches.templates.get(tplName, namespace);
  if (!tpl) return pending('TemplateNotFound', `Template ${tplName} does not exist in namespace ${namespace}: create it, or fix spec.templateRef`);
  if (tpl.metadata!.deletionTimestamp) return pending('TemplateDeleting', `Template ${tplName} is being deleted; no new Branch is made from it`);
  const runtimeName = runtimeRefOf(tpl);
  const rtObj = runtimeName ? ctx.caches.runtimes.get(runtimeName, namespace) : undefined;
  const rt = rtObj ? parseObject(runtimeSchema, rtObj) : null;
  if (!runtimeName || !rt || !rt.ok) return pending('RuntimeNotFound', `Runtime ${runtimeName ?? '(none)'} of Template ${tplName} does not exist or is invalid`);
  if (rtObj!.metadata!.deletionTimestamp) return pending('RuntimeDeleting', `Runtime ${runtimeName} is being deleted; no new Branch is placed on it`);
  const admitted = await runtimeAdmits(ctx, rt.value, p.obj.metadata!.namespace!);
  if (!admitted.ok) return pending('NamespaceNotAllowed', admitted.message);
  // The Runtime's deletion is held while it has Branches: its finalizer goes on before the first is placed.
  if (!hasFinalizer(rtObj!, RUNTIME_FINALIZER)) await addFinalizer(ctx.kube, 'runtimes', rtObj!, RUNTIME_FINALIZER);

  const tplStatus = (tpl.status ?? {}) as TemplateStatus;
  const sealedOn = new Set((tplStatus.pods ?? []).filter((e) => e.phase === 'Sealed' && e.observedGeneration === tpl.metadata!.generation).map((e) => e.pod));
  // Only pods the Runtime wants: a pod past spec.replicas is kept only for the Branches it holds.
  const wantedPods = new Set(Array.from({ length: rt.value.spec.replicas }, (_, i) => `${runtimeName}-${i}`));
  let pods = runtimePods(ctx, namespace, runtimeName).filter((pod) => podReady(pod) && sealedOn.has(pod.metadata!.name!) && wantedPods.has(pod.metadata!.name!));
  const wanted = spec.affinity?.pod;
  if (wanted !== undefined) pods = pods.filter((pod) => pod.metadata!.name === wanted);
  if (pods.length === 0) {
    const message =
      wanted !== undefined
        ? `pod ${wanted} (spec.affinity.pod) is not ready or does not hold Template ${tplName} sealed yet`
        : `no ready pod of Runtime ${runtimeName} holds Template ${tplName} sealed yet`;
    return pending(wanted !== undefined ? 'PodNotAvailable' : 'TemplateNotReady', message);
  }
  const statuses = await Promise.all(pods.map((pod) => podStatus(p, pod, runtimeName)));
  // From here to ledger.record nothing is awaited: concurrent placements see each other's choices.
  const cached = new Map<string, string | undefined>();
  for (const b of ctx.caches.branches.list()) {
    if (templateNamespaceOf(b) !== namespace) continue;
    const on = (b.status as { pod?: string } | undefined)?.pod;
    cached.set(keyOf(b), on === undefined ? undefined : `${namespace}/${on}`);
  }
  const candidates: Candidate[] = pods.map((pod, i) => ({ ...statuses[i]!, placed: ctx.placements.placedOn(`${namespace}/${pod.metadata!.name}`, cached) }));
  const chosen = choosePod(candidates);
  if (chosen === null) {
    const message = `no pod of Runtime ${runtimeName} that holds Template ${tplName} answers its control API (${pods.map((pod) => pod.metadata!.name).join(', ')}); retrying`;
    await pending('PodUnreachable', message);
    return { retry: message };
  }

  // The one name later passes accept in status for this Branch (branch-verify.ts).
  const database = branchDatabaseName(rt.value.spec.engine.prefix, tplName, p.obj.metadata!.uid!);
  ctx.placements.record(keyOf(p.obj), `${namespace}/${chosen}`);
  p.placedHere = true;
  const message = `creating database ${database} on pod ${chosen}`;
  await write(
    p,
    { ...p.old, observedGeneration: p.generation, phase: 'Creating', pod: chosen, database, conditions: setCondition(p.old.conditions, { type: 'Ready', status: 'False', reason: 'Creating', message }, p.generation, ctx.clock) },
    null,
  );
  ctx.logger.info('branch placed', { branch: `${namespace}/${p.obj.metadata!.name}`, pod: chosen, database });
  return null;
}

/** What placement weighs of a pod, from its /v1/status (shared with concurrent placements); nulls when it does not answer. */
async function podStatus(p: Pass, pod: V1Pod, runtime: string): Promise<Omit<Candidate, 'placed'>> {
  const name = pod.metadata!.name!;
  const api = await podApi(p.ctx, pod, runtime);
  if (!api.ok) return { pod: name, databases: null, memoryBytes: null };
  try {
    const s = await p.ctx.pods.status(pod.metadata!.namespace!, name, api.client);
    return { pod: name, databases: s.databases.ephemeral, memoryBytes: Math.round(s.memory.pss_mb * 2 ** 20) };
  } catch {
    return { pod: name, databases: null, memoryBytes: null };
  }
}

export type CreateOutcome = { made: CreatedDatabaseBody | null } | { stop: ReconcileResult };

/**
 * Creates the database with its credential in one call: `made` is the answer (its credential null in
 * the answer to a repeat), or null when the database existed already; `stop` is what to return from
 * the reconcile instead.
 */
export async function create(p: Pass, client: ApiClient, spec: BranchSpec, limits: Limits, template: string, database: string): Promise<CreateOutcome> {
  const body: CreateDatabaseRequest = {
    template,
    name: database,
    pinned: spec.pinned,
    ...(limits.connections !== null ? { connection_limit: limits.connections } : {}),
    ...(limits.memoryMb !== null ? { memory_limit_mb: limits.memoryMb } : {}),
    credential: {},
    // Safe to retry: the same request id and body answer the first result.
    request_id: `branch-${p.obj.metadata!.uid}-${database}-c`,
  };
  try {
    const made = await client.createDatabase(body);
    p.ctx.logger.info('database created', { branch: `${p.obj.metadata!.namespace}/${p.obj.metadata!.name}`, database, source: made.source, mint_ms: made.mint_ms });
    return { made };
  } catch (err) {
    if (!(err instanceof ApiClientError)) throw err;
    // Matched by the error's code, never its text.
    if (err.code === 'DUPLICATE_DATABASE') return { made: null };
    // Placed by this pass on a pod whose API refused the connection (its runtime went down after the
    // status placement read): no create for this Branch ever reached it, so it may go elsewhere.
    const refused = p.placedHere === true && connectionRefused(err);
    if (refused) p.ctx.pods.forgetStatus(templateNamespaceOf(p.obj), p.old.pod!);
    if (err.status === 404 || err.status === 429 || refused) {
      // Not on this pod after all (template gone, the pod is full or down): forget the placement and choose again.
      const reason = refused ? 'PodUnreachable' : err.status === 404 ? 'TemplateNotOnPod' : 'PodFull';
      const message = `pod ${p.old.pod} refused database ${database}: ${err.message}; choosing another pod`;
      const { pod: _pod, database: _db, ...rest } = p.old;
      p.old = rest;
      p.ctx.placements.forget(keyOf(p.obj));
      await setPhase(p, 'Pending', { reason, message }, spec.ttl);
      return { stop: { retry: message } };
    }
    if (err.status >= 400 && err.status < 500) return { stop: await setPhase(p, 'Failed', { reason: 'CreateRefused', message: `pod ${p.old.pod} refused database ${database}: ${err.message}` }, spec.ttl) };
    return { stop: { retry: `pod ${p.old.pod}: ${err.message}` } };
  }
}

/** The call never reached the pod: its TCP connection was refused (nothing was sent). */
function connectionRefused(err: ApiClientError): boolean {
  const cause = (err.cause as { cause?: { code?: string } } | undefined)?.cause;
  return err.status === 0 && cause?.code === 'ECONNREFUSED';
}
