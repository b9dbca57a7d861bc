// The Template controller: builds the template on every pod of its Runtime through that pod's control
// API (inline SQL or a ConfigMap -> POST /v1/templates; a source database -> an import job), seals it,
// and reports each pod and a Ready condition. A build that failed (the script's error) is not retried
// until the spec changes; a pod that cannot be reached is retried with backoff. The finalizer holds
// deletion while Branches hold databases made from the Template, saying which, then drops it on every
// pod; the Branches' databases go with their Branches.

import type { V1Pod } from '@kubernetes/client-node';
import { ApiClientError, type ApiClient } from '../../api/client.js';
import type { TemplateBody } from '../../api/contract.js';
import { findCondition, setCondition } from '../conditions.js';
import { branchesOfTemplate, branchLabel, podApi, runtimePods, type OperatorContext } from '../context.js';
import { podHoldingDatabase } from './branch-verify.js';
import { parseObject, runtime as runtimeSchema, template as templateSchema, templateDatabaseName, type Condition, type TemplateStatus } from '../crds/index.js';
import { addFinalizer, hasFinalizer, removeFinalizer, TEMPLATE_FINALIZER } from '../finalizer.js';
import type { CustomObject } from '../kube.js';
import { splitKey } from '../kube.js';
import { podReady } from '../pods.js';
import { commitStatus } from '../status.js';
import type { ReconcileResult } from '../controller.js';
import { resolveSource, type BuildPlan } from './template-source.js';

type PodEntry = NonNullable<TemplateStatus['pods']>[number];

export async function reconcileTemplate(ctx: OperatorContext, key: string): Promise<ReconcileResult> {
  const { namespace, name } = splitKey(key);
  const obj = ctx.caches.templates.get(name, namespace);
  if (!obj) return {};
  const generation = obj.metadata!.generation;
  const old = (obj.status ?? {}) as TemplateStatus;
  // From every watched namespace: a Branch may use a Template of another namespace.
  const branches = branchesOfTemplate(ctx, namespace, name);

  // Deletion waits for the Branches holding a database made from it, as the Runtime's does: one never
  // placed (its namespace not admitted by the Runtime, or not yet) holds nothing, and counted it would
  // let any namespace pin this Template (and read which Branches use it) with a Pending Branch.
  const holding = branches.filter((b) => podHoldingDatabase(ctx, b) !== undefined);
  if (obj.metadata!.deletionTimestamp) return finalize(ctx, obj, old, holding.map((b) => branchLabel(b, namespace)));
  if (!hasFinalizer(obj, TEMPLATE_FINALIZER)) {
    await addFinalizer(ctx.kube, 'templates', obj, TEMPLATE_FINALIZER);
    return {};
  }

  const parsed = parseObject(templateSchema, obj);
  const status = (conditions: Condition[], extra: Partial<TemplateStatus> = {}): TemplateStatus => ({
    ...old,
    observedGeneration: generation,
    branches: branches.length,
    ...extra,
    conditions,
  });
  const notReady = async (reason: string, message: string, extra: Partial<TemplateStatus> = {}): Promise<ReconcileResult> => {
    await update(ctx, obj, old, status(setCondition(old.conditions, { type: 'Ready', status: 'False', reason, message }, generation, ctx.clock), extra));
    return {};
  };
  if (!parsed.ok) return notReady('InvalidSpec', `the Template's spec is invalid: ${parsed.message}`);
  const spec = parsed.value.spec;
  const database = templateDatabaseName(name);
  const runtimeName = spec.runtimeRef.name;
  if (!ctx.caches.runtimes.get(runtimeName, namespace)) {
    return notReady('RuntimeNotFound', `Runtime ${runtimeName} does not exist in namespace ${namespace}; create it or fix spec.runtimeRef`, { database });
  }
  const pods = runtimePods(ctx, namespace, runtimeName);
  if (pods.length === 0) return notReady('NoRuntimePods', `Runtime ${runtimeName} has no pods yet`, { database, pods: [] });
  const source = await resolveSource(ctx.kube, namespace, spec);
  if (!source.ok) return notReady(source.reason, source.message, { database });

  const owner = buildOwner(ctx.caches.runtimes.get(runtimeName, namespace)!, spec.owner);
  const results = await Promise.all(
    pods.map((pod) => syncPod(ctx, obj, pod, runtimeName, old.pods?.find((p) => p.pod === pod.metadata!.name), source.plan, database, owner, spec.seal, generation ?? 0)),
  );
  const entries = results.map((r) => r.entry);
  const done = spec.seal ? 'Sealed' : 'Built';
  const failed = entries.filter((e) => e.phase === 'Failed');
  const waiting = entries.filter((e) => e.phase !== done && e.phase !== 'Failed');
  const ready =
    failed.length > 0
      ? { type: 'Ready', status: 'False' as const, reason: 'BuildFailed', message: failed.map((e) => `pod ${e.pod}: ${e.message ?? 'failed'}`).join('; ') + '. Fix the source and the Template is rebuilt.' }
      : waiting.length > 0
        ? { type: 'Ready', status: 'False' as const, reason: 'Building', message: `waiting for pods ${waiting.map((e) => `${e.pod} (${e.message ?? e.phase})`).join(', ')}` }
        : { type: 'Ready', status: 'True' as const, reason: done, message: `${done.toLowerCase()} as ${database} on ${entries.length} pod(s): ${entries.map((e) => e.pod).join(', ')}` };
  await update(ctx, obj, old, status(setCondition(old.conditions, ready, generation, ctx.clock), { database, pods: entries }));
  const transient = results.find((r) => r.transient !== undefined);
  return transient ? { retry: transient.transient! } : {};
}

