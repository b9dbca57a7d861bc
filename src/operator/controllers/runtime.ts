// The Runtime controller: keeps a Runtime's Kubernetes objects as its spec says (runtime-objects.ts) and
// reports its pods: ready replicas, and each pod's capacity from its /v1/status, which is what Branch
// placement weighs. Objects are created when missing; the StatefulSet is updated in place when its
// spec hash changed (a rolling update; its volume claims are kept: Kubernetes forbids changing them);
// the Secret is never rewritten, as clients and pods hold its token and password.
//
// Branches are never stranded. Scale-down: a pod past spec.replicas that holds Branches' databases is
// kept (condition ScaleDownHeld names them) until they go; draining them elsewhere would mean copying
// databases between pods, which the runtime cannot do, and a silent loss is worse than a held pod.
// Deletion: a finalizer holds it while Branches have databases on its pods (Ready False
// DeletionBlocked names them), as the Template's does; children are owned by the Runtime and go with it.
// The finalizer is on only while Branches are: the Branch controller adds it before it places one,
// and this controller takes it off when the last is gone, so a Runtime without Branches is deleted
// at once even when no operator runs (helm uninstall removes the operator and the Runtime together).

import { isDeepStrictEqual } from 'node:util';
import { findCondition, setCondition } from '../conditions.js';
import { branchLabel, podApi, runtimePods, templateNamespaceOf, type OperatorContext } from '../context.js';
import { podHoldingDatabase } from './branch-verify.js';
import { parseObject, runtime as runtimeSchema, type Runtime, type RuntimeStatus } from '../crds/index.js';
import type { ReconcileResult } from '../controller.js';
import { addFinalizer, hasFinalizer, removeFinalizer, RUNTIME_FINALIZER } from '../finalizer.js';
import { httpCode, isNotFound, kubeMessage, splitKey, type CustomObject } from '../kube.js';
import { podReady, runtimeSecretName, headlessServiceName } from '../pods.js';
import { commitStatus } from '../status.js';
import { clientService, disruptionBudget, headlessService, runtimeSecret, runtimeSpecProblem, SPEC_HASH_ANNOTATION, statefulSet } from './runtime-objects.js';

type PodEntry = NonNullable<RuntimeStatus['pods']>[number];

/** Reads with `get`; null when absent. */
async function find<T>(get: () => Promise<T>): Promise<T | null> {
  try {
    return await get();
  } catch (err) {
    if (isNotFound(err)) return null;
    throw err;
  }
}

/** Creates what is missing and updates the StatefulSet whose spec changed; the names of what it wrote. */
async function ensureObjects(ctx: OperatorContext, rt: Runtime, replicas: number): Promise<string[]> {
  const { core, apps, policy } = ctx.kube;
  const ns = rt.metadata.namespace!;
  const name = rt.metadata.name;
  const wrote: string[] = [];
  if (!(await find(() => core.readNamespacedSecret({ name: runtimeSecretName(name), namespace: ns })))) {
    await core.createNamespacedSecret({ namespace: ns, body: runtimeSecret(rt) });
    wrote.push(`Secret ${runtimeSecretName(name)}`);
  }
  if (!(await find(() => core.readNamespacedService({ name: headlessServiceName(name), namespace: ns })))) {
    await core.createNamespacedService({ namespace: ns, body: headlessService(rt, ctx.net) });
    wrote.push(`Service ${headlessServiceName(name)}`);
  }
  if (!(await find(() => core.readNamespacedService({ name, namespace: ns })))) {
    await core.createNamespacedService({ namespace: ns, body: clientService(rt, ctx.net) });
    wrote.push(`Service ${name}`);
  }
  const budget = disruptionBudget(rt);
  const pdb = await find(() => policy.readNamespacedPodDisruptionBudget({ name, namespace: ns }));
  if (!pdb) {
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: budget });
    wrote.push(`PodDisruptionBudget ${name}`);
  } else if (!isDeepStrictEqual(JSON.parse(JSON.stringify({ m: pdb.spec?.maxUnavailable, s: pdb.spec?.selector, n: pdb.spec?.minAvailable ?? null })), { m: budget.spec!.maxUnavailable, s: budget.spec!.selector, n: null })) {
    // Edited by hand (a watched object: operator.ts): put back, so drains keep taking one pod at a time.
    await policy.replaceNamespacedPodDisruptionBudget({ name, namespace: ns, body: { ...budget, metadata: { ...budget.metadata, resourceVersion: pdb.metadata!.resourceVersion! } } });
    wrote.push(`PodDisruptionBudget ${name} (restored)`);
  }
  const desired = statefulSet(rt, ctx.net, replicas);
  const current = await find(() => apps.readNamespacedStatefulSet({ name, namespace: ns }));
  if (!current) {
    await apps.createNamespacedStatefulSet({ namespace: ns, body: desired });
    wrote.push(`StatefulSet ${name}`);
  } else if (current.metadata?.annotations?.[SPEC_HASH_ANNOTATION] !== desired.metadata!.annotations![SPEC_HASH_ANNOTATION]) {
    // An update of the same StatefulSet (never a delete and create): the StatefulSet controller rolls
    // its pods one at a time, each back with its name and volume, and its Branches come back Ready.
    await apps.replaceNamespacedStatefulSet({
      name,
      namespace: ns,
      body: {
        ...desired,
        metadata: { ...desired.metadata, resourceVersion: current.metadata!.resourceVersion! },
        spec: { ...desired.spec!, volumeClaimTemplates: current.spec!.volumeClaimTemplates! },
      },
    });
    wrote.push(`StatefulSet ${name} (updated)`);
  }
  return wrote;
}

