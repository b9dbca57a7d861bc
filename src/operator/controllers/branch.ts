// The Branch controller: places a database on a runtime pod that holds the Template sealed, creates it
// through that pod's control API (pinned per spec, no TTL at the runtime: the operator expires the
// Branch, so cleanup has one path), makes a per-branch credential and a Secret, and reports phase, pod,
// database and the Ready and Expired conditions. This file is the reconcile's order (CloudNativePG's):
// get, deleting -> finalize, add the finalizer, parse, expire, then one verb:
//   branch-create.ts   placement and the one-call create
//   branch-converge.ts a placed Branch kept as its spec says (database checked, Secret ours)
//   branch-expire.ts   ttl ran out: expiryPolicy Delete or Retain
//   branch-delete.ts   the finalizer: drop, then let go
//   branch-status.ts   the pass, its conditions (one function), the status pipeline
//   branch-verify.ts   status.pod and status.database acted on only if this operator would have written them
//
// Phases: (none) -> Pending (waiting for a Template or pod; or placed and cut off, its namespace no
// longer admitted by the Runtime) -> Creating (pod and name chosen and written first, so a retry
// creates on the same pod under the same name) -> Ready <-> Unavailable (its pod is away: re-created,
// rolled, drained) -> Expired (deleted, or kept with expiryPolicy Retain). Lost when
// the database or its Runtime vanished: no new database is made silently. Bad specs are reported as
// Failed with a condition, and not retried until the spec changes. The ttl runs from the Branch's
// creationTimestamp in every phase, so a Branch that never became Ready expires too.

import { isoSeconds } from '../conditions.js';
import type { OperatorContext } from '../context.js';
import { branch as branchSchema, memoryLimitMb, parseDuration, parseObject, type BranchStatus } from '../crds/index.js';
import type { ReconcileResult } from '../controller.js';
import { addFinalizer, BRANCH_FINALIZER, hasFinalizer } from '../finalizer.js';
import { splitKey } from '../kube.js';
import { place, type Limits } from './branch-create.js';
import { converge } from './branch-converge.js';
import { finalize } from './branch-delete.js';
import { expire } from './branch-expire.js';
import { requeueAtExpiry, setPhase, type Pass } from './branch-status.js';

export async function reconcileBranch(ctx: OperatorContext, key: string): Promise<ReconcileResult> {
  const { namespace, name } = splitKey(key);
  const obj = ctx.caches.branches.get(name, namespace);
  if (!obj) {
    ctx.placements.forget(key);
    ctx.writes.forget(key);
    return {};
  }
  // The cache shows one of this operator's own writes that a later one of the same pass superseded: the
  // echo of that later write is on its way and queues this key again (own-writes.ts).
  const echo = ctx.writes.classify(key, obj.metadata!.resourceVersion);
  if (echo === 'stale') return {};
  const ttl = (obj.spec as { ttl?: unknown } | undefined)?.ttl;
  const ttlMs = typeof ttl === 'string' ? parseDuration(ttl) : null;
  // A string as the API server sends it (client-node's type says Date): new Date() reads either.
  const created = obj.metadata!.creationTimestamp ? new Date(obj.metadata!.creationTimestamp).getTime() : NaN;
  const p: Pass = {
    ctx,
    obj,
    old: (obj.status ?? {}) as BranchStatus,
    generation: obj.metadata!.generation,
    echo: echo === 'latest',
    expiresAt: ttlMs !== null && ttlMs > 0 && Number.isFinite(created) ? created + ttlMs : null,
  };
  // The cache shows the placement now (or its reset): the ledger need not remember it.
  if (p.old.pod !== undefined) ctx.placements.forget(key);
  // Deletion first: setting deletionTimestamp bumps the generation, which must not look like a spec change.
  if (obj.metadata!.deletionTimestamp) return finalize(p);
  if (!hasFinalizer(obj, BRANCH_FINALIZER)) {
    // Added first, and the pass goes on with the object as stored: nothing outside the cluster is made
    // before the finalizer is there, and the Branch does not wait for the echo to be placed.
    p.obj = await addFinalizer(ctx.kube, 'branches', obj, BRANCH_FINALIZER);
    ctx.writes.wrote(key, p.obj.metadata?.resourceVersion);
  }
  const parsed = parseObject(branchSchema, obj);
  if (!parsed.ok) return setPhase(p, 'Failed', { reason: 'InvalidSpec', message: `the Branch's spec is invalid: ${parsed.message}` }, typeof ttl === 'string' ? ttl : undefined);
  const spec = parsed.value.spec;
  // An Expired Branch (kept by expiryPolicy Retain) stays as it is.
  if (p.old.phase === 'Expired') return {};
  if (p.expiresAt !== null && p.expiresAt <= ctx.clock.now()) return expire(p, spec, 'TTLExpired', `the ttl (${spec.ttl}) ran out at ${isoSeconds(p.expiresAt)}`);
  const memory = spec.limits?.memory === undefined ? null : memoryLimitMb('limits.memory', spec.limits.memory);
  // Not applied, and not retried until the spec changes; the Branch still expires at its ttl.
  if (memory !== null && !memory.ok) return setPhase(p, 'Failed', { reason: 'InvalidMemoryLimit', message: memory.message }, spec.ttl);
  const limits: Limits = { connections: spec.limits?.connections ?? null, memoryMb: memory?.mb ?? null };
  if (p.old.phase === 'Lost') return requeueAtExpiry(p);
  if (!p.old.database || !p.old.pod) {
    // Placed (status Creating written): go on and create in the same pass.
    const placed = await place(p, spec);
    if (placed !== null) return placed;
  }
  return converge(p, spec, limits);
}
