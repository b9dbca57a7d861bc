// Which namespaces' Branches a Runtime takes, as Gateway API's allowedRoutes says which namespaces'
// routes a listener takes: spec.allowedNamespaces.from is Same (the default: only its own namespace),
// All, or Selector (namespaces whose labels match spec.allowedNamespaces.selector). So per-PR
// namespaces can share one Runtime (and its Templates) without every namespace being able to.
// Namespace labels are read with a short cache: a Selector needs get on namespaces, which only the
// chart's ClusterRole (operator.allNamespaces=true) grants. It is asked at placement and again on every
// pass of a placed Branch (but the echo of its own Ready write): a namespace no longer admitted loses
// its Branches' credentials and Secrets, and keeps their databases (branch-converge.ts).

import type { OperatorContext } from './context.js';
import type { LabelSelector, Runtime } from './crds/index.js';
import { kubeMessage } from './kube.js';

const LABELS_TTL_MS = 10_000;
const labelCache = new WeakMap<OperatorContext['kube'], Map<string, { at: number; labels: Record<string, string> }>>();

/** Whether `labels` match a Kubernetes label selector (matchLabels and matchExpressions, ANDed). */
export function selectorMatches(selector: LabelSelector, labels: Record<string, string>): boolean {
  for (const [k, v] of Object.entries(selector.matchLabels ?? {})) if (labels[k] !== v) return false;
  for (const e of selector.matchExpressions ?? []) {
    const has = Object.prototype.hasOwnProperty.call(labels, e.key);
    const values = e.values ?? [];
    if (e.operator === 'In' && !(has && values.includes(labels[e.key]!))) return false;
    if (e.operator === 'NotIn' && has && values.includes(labels[e.key]!)) return false;
    if (e.operator === 'Exists' && !has) return false;
    if (e.operator === 'DoesNotExist' && has) return false;
  }
  return true;
}

async function namespaceLabels(ctx: OperatorContext, namespace: string): Promise<Record<string, string>> {
  let cache = labelCache.get(ctx.kube);
  if (!cache) labelCache.set(ctx.kube, (cache = new Map()));
  const hit = cache.get(namespace);
  if (hit && ctx.clock.monotonic() - hit.at < LABELS_TTL_MS) return hit.labels;
  const ns = await ctx.kube.core.readNamespace({ name: namespace });
  const labels = ns.metadata?.labels ?? {};
  cache.set(namespace, { at: ctx.clock.monotonic(), labels });
  return labels;
}

/**
 * Whether the Runtime takes Branches from `namespace`; when not, a message a person can act on, and
 * `unknown` when the namespace's labels could not be read (so a placed Branch is not cut off for an
 * API server's hiccup).
 */
export async function runtimeAdmits(ctx: OperatorContext, rt: Runtime, namespace: string): Promise<{ ok: true } | { ok: false; message: string; unknown?: true }> {
  const own = rt.metadata.namespace;
  const allowed = rt.spec.allowedNamespaces;
  if (namespace === own || allowed.from === 'All') return { ok: true };
  const refused = `Runtime ${own}/${rt.metadata.name} does not take Branches from namespace ${namespace}`;
  if (allowed.from === 'Same') return { ok: false, message: `${refused} (spec.allowedNamespaces.from: Same); set from: All, or Selector with a selector that matches ${namespace}` };
  let labels: Record<string, string>;
  try {
    labels = await namespaceLabels(ctx, namespace);
  } catch (err) {
    return { ok: false, unknown: true, message: `${refused} unless its labels match spec.allowedNamespaces.selector, and they cannot be read: ${kubeMessage(err)} (the operator needs get on namespaces: the chart's operator.allNamespaces=true grants it)` };
  }
  return selectorMatches(allowed.selector ?? {}, labels) ? { ok: true } : { ok: false, message: `${refused}: its labels do not match spec.allowedNamespaces.selector` };
}