/** Branches with a database on a pod of this Runtime (by status.pod: <runtime>-<ordinal>), with their pod's ordinal. */
function branchesOn(ctx: OperatorContext, namespace: string, runtime: string): { name: string; ordinal: number }[] {
  const pattern = new RegExp(`^${runtime}-([0-9]+)$`);
  const out: { name: string; ordinal: number }[] = [];
  for (const b of ctx.caches.branches.list()) {
    if (templateNamespaceOf(b) !== namespace) continue;
    const pod = podHoldingDatabase(ctx, b);
    const m = pod !== undefined ? pattern.exec(pod) : null;
    if (m) out.push({ name: branchLabel(b, namespace), ordinal: Number(m[1]) });
  }
  return out;
}

function listed(names: string[]): string {
  return names.slice(0, 10).join(', ') + (names.length > 10 ? ` and ${names.length - 10} more` : '');
}

export async function reconcileRuntime(ctx: OperatorContext, key: string): Promise<ReconcileResult> {
  const { namespace, name } = splitKey(key);
  let obj = ctx.caches.runtimes.get(name, namespace);
  if (!obj) return {};
  const generation = obj.metadata!.generation;
  const old = (obj.status ?? {}) as RuntimeStatus;
  const using = branchesOn(ctx, namespace, name);
  if (obj.metadata!.deletionTimestamp) return finalize(ctx, obj, old, using.map((b) => b.name));
  // The finalizer is there only while Branches are (the Branch controller adds it before placing one):
  // a Runtime without Branches deletes at once, even with no operator running (helm uninstall).
  if (using.length > 0 && !hasFinalizer(obj, RUNTIME_FINALIZER)) obj = await addFinalizer(ctx.kube, 'runtimes', obj, RUNTIME_FINALIZER);
  else if (using.length === 0 && hasFinalizer(obj, RUNTIME_FINALIZER)) obj = await removeFinalizer(ctx.kube, 'runtimes', obj, RUNTIME_FINALIZER);
  const parsed = parseObject(runtimeSchema, obj);
  const problem = parsed.ok ? runtimeSpecProblem(parsed.value) : parsed.message;
  const invalid = async (message: string): Promise<ReconcileResult> => {
    const conditions = setCondition(old.conditions, { type: 'Ready', status: 'False', reason: 'InvalidSpec', message }, generation, ctx.clock);
    await commitStatus(ctx, 'runtimes', obj!, { ...old, observedGeneration: generation, conditions });
    return {};
  };
  // Nothing is written from a spec no pod could run with: the StatefulSet stays as it was.
  if (!parsed.ok || problem !== null) return invalid(`the Runtime's spec is invalid: ${problem}`);
  const rt = parsed.value;
  // Scale-down never strands a Branch: a pod past spec.replicas stays while Branches have databases on
  // it (no new ones are placed there), and goes once they are deleted or expired.
  const held = using.filter((b) => b.ordinal >= rt.spec.replicas);
  const replicas = Math.max(rt.spec.replicas, ...held.map((b) => b.ordinal + 1));
  let wrote: string[];
  try {
    wrote = await ensureObjects(ctx, rt, replicas);
  } catch (err) {
    // The API server refused what the spec asks for (an affinity or toleration it finds invalid).
    if (httpCode(err) === 422) return invalid(`the API server refused the StatefulSet made from this spec: ${kubeMessage(err)}`);
    throw err;
  }
  if (wrote.length > 0) {
    ctx.logger.info('runtime objects written', { runtime: key, objects: wrote });
    await ctx.events.record(obj, 'Normal', 'Applied', `wrote ${wrote.join(', ')}`);
  }

  const pods = runtimePods(ctx, namespace, name);
  const entries = await Promise.all(pods.map((pod) => podEntry(ctx, pod, name)));
  const readyReplicas = entries.filter((e) => e.ready).length;
  const desired = replicas;
  const ready =
    readyReplicas >= desired
      ? { type: 'Ready', status: 'True' as const, reason: 'AllPodsReady', message: `${readyReplicas} of ${desired} runtime pods ready` }
      : { type: 'Ready', status: 'False' as const, reason: pods.length < desired ? 'PodsStarting' : 'PodsNotReady', message: `${readyReplicas} of ${desired} runtime pods ready${entries.filter((e) => !e.ready).map((e) => `; ${e.pod}: ${e.message ?? 'not ready'}`).join('')}` };
  let conditions = setCondition(old.conditions, ready, generation, ctx.clock);
  if (held.length > 0) {
    const message = `replicas ${rt.spec.replicas}, but ${replicas} pods are kept: Branches have databases on the pods past it (${listed(held.map((b) => b.name))}). Delete them (or let their ttl run out) and the pods go.`;
    conditions = setCondition(conditions, { type: 'ScaleDownHeld', status: 'True', reason: 'BranchesOnPods', message }, generation, ctx.clock);
    if (findCondition(old.conditions, 'ScaleDownHeld')?.status !== 'True') await ctx.events.record(obj, 'Warning', 'ScaleDownHeld', message);
  } else if (findCondition(old.conditions, 'ScaleDownHeld') !== undefined) {
    conditions = setCondition(conditions, { type: 'ScaleDownHeld', status: 'False', reason: 'NoBranchesOnRemovedPods', message: `${replicas} pods, as spec.replicas says` }, generation, ctx.clock);
  }
  const next: RuntimeStatus = { observedGeneration: generation, replicas: pods.length, readyReplicas, pods: entries, conditions };
  // An Event when Ready flips (not on each reason change: pods start and stop).
  const was = findCondition(old.conditions, 'Ready');
  await commitStatus(ctx, 'runtimes', obj, next, was?.status !== ready.status ? { warning: true } : null);
  return {};
}

