// A Branch pass and its status: what the pass read and wrote (Pass), the one function that derives the
// Branch's conditions from what the pass observed (conditionsFor), and the write through the status
// pipeline (status.ts commitStatus), which records an Event when Ready changes. Every verb of the Branch
// controller (branch-create.ts, branch-converge.ts, branch-expire.ts, branch-delete.ts) reports through
// setPhase or setReady here, so Ready is built in one place.

import { findCondition, isoSeconds, setCondition } from '../conditions.js';
import type { OperatorContext } from '../context.js';
import type { BranchPhase, BranchStatus, Condition } from '../crds/index.js';
import type { ReconcileResult } from '../controller.js';
import type { CustomObject } from '../kube.js';
import { keyOf } from '../kube.js';
import { commitStatus, type ReadyEvent } from '../status.js';

export interface Pass {
  ctx: OperatorContext;
  /** The object as last read or written by this pass. */
  obj: CustomObject;
  /** Its status, which this pass's writes build on. */
  old: BranchStatus;
  generation: number | undefined;
  /** The cache shows exactly what this operator last wrote: nobody changed the object since that pass. */
  echo: boolean;
  /** This pass placed the Branch: no create for it has reached its pod before this pass's. */
  placedHere?: boolean;
  /** When the Branch expires (creationTimestamp + ttl), or null without a ttl. */
  expiresAt: number | null;
}

/** Reasons of a Ready False that are progress, not trouble: their Events are Normal. */
const PROGRESS = new Set(['SecretDeleting', 'Creating', 'TemplateNotReady', 'PodUnavailable', 'Expired', 'DropPending', 'DatabaseDropped']);

/** What a pass observed that the conditions say. */
export type Observed =
  | { ready: true; message: string }
  | { ready: false; reason: string; message: string }
  | { expired: true; reason: string; message: string };

/** The Branch's conditions from what the pass observed: Ready, and Expired (from the ttl). */
function conditionsFor(p: Pass, seen: Observed, ttl: string | undefined): Condition[] {
  const { ctx, generation } = p;
  const ready =
    'expired' in seen
      ? { type: 'Ready', status: 'False' as const, reason: 'Expired', message: seen.message }
      : seen.ready
        ? { type: 'Ready', status: 'True' as const, reason: 'DatabaseReady', message: seen.message }
        : { type: 'Ready', status: 'False' as const, reason: seen.reason, message: seen.message };
  let conditions = setCondition(p.old.conditions, ready, generation, ctx.clock);
  // Once expired, always expired: a pass after it (the finalizer's) keeps saying so.
  if (!('expired' in seen) && findCondition(p.old.conditions, 'Expired')?.status === 'True') return conditions;
  const expired =
    'expired' in seen
      ? { type: 'Expired', status: 'True' as const, reason: seen.reason, message: seen.message }
      : p.expiresAt === null
        ? { type: 'Expired', status: 'False' as const, reason: 'NoTTL', message: 'no ttl: the Branch stays until deleted' }
        : { type: 'Expired', status: 'False' as const, reason: 'NotExpired', message: `expires at ${isoSeconds(p.expiresAt)} (ttl ${ttl} from its creation)` };
  conditions = setCondition(conditions, expired, generation, ctx.clock);
  return conditions;
}

/** Writes the status through the pipeline; the pass goes on with the object as stored. */
export async function write(p: Pass, next: BranchStatus, event?: ReadyEvent): Promise<void> {
  const before = p.obj;
  p.obj = await commitStatus(p.ctx, 'branches', p.obj, next, event);
  if (p.obj !== before) {
    p.old = (p.obj.status ?? {}) as BranchStatus;
    p.ctx.writes.wrote(keyOf(p.obj), p.obj.metadata?.resourceVersion);
  }
}

/** The status fields every write carries: the generation seen, and expiresAt from the ttl. */
function base(p: Pass): Partial<BranchStatus> {
  const { expiresAt: _, ...rest } = p.old;
  return { ...rest, observedGeneration: p.generation, ...(p.expiresAt !== null ? { expiresAt: isoSeconds(p.expiresAt) } : {}) };
}

/** A phase with Ready False (an Event when the reason is new: Normal for progress, else Warning). */
export async function setPhase(p: Pass, phase: BranchPhase, why: { reason: string; message: string }, ttl: string | undefined, extra: Partial<BranchStatus> = {}): Promise<ReconcileResult> {
  const conditions = conditionsFor(p, { ready: false, ...why }, ttl);
  await write(p, { ...base(p), ...extra, phase, conditions }, { warning: !PROGRESS.has(why.reason) });
  return requeueAtExpiry(p);
}

/** Ready: the database answers and the Secret is the Branch's. */
export async function setReady(p: Pass, status: Omit<BranchStatus, 'phase' | 'conditions' | 'observedGeneration'>, message: string, ttl: string | undefined, secretRecreated: boolean): Promise<ReconcileResult> {
  const conditions = conditionsFor(p, { ready: true, message }, ttl);
  const becameReady = p.old.phase !== 'Ready';
  const event: ReadyEvent = becameReady ? { type: 'Normal', reason: 'Ready', message } : secretRecreated ? { type: 'Normal', reason: 'SecretRecreated', message } : null;
  await write(p, { ...base(p), ...status, phase: 'Ready', conditions }, event);
  return requeueAtExpiry(p);
}

/** Expired: Ready False and Expired True; `extra` says what is left of the database (nothing, with Retain). */
export async function setExpired(p: Pass, reason: string, message: string, ttl: string | undefined, fields: BranchStatus): Promise<void> {
  const conditions = conditionsFor(p, { expired: true, reason, message }, ttl);
  const first = p.old.phase !== 'Expired';
  await write(p, { ...fields, observedGeneration: p.generation, ...(p.expiresAt !== null ? { expiresAt: isoSeconds(p.expiresAt) } : {}), phase: 'Expired', conditions }, first ? { type: 'Normal', reason, message } : null);
}

export function requeueAtExpiry(p: Pass): ReconcileResult {
  return p.expiresAt === null ? {} : { requeueAfterMs: Math.max(0, p.expiresAt - p.ctx.clock.now()) };
}
