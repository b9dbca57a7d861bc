// What every controller reads and writes through: the Kubernetes clients, the informer caches, the
// clock, the Event recorder, the pod network and the operator's logger. One object, built by
// operator.ts, so controllers stay plain functions of (context, key).

import type { KubernetesObject, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { ApiClient } from '../api/client.js';
import type { EventRecorder } from './events.js';
import type { ObjectCache } from './informer.js';
import type { CustomObject, Kube } from './kube.js';
import type { OperatorMetrics } from './metrics.js';
import type { PodCache } from './pod-cache.js';
import type { OwnWrites } from './own-writes.js';
import type { PlacementLedger } from './placement.js';
import type { TemplateBuilds } from './template-builds.js';
import { podApiUrl, podClient, type PodNetwork } from './pods.js';

export interface Caches {
  runtimes: ObjectCache<CustomObject>;
  templates: ObjectCache<CustomObject>;
  branches: ObjectCache<CustomObject>;
  pods: ObjectCache<V1Pod & KubernetesObject>;
  /** The Runtimes' PodDisruptionBudgets: watched only so that one edited by hand is put back at once. */
  disruptionBudgets: ObjectCache<V1PodDisruptionBudget & KubernetesObject>;
}

export interface OperatorContext {
  kube: Kube;
  caches: Caches;
  clock: Clock;
  logger: Logger;
  events: EventRecorder;
  net: PodNetwork;
  metrics: OperatorMetrics;
  /** Runtime tokens and pod statuses, read at most every few seconds. */
  pods: PodCache;
  /** Placements made here that the Branch cache does not show yet. */
  placements: PlacementLedger;
  /** The resourceVersions of the Branch controller's own writes, to recognise their watch echoes. */
  writes: OwnWrites;
  /** The template builds made here, per Template and pod: one per spec generation, whatever status writes do. */
  builds: TemplateBuilds;
}

export type PodApi = { ok: true; client: ApiClient } | { ok: false; reason: string; message: string };

/** A client for a runtime pod's control API, or why there is none (not ready, no token Secret). */
export async function podApi(ctx: OperatorContext, pod: V1Pod, runtime: string): Promise<PodApi> {
  const name = pod.metadata!.name!;
  const url = podApiUrl(pod, ctx.net);
  if (url === null) return { ok: false, reason: 'PodNotReady', message: `pod ${name} has no IP yet` };
  const token = await ctx.pods.token(pod.metadata!.namespace!, runtime);
  if (token === null) {
    return { ok: false, reason: 'RuntimeSecretMissing', message: `the Secret ${runtime}-pgx (key api-token) with the runtime's API token does not exist; the Runtime controller creates it` };
  }
  return { ok: true, client: podClient(url, token) };
}

/** Pods of a Runtime, by name, from the cache. */
export function runtimePods(ctx: OperatorContext, namespace: string, runtime: string): V1Pod[] {
  return ctx.caches.pods
    .list(namespace)
    .filter((p) => p.metadata?.labels?.['pgx.dev/runtime'] === runtime)
    .sort((a, b) => a.metadata!.name!.localeCompare(b.metadata!.name!));
}

/** The Template a Branch names, read loosely: used to map events before the Branch is parsed. */
export function templateRefOf(branch: CustomObject): string | undefined {
  return (branch.spec as { templateRef?: { name?: string } } | undefined)?.templateRef?.name;
}

/**
 * Where a Branch's Template (and so its Runtime, its pod and its database) lives: templateRef.namespace,
 * or the Branch's own namespace. The Branch's Secret is always in the Branch's namespace.
 */
export function templateNamespaceOf(branch: CustomObject): string {
  return (branch.spec as { templateRef?: { namespace?: string } } | undefined)?.templateRef?.namespace ?? branch.metadata!.namespace!;
}

/** The Branches whose Template is `template` in `namespace`, from every watched namespace. */
export function branchesOfTemplate(ctx: Pick<OperatorContext, 'caches'>, namespace: string, template: string): CustomObject[] {
  return ctx.caches.branches.list().filter((b) => templateRefOf(b) === template && templateNamespaceOf(b) === namespace);
}

/** A Branch as a message names it from `namespace`: its name there, `namespace/name` from another. */
export function branchLabel(branch: CustomObject, namespace: string): string {
  return branch.metadata!.namespace === namespace ? branch.metadata!.name! : `${branch.metadata!.namespace}/${branch.metadata!.name}`;
}

export function runtimeRefOf(template: CustomObject): string | undefined {
  return (template.spec as { runtimeRef?: { name?: string } } | undefined)?.runtimeRef?.name;
}