/**
 * Who the build runs as. Whoever may create a Template is not trusted with the runtime itself: the
 * build is unprivileged (runtime/templates/build-owner.ts) unless the Runtime lets its Templates name a
 * privileged owner, and a Template without an owner always gets a role of its own, never postgres.
 */
export function buildOwner(runtime: CustomObject, owner: string | undefined): BuildOwner {
  const rt = parseObject(runtimeSchema, runtime);
  const privileged = rt.ok && rt.value.spec.privilegedTemplates;
  return { ...(owner !== undefined ? { owner } : {}), unprivileged: owner === undefined || !privileged };
}

type BuildOwner = { owner?: string; unprivileged: boolean };

/** Writes the status through the pipeline: an Event when Ready flips or its reason changes. */
async function update(ctx: OperatorContext, obj: CustomObject, _old: TemplateStatus, next: TemplateStatus): Promise<void> {
  await commitStatus(ctx, 'templates', obj, next);
}

interface PodResult {
  entry: PodEntry;
  /** Set when the pod could not be reached: retry with backoff. */
  transient?: string;
}

async function syncPod(
  ctx: OperatorContext,
  obj: CustomObject,
  pod: V1Pod,
  runtime: string,
  prev: PodEntry | undefined,
  plan: BuildPlan,
  database: string,
  owner: BuildOwner,
  seal: boolean,
  generation: number,
): Promise<PodResult> {
  const podName = pod.metadata!.name!;
  // What the pod last had is kept (generations, seal time), so that a pod that was only unreachable for
  // a while is recognised as up to date when it answers again, rather than rebuilt.
  const pending = (message: string, transient?: string): PodResult => ({
    entry: {
      pod: podName,
      phase: 'Pending',
      ...(prev?.observedGeneration !== undefined ? { observedGeneration: prev.observedGeneration } : {}),
      ...(prev?.templateGeneration !== undefined && prev.phase !== 'Failed' ? { templateGeneration: prev.templateGeneration } : {}),
      ...(prev?.sealedAt !== undefined ? { sealedAt: prev.sealedAt } : {}),
      message,
    },
    ...(transient !== undefined ? { transient } : {}),
  });
  if (!podReady(pod)) return pending('pod is not ready');
  const api = await podApi(ctx, pod, runtime);
  if (!api.ok) return pending(api.message, api.message);
  const log = ctx.logger.child({ template: `${obj.metadata!.namespace}/${obj.metadata!.name}`, pod: podName });
  const uid = obj.metadata!.uid!;
  // What was built for this generation: from the status, or from this operator's own record of its
  // builds when the status it read does not show them yet (its write conflicted, or is on its way).
  const mine = ctx.builds.get(uid, podName, generation);
  const current = prev?.observedGeneration === generation;
  const failed = mine && 'failed' in mine ? mine.failed : current && prev.phase === 'Failed' ? (prev.message ?? 'failed') : undefined;
  // A build that failed for this generation is not retried: the same script fails the same way.
  if (failed !== undefined) return { entry: { pod: podName, phase: 'Failed', observedGeneration: generation, message: failed } };
  const builtAs = mine && 'templateGeneration' in mine ? mine.templateGeneration : current ? prev.templateGeneration : undefined;
  try {
    const existing = (await api.client.listTemplates()).find((t) => t.name === database);
    // Built for this generation, and still the build we made (the runtime's generation of it matches).
    if (existing && builtAs !== undefined && builtAs === existing.generation) {
      // Someone may have unsealed it since: seal it again.
      const t = seal && !existing.sealed ? await api.client.seal(database) : existing;
      ctx.builds.record(uid, podName, { generation, templateGeneration: t.generation });
      return { entry: entryFor(podName, t, generation) };
    }
    log.info('building template', { database, source: plan.kind, replace: existing !== undefined });
    const t = await build(api.client, plan, { name: database, owner, seal, replace: existing !== undefined });
    ctx.builds.record(uid, podName, { generation, templateGeneration: t.generation });
    log.info('template built', { database, sealed: t.sealed, generation: t.generation });
    return { entry: entryFor(podName, t, generation) };
  } catch (err) {
    if (err instanceof BuildError || (err instanceof ApiClientError && err.status >= 400 && err.status < 500 && err.status !== 409 && err.status !== 429)) {
      // The runtime refused the named owner's privileges: say where the opt-in is, in the cluster's terms.
      const refusedOwner = err instanceof ApiClientError && err.code === 'INSUFFICIENT_PRIVILEGE' && owner.owner !== undefined && owner.unprivileged;
      const message = refusedOwner ? `${err.message}; to allow it, set spec.privilegedTemplates: true on Runtime ${runtime} and change the Template to build it again` : err.message;
      log.warn('template build failed', { database, error: message });
      ctx.builds.record(uid, podName, { generation, failed: message });
      return { entry: { pod: podName, phase: 'Failed', observedGeneration: generation, message } };
    }
    const message = `cannot reach the runtime: ${err instanceof Error ? err.message : String(err)}`;
    return pending(message, message);
  }
}

