// The Runtime controller: keeps a Runtime's Kubernetes objects as its spec says (runtime-objects.ts) and
// reports its pods: ready replicas, and each pod's capacity from its /v1/status, which is what Branch
// placement weighs. Objects are created when missing; the StatefulSet is replaced when its spec hash
// changed (its volume claims are kept: Kubernetes forbids changing them); the Secret is never rewritten,
// as clients and pods hold its token and password. Children are owned by the Runtime, so deleting the
// Runtime deletes them, with no finalizer.

import { findCondition, setCondition } from '../conditions.js';
import { podApi, runtimePods, type OperatorContext } from '../context.js';
import { parseObject, runtime as runtimeSchema, type Runtime, type RuntimeStatus } from '../crds/index.js';
import type { ReconcileResult } from '../controller.js';
import { isNotFound, splitKey } from '../kube.js';
import { podReady, runtimeSecretName, headlessServiceName } from '../pods.js';
import { writeStatus } from '../status.js';
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

/** Creates what is missing and replaces the StatefulSet whose spec changed; the names of what it wrote. */
async function ensureObjects(ctx: OperatorContext, rt: Runtime): Promise<string[]> {
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
  if (!(await find(() => policy.readNamespacedPodDisruptionBudget({ name, namespace: ns })))) {
    await policy.createNamespacedPodDisruptionBudget({ namespace: ns, body: disruptionBudget(rt) });
    wrote.push(`PodDisruptionBudget ${name}`);
  }
  const desired = statefulSet(rt, ctx.net);
  const current = await find(() => apps.readNamespacedStatefulSet({ name, namespace: ns }));
  if (!current) {
    await apps.createNamespacedStatefulSet({ namespace: ns, body: desired });
    wrote.push(`StatefulSet ${name}`);
  } else if (current.metadata?.annotations?.[SPEC_HASH_ANNOTATION] !== desired.metadata!.annotations![SPEC_HASH_ANNOTATION]) {
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

export async function reconcileRuntime(ctx: OperatorContext, key: string): Promise<ReconcileResult> {
  const { namespace, name } = splitKey(key);
  const obj = ctx.caches.runtimes.get(name, namespace);
  if (!obj || obj.metadata!.deletionTimestamp) return {};
  const generation = obj.metadata!.generation;
  const old = (obj.status ?? {}) as RuntimeStatus;
  const parsed = parseObject(runtimeSchema, obj);
  const problem = parsed.ok ? runtimeSpecProblem(parsed.value) : parsed.message;
  if (!parsed.ok || problem !== null) {
    // Nothing is written from a spec no pod could run with: the StatefulSet stays as it was.
    const message = `the Runtime's spec is invalid: ${problem}`;
    const was = findCondition(old.conditions, 'Ready');
    const conditions = setCondition(old.conditions, { type: 'Ready', status: 'False', reason: 'InvalidSpec', message }, generation, ctx.clock);
    await writeStatus(ctx.kube, 'runtimes', obj, { ...old, observedGeneration: generation, conditions });
    if (was?.reason !== 'InvalidSpec' || was.message !== message) await ctx.events.record(obj, 'Warning', 'InvalidSpec', message);
    return {};
  }
  const rt = parsed.value;
  const wrote = await ensureObjects(ctx, rt);
  if (wrote.length > 0) {
    ctx.logger.info('runtime objects written', { runtime: key, objects: wrote });
    await ctx.events.record(obj, 'Normal', 'Applied', `wrote ${wrote.join(', ')}`);
  }

  const pods = runtimePods(ctx, namespace, name);
  const entries = await Promise.all(pods.map((pod) => podEntry(ctx, pod, name)));
  const readyReplicas = entries.filter((e) => e.ready).length;
  const desired = rt.spec.replicas;
  const ready =
    readyReplicas >= desired
      ? { type: 'Ready', status: 'True' as const, reason: 'AllPodsReady', message: `${readyReplicas} of ${desired} runtime pods ready` }
      : { type: 'Ready', status: 'False' as const, reason: pods.length < desired ? 'PodsStarting' : 'PodsNotReady', message: `${readyReplicas} of ${desired} runtime pods ready${entries.filter((e) => !e.ready).map((e) => `; ${e.pod}: ${e.message ?? 'not ready'}`).join('')}` };
  const next: RuntimeStatus = {
    observedGeneration: generation,
    replicas: pods.length,
    readyReplicas,
    pods: entries,
    conditions: setCondition(old.conditions, ready, generation, ctx.clock),
  };
  await writeStatus(ctx.kube, 'runtimes', obj, next);
  const was = findCondition(old.conditions, 'Ready');
  if (was?.status !== ready.status) await ctx.events.record(obj, ready.status === 'True' ? 'Normal' : 'Warning', ready.reason, ready.message);
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