/** Deleting a Runtime: held while Branches have databases on its pods (they would be stranded), then let go (its objects go by garbage collection). */
async function finalize(ctx: OperatorContext, obj: CustomObject, old: RuntimeStatus, users: string[]): Promise<ReconcileResult> {
  if (!hasFinalizer(obj, RUNTIME_FINALIZER)) return {};
  if (users.length > 0) {
    const message = `deletion waits for ${users.length} Branch(es) with databases on this Runtime's pods: ${listed(users)}. Delete them (or let their ttl run out) and the Runtime goes.`;
    const conditions = setCondition(old.conditions, { type: 'Ready', status: 'False', reason: 'DeletionBlocked', message }, obj.metadata!.generation, ctx.clock);
    await commitStatus(ctx, 'runtimes', obj, { ...old, conditions });
    return {};
  }
  await removeFinalizer(ctx.kube, 'runtimes', obj, RUNTIME_FINALIZER);
  ctx.logger.info('runtime released', { runtime: `${obj.metadata!.namespace}/${obj.metadata!.name}` });
  return {};
}

async function podEntry(ctx: OperatorContext, pod: Parameters<typeof podReady>[0], runtime: string): Promise<PodEntry> {
  const name = pod.metadata!.name!;
  if (!podReady(pod)) return { pod: name, ready: false, message: 'the pod is not Ready' };
  const api = await podApi(ctx, pod, runtime);
  if (!api.ok) return { pod: name, ready: false, message: api.message };
  try {
    const s = await api.client.status();
    // Memory rounded to MiB: finer figures change on every look and would make every pass a write.
    return { pod: name, ready: true, databases: s.databases.ephemeral, memoryBytes: Math.round(s.memory.pss_mb) * 2 ** 20 };
  } catch (err) {
    return { pod: name, ready: false, message: `its control API does not answer: ${err instanceof Error ? err.message : String(err)}` };
  }
}