class BuildError extends Error {}

async function build(client: ApiClient, plan: BuildPlan, opts: { name: string; owner: BuildOwner; seal: boolean; replace: boolean }): Promise<TemplateBody> {
  const common = { name: opts.name, seal: opts.seal, replace: opts.replace, ...opts.owner };
  if (plan.kind === 'sql') return client.buildTemplate({ ...common, sql: plan.sql });
  const job = await client.importTemplate({ ...common, source_url: plan.sourceUrl, ...(plan.mask !== undefined ? { mask: plan.mask } : {}) });
  const done = await client.waitForImport(job.id, () => undefined, 500);
  if (done.phase === 'failed' || done.result === null) throw new BuildError(`import failed: ${done.error?.message ?? 'unknown error'}${done.error ? ` (SQLSTATE ${done.error.sqlstate})` : ''}`);
  return done.result;
}

function entryFor(pod: string, t: TemplateBody, generation: number): PodEntry {
  return {
    pod,
    phase: t.sealed ? 'Sealed' : 'Built',
    templateGeneration: t.generation,
    ...(t.sealed_at ? { sealedAt: new Date(t.sealed_at).toISOString().replace(/\.\d{3}Z$/, 'Z') } : {}),
    observedGeneration: generation,
  };
}

async function finalize(ctx: OperatorContext, obj: CustomObject, old: TemplateStatus, users: string[]): Promise<ReconcileResult> {
  if (!hasFinalizer(obj, TEMPLATE_FINALIZER)) return {};
  const generation = obj.metadata!.generation;
  if (users.length > 0) {
    const shown = users.slice(0, 10).join(', ') + (users.length > 10 ? ` and ${users.length - 10} more` : '');
    const message = `deletion waits for ${users.length} Branch(es) made from this Template: ${shown}. Delete them (or let their TTL run out) and the Template goes.`;
    const next: TemplateStatus = {
      ...old,
      branches: users.length,
      conditions: setCondition(old.conditions, { type: 'Ready', status: 'False', reason: 'DeletionBlocked', message }, generation, ctx.clock),
    };
    const was = findCondition(old.conditions, 'Ready');
    // An Event also when the list of Branches it waits for changed.
    await commitStatus(ctx, 'templates', obj, next, was?.reason !== 'DeletionBlocked' || was.message !== message ? { type: 'Warning', reason: 'DeletionBlocked', message } : null);
    return {};
  }
  // No Branch holds a database made from it: drop it on every pod, its spares with it (force: a copy
  // left behind by a Branch released without a drop keeps its data, as every copy does).
  const runtime = (obj.spec as { runtimeRef?: { name?: string } } | undefined)?.runtimeRef?.name;
  const database = templateDatabaseName(obj.metadata!.name!);
  if (runtime) {
    for (const pod of runtimePods(ctx, obj.metadata!.namespace!, runtime)) {
      if (!podReady(pod)) continue; // a pod that is down mints nothing; when back, its template is an orphan (docs)
      const api = await podApi(ctx, pod, runtime);
      if (!api.ok) continue;
      try {
        await api.client.dropTemplate(database, true);
      } catch (err) {
        // Gone already; or built with seal: false and never sealed, which the runtime does not record as a template.
        if (err instanceof ApiClientError && (err.status === 404 || err.code === 'NOT_A_TEMPLATE')) continue;
        return { retry: `cannot drop ${database} on pod ${pod.metadata!.name}: ${err instanceof Error ? err.message : String(err)}` };
      }
    }
  }
  await removeFinalizer(ctx.kube, 'templates', obj, TEMPLATE_FINALIZER);
  ctx.builds.forget(obj.metadata!.uid!);
  ctx.logger.info('template released', { template: `${obj.metadata!.namespace}/${obj.metadata!.name}` });
  return {};
}
