// The Branch controller: places a database on a runtime pod that holds the Template sealed, creates it
// through that pod's control API (pinned per spec, no TTL at the runtime: the operator deletes the Branch
// at expiresAt, so cleanup has one path, the finalizer), makes a per-branch credential and a Secret, and
// reports phase, pod, database and the Ready and Expired conditions.
//
// Phases: (none) -> Pending (waiting for a Template or pod) -> Creating (pod and name chosen and written
// first, so a retry creates on the same pod under the same name) -> Ready -> Expired (deleted at once);
// Lost when the pod or the database vanished: no new database is made silently. Bad specs are reported
// as Failed with a condition, and not retried until the spec changes.

import type { V1Pod } from '@kubernetes/client-node';
import { ApiClientError, type ApiClient } from '../../api/client.js';
import type { CreateDatabaseRequest, CreatedDatabaseBody, CredentialBody, DatabaseBody } from '../../api/contract.js';
import { findCondition, isoSeconds, setCondition, type ConditionInput } from '../conditions.js';
import { podApi, runtimePods, runtimeRefOf, type OperatorContext } from '../context.js';
import {
  branch as branchSchema,
  memoryLimitMb,
  parseDuration,
  parseObject,
  runtime as runtimeSchema,
  templateDatabaseName,
  type BranchPhase,
  type BranchSpec,
  type BranchStatus,
  type TemplateStatus,
} from '../crds/index.js';
import type { ReconcileResult } from '../controller.js';
import { addFinalizer, BRANCH_FINALIZER, hasFinalizer, removeFinalizer } from '../finalizer.js';
import type { CustomObject } from '../kube.js';
import { keyOf, kubeMessage, pgxResource, splitKey, isNotFound } from '../kube.js';
import { choosePod, type Candidate } from '../placement.js';
import { podEngineEndpoint, podReady } from '../pods.js';
import { writeStatusObject } from '../status.js';
import { branchSecretName, createBranchSecret, secretExists } from './branch-secret.js';

/** How often a Branch whose drop cannot be confirmed (its pod is gone) looks again. */
const DROP_PENDING_RETRY_MS = 30_000;

interface Pass {
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
}

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
  const p: Pass = { ctx, obj, old: (obj.status ?? {}) as BranchStatus, generation: obj.metadata!.generation, echo: echo === 'latest' };
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
  if (!parsed.ok) return setPhase(p, 'Failed', { reason: 'InvalidSpec', message: `the Branch's spec is invalid: ${parsed.message}` });
  const spec = parsed.value.spec;
  const ttlMs = spec.ttl === undefined ? null : parseDuration(spec.ttl);
  if (spec.ttl !== undefined && (ttlMs === null || ttlMs <= 0)) {
    return setPhase(p, 'Failed', { reason: 'InvalidTTL', message: `ttl "${spec.ttl}" is not a positive duration: write it as 30m, 2h, 7d or 1h30m` });
  }
  const memory = spec.limits?.memory === undefined ? null : memoryLimitMb('limits.memory', spec.limits.memory);
  if (memory !== null && !memory.ok) {
    // Not applied, and not retried until the spec changes; a Branch that has a database still goes at its TTL.
    const at = expiresAt(p.old.createdAt, ttlMs);
    if (at !== null && at <= ctx.clock.now()) return expire(p, 'TTLExpired', `the ttl (${spec.ttl}) ran out at ${isoSeconds(at)}`);
    await setPhase(p, 'Failed', { reason: 'InvalidMemoryLimit', message: memory.message });
    return requeueAtExpiry(ctx, at);
  }
  const limits: Limits = { connections: spec.limits?.connections ?? null, memoryMb: memory?.mb ?? null };
  if (p.old.phase === 'Lost') return expiryOnly(p, ttlMs);
  if (!p.old.database || !p.old.pod) {
    // Placed (status Creating written): go on and create in the same pass.
    const placed = await place(p, spec);
    if (placed !== null) return placed;
  }
  return converge(p, spec, ttlMs, limits);
}

/** What the database's limits should be; null: the runtime's default (--max-sessions-per-db, --database-memory-limit). */
interface Limits {
  connections: number | null;
  memoryMb: number | null;
}

// --- status helpers ---

/** Writes the status (when it changed); the pass goes on with the object as stored. */
async function write(p: Pass, next: BranchStatus, event?: { type: 'Normal' | 'Warning'; reason: string; message: string }): Promise<void> {
  const stored = await writeStatusObject(p.ctx.kube, 'branches', p.obj, next);
  if (stored !== null) {
    p.obj = stored;
    p.old = (stored.status ?? {}) as BranchStatus;
    p.ctx.writes.wrote(keyOf(stored), stored.metadata?.resourceVersion);
  }
  if (event) await p.ctx.events.record(p.obj, event.type, event.reason, event.message);
}

/** A phase with Ready False; an Event when the reason is new. */
async function setPhase(p: Pass, phase: BranchPhase, why: { reason: string; message: string }, extra: Partial<BranchStatus> = {}): Promise<ReconcileResult> {
  const was = findCondition(p.old.conditions, 'Ready');
  const conditions = setCondition(p.old.conditions, { type: 'Ready', status: 'False', ...why }, p.generation, p.ctx.clock);
  const changed = was?.reason !== why.reason;
  const warn = phase === 'Failed' || phase === 'Lost' || why.reason === 'TemplateNotFound';
  await write(p, { ...p.old, ...extra, observedGeneration: p.generation, phase, conditions }, changed ? { type: warn ? 'Warning' : 'Normal', ...why } : undefined);
  return {};
}

function expiresAt(createdAt: string | undefined, ttlMs: number | null): number | null {
  if (createdAt === undefined || ttlMs === null) return null;
  return Date.parse(createdAt) + ttlMs;
}

/** Marks the Branch Expired and deletes it; the finalizer then drops the database. */
async function expire(p: Pass, reason: string, message: string): Promise<ReconcileResult> {
  let conditions = setCondition(p.old.conditions, { type: 'Expired', status: 'True', reason, message }, p.generation, p.ctx.clock);
  conditions = setCondition(conditions, { type: 'Ready', status: 'False', reason: 'Expired', message }, p.generation, p.ctx.clock);
  const already = p.old.phase === 'Expired';
  await write(p, { ...p.old, observedGeneration: p.generation, phase: 'Expired', conditions }, already ? undefined : { type: 'Normal', reason, message });
  try {
    await p.ctx.kube.custom.deleteNamespacedCustomObject({ ...pgxResource('branches'), namespace: p.obj.metadata!.namespace!, name: p.obj.metadata!.name! });
    p.ctx.metrics.branchesDeleted.inc();
    p.ctx.logger.info('branch expired; deleted', { branch: `${p.obj.metadata!.namespace}/${p.obj.metadata!.name}`, reason });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
  return {};
}

/** A Lost Branch does nothing more but still goes at its expiry. */
async function expiryOnly(p: Pass, ttlMs: number | null): Promise<ReconcileResult> {
  const at = expiresAt(p.old.createdAt, ttlMs);
  if (at === null) return {};
  const left = at - p.ctx.clock.now();
  if (left <= 0) return expire(p, 'TTLExpired', `the ttl ran out at ${isoSeconds(at)}`);
  return { requeueAfterMs: left };
}

// --- placement ---

/** Chooses a pod and writes it to status (phase Creating): null when placed, else what the reconcile returns. */
async function place(p: Pass, spec: BranchSpec): Promise<ReconcileResult | null> {
  const { ctx } = p;
  const namespace = p.obj.metadata!.namespace!;
  const tplName = spec.templateRef.name;
  const tpl = ctx.caches.templates.get(tplName, namespace);
  if (!tpl) return setPhase(p, 'Pending', { reason: 'TemplateNotFound', message: `Template ${tplName} does not exist in namespace ${namespace}: create it, or fix spec.templateRef` });
  if (tpl.metadata!.deletionTimestamp) return setPhase(p, 'Pending', { reason: 'TemplateDeleting', message: `Template ${tplName} is being deleted; no new Branch is made from it` });
  const runtimeName = runtimeRefOf(tpl);
  const rtObj = runtimeName ? ctx.caches.runtimes.get(runtimeName, namespace) : undefined;
  const rt = rtObj ? parseObject(runtimeSchema, rtObj) : null;
  if (!runtimeName || !rt || !rt.ok) return setPhase(p, 'Pending', { reason: 'RuntimeNotFound', message: `Runtime ${runtimeName ?? '(none)'} of Template ${tplName} does not exist or is invalid` });

  const tplStatus = (tpl.status ?? {}) as TemplateStatus;
  const sealedOn = new Set((tplStatus.pods ?? []).filter((e) => e.phase === 'Sealed' && e.observedGeneration === tpl.metadata!.generation).map((e) => e.pod));
  let pods = runtimePods(ctx, namespace, runtimeName).filter((pod) => podReady(pod) && sealedOn.has(pod.metadata!.name!));
  const wanted = spec.affinity?.pod;
  if (wanted !== undefined) pods = pods.filter((pod) => pod.metadata!.name === wanted);
  if (pods.length === 0) {
    const message =
      wanted !== undefined
        ? `pod ${wanted} (spec.affinity.pod) is not ready or does not hold Template ${tplName} sealed yet`
        : `no ready pod of Runtime ${runtimeName} holds Template ${tplName} sealed yet`;
    return setPhase(p, 'Pending', { reason: wanted !== undefined ? 'PodNotAvailable' : 'TemplateNotReady', message });
  }
  const statuses = await Promise.all(pods.map((pod) => podStatus(p, pod, runtimeName)));
  // From here to ledger.record nothing is awaited: concurrent placements see each other's choices.
  const cached = new Map<string, string | undefined>();
  for (const b of ctx.caches.branches.list(namespace)) {
    const on = (b.status as BranchStatus | undefined)?.pod;
    cached.set(keyOf(b), on === undefined ? undefined : `${namespace}/${on}`);
  }
  const candidates: Candidate[] = pods.map((pod, i) => ({ ...statuses[i]!, placed: ctx.placements.placedOn(`${namespace}/${pod.metadata!.name}`, cached) }));
  const chosen = choosePod(candidates);
  if (chosen === null) {
    const message = `no pod of Runtime ${runtimeName} that holds Template ${tplName} answers its control API (${pods.map((pod) => pod.metadata!.name).join(', ')}); retrying`;
    await setPhase(p, 'Pending', { reason: 'PodUnreachable', message });
    return { retry: message };
  }

  const prefix = rt.value.spec.engine.prefix;
  const tdb = templateDatabaseName(tplName);
  // <prefix><template>__<token> in at most 63 bytes; the token is the Branch's uid, so a name is never reused.
  const tokenLength = Math.min(12, 63 - prefix.length - tdb.length - 2);
  const database = `${prefix}${tdb}__${p.obj.metadata!.uid!.replace(/-/g, '').slice(0, tokenLength)}`;
  const message = `creating database ${database} on pod ${chosen}`;
  ctx.placements.record(keyOf(p.obj), `${namespace}/${chosen}`);
  p.placedHere = true;
  await write(p, {
    ...p.old,
    observedGeneration: p.generation,
    phase: 'Creating',
    pod: chosen,
    database,
    conditions: setCondition(p.old.conditions, { type: 'Ready', status: 'False', reason: 'Creating', message }, p.generation, ctx.clock),
  });
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

// --- a placed Branch: create, then keep it as the spec says ---

async function converge(p: Pass, spec: BranchSpec, ttlMs: number | null, limits: Limits): Promise<ReconcileResult> {
  const { ctx, old } = p;
  const namespace = p.obj.metadata!.namespace!;
  const podName = old.pod!;
  const database = old.database!;
  const pod = ctx.caches.pods.get(podName, namespace);
  if (!pod) {
    return setPhase(p, 'Lost', {
      reason: 'PodGone',
      message: `pod ${podName}, which held database ${database}, is gone; no new database is made in its place: delete this Branch and create another`,
    });
  }
  const at = expiresAt(old.createdAt, ttlMs);
  if (at !== null && at <= ctx.clock.now()) return expire(p, 'TTLExpired', `the ttl (${spec.ttl}) ran out at ${isoSeconds(at)}`);

  const tplName = spec.templateRef.name;
  const runtimeName = runtimeRefOf(ctx.caches.templates.get(tplName, namespace) ?? ({} as CustomObject)) ?? pod.metadata?.labels?.['pgx.dev/runtime'] ?? '';
  if (!podReady(pod)) return old.phase === 'Ready' ? requeueAtExpiry(ctx, at) : { retry: `pod ${podName} is not ready` };
  // The echo of this operator's own Ready write: the pass that wrote it had just seen the database and
  // the Secret, and nobody has changed the Branch since. The next event or resync looks at them again.
  if (p.echo && old.phase === 'Ready') return requeueAtExpiry(ctx, at);
  const api = await podApi(ctx, pod, runtimeName);
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
      if (old.phase === 'Ready') {
        if (!spec.pinned) return expire(p, 'DroppedWhenIdle', `the runtime dropped ${database} a grace period after its last session (pinned: false)`);
        return setPhase(p, 'Lost', { reason: 'DatabaseGone', message: `database ${database} no longer exists on pod ${podName}; no new database is made in its place: delete this Branch and create another` });
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

  // The spec may have changed since creation: pinned and the limits follow it; a limit taken out of the
  // spec goes back to the runtime's default (null), as it would have been had it never been set.
  if (db.pinned !== spec.pinned) db = spec.pinned ? await api.client.pin(database) : await api.client.unpin(database);
  if (db.connection_limit !== limits.connections) db = await api.client.setConnectionLimit(database, limits.connections);
  if (db.memory_limit_mb !== limits.memoryMb) db = await api.client.setMemoryLimit(database, limits.memoryMb);

  const secretName = old.secretName ?? branchSecretName(p.obj.metadata!.name!);
  let madeSecret = false;
  // A Branch being created has no Secret yet, unless an earlier pass made it and stopped before writing
  // Ready: then the create below finds it (409) and the credential just made is revoked again. Otherwise
  // the Secret is looked for first, and made again with a new credential if it was lost. The credential
  // the create call made serves; without one (a repeated create, a database made earlier) one is made.
  const creating = old.phase === 'Creating' && old.secretName === undefined;
  if (creating || !(await secretExists(ctx.kube, namespace, secretName))) {
    const credential = fresh ?? (await api.client.createCredential(database, {}));
    if (await createBranchSecret(ctx.kube, p.obj, secretName, podEngineEndpoint(pod, ctx.net), database, credential)) madeSecret = true;
    else await api.client.revokeCredential(database, credential.user);
  } else if (fresh !== null) {
    await api.client.revokeCredential(database, fresh.user);
  }

  const createdAt = old.createdAt ?? isoSeconds(Date.parse(db.created_at));
  const expiry = expiresAt(createdAt, ttlMs);
  const readyMessage = `database ${database} on pod ${podName}; connection details in Secret ${secretName}`;
  let conditions = setCondition(old.conditions, { type: 'Ready', status: 'True', reason: 'DatabaseReady', message: readyMessage }, p.generation, ctx.clock);
  const expired: ConditionInput =
    expiry === null
      ? { type: 'Expired', status: 'False', reason: 'NoTTL', message: 'no ttl: the Branch stays until deleted' }
      : { type: 'Expired', status: 'False', reason: 'NotExpired', message: `deleted at ${isoSeconds(expiry)} (ttl ${spec.ttl})` };
  conditions = setCondition(conditions, expired, p.generation, ctx.clock);
  const next: BranchStatus = {
    observedGeneration: p.generation,
    phase: 'Ready',
    pod: podName,
    database,
    secretName,
    createdAt,
    ...(expiry !== null ? { expiresAt: isoSeconds(expiry) } : {}),
    conditions,
  };
  const becameReady = old.phase !== 'Ready';
  await write(p, next, becameReady || madeSecret ? { type: 'Normal', reason: becameReady ? 'Ready' : 'SecretRecreated', message: readyMessage } : undefined);
  return requeueAtExpiry(ctx, expiry);
}

function requeueAtExpiry(ctx: OperatorContext, at: number | null): ReconcileResult {
  return at === null ? {} : { requeueAfterMs: Math.max(0, at - ctx.clock.now()) };
}

type CreateOutcome = { made: CreatedDatabaseBody | null } | { stop: ReconcileResult };

/**
 * Creates the database with its credential in one call: `made` is the answer (its credential null in
 * the answer to a repeat), or null when the database existed already; `stop` is what to return from
 * the reconcile instead.
 */
async function create(
  p: Pass,
  client: ApiClient,
  spec: BranchSpec,
  limits: Limits,
  template: string,
  database: string,
): Promise<CreateOutcome> {
  const body: CreateDatabaseRequest = {
    template,
    name: database,
    pinned: spec.pinned,
    ...(limits.connections !== null ? { connection_limit: limits.connections } : {}),
    ...(limits.memoryMb !== null ? { memory_limit_mb: limits.memoryMb } : {}),
    credential: {},
    // Safe to retry: the same request id and body answer the first result. (-c: the body asks for the
    // credential; the id without it, of operators before the one-call create, named a body without.)
    request_id: `branch-${p.obj.metadata!.uid}-${database}-c`,
  };
  try {
    let made: CreatedDatabaseBody;
    try {
      made = await client.createDatabase(body);
    } catch (err) {
      // A runtime older than the one-call create refuses the field: the database alone, as before.
      if (!(err instanceof ApiClientError && err.status === 400 && /\bcredential\b/.test(err.message))) throw err;
      const { credential: _, ...alone } = body;
      made = await client.createDatabase({ ...alone, request_id: `branch-${p.obj.metadata!.uid}-${database}` });
    }
    p.ctx.logger.info('database created', { branch: `${p.obj.metadata!.namespace}/${p.obj.metadata!.name}`, database, source: made.source, mint_ms: made.mint_ms });
    return { made };
  } catch (err) {
    if (!(err instanceof ApiClientError)) throw err;
    if (err.status === 409 && err.code === 'DUPLICATE_DATABASE') return { made: null };
    // Placed by this pass on a pod whose API refused the connection (its runtime went down after the
    // status placement read): no create for this Branch ever reached it, so it may go elsewhere.
    const refused = p.placedHere === true && connectionRefused(err);
    if (refused) p.ctx.pods.forgetStatus(p.obj.metadata!.namespace!, p.old.pod!);
    if (err.status === 404 || err.status === 429 || refused) {
      // Not on this pod after all (template gone, the pod is full or down): forget the placement and choose again.
      const reason = refused ? 'PodUnreachable' : err.status === 404 ? 'TemplateNotOnPod' : 'PodFull';
      const message = `pod ${p.old.pod} refused database ${database}: ${err.message}; choosing another pod`;
      const { pod: _pod, database: _db, ...rest } = p.old;
      p.old = rest;
      p.ctx.placements.forget(keyOf(p.obj));
      await setPhase(p, 'Pending', { reason, message });
      return { stop: { retry: message } };
    }
    if (err.status >= 400 && err.status < 500) return { stop: await setPhase(p, 'Failed', { reason: 'CreateRefused', message: `pod ${p.old.pod} refused database ${database}: ${err.message}` }) };
    return { stop: { retry: `pod ${p.old.pod}: ${err.message}` } };
  }
}

/** The call never reached the pod: its TCP connection was refused (nothing was sent). */
function connectionRefused(err: ApiClientError): boolean {
  const cause = (err.cause as { cause?: { code?: string } } | undefined)?.cause;
  return err.status === 0 && cause?.code === 'ECONNREFUSED';
}

// --- deletion ---

async function finalize(p: Pass): Promise<ReconcileResult> {
  const { ctx, obj, old } = p;
  if (!hasFinalizer(obj, BRANCH_FINALIZER)) return {};
  const namespace = obj.metadata!.namespace!;
  const label = `${namespace}/${obj.metadata!.name}`;
  if (old.database && old.pod) {
    const pod = ctx.caches.pods.get(old.pod, namespace);
    const tpl = ctx.caches.templates.get((obj.spec as { templateRef?: { name?: string } } | undefined)?.templateRef?.name ?? '', namespace);
    const runtimeName = (pod?.metadata?.labels?.['pgx.dev/runtime']) ?? (tpl ? runtimeRefOf(tpl) : undefined);
    if (!pod) {
      // The drop cannot be confirmed while the pod is gone. If its Runtime still exists the pod comes
      // back (a StatefulSet keeps names and volumes) and the database with it: wait, saying so.
      if (runtimeName && ctx.caches.runtimes.get(runtimeName, namespace)) {
        const message = `waiting for pod ${old.pod} to come back to drop database ${old.database}; to let go without dropping it, remove the finalizer ${BRANCH_FINALIZER}`;
        await write(p, { ...old, phase: 'Deleting', conditions: setCondition(old.conditions, { type: 'Ready', status: 'False', reason: 'DropPending', message }, p.generation, ctx.clock) });
        return { requeueAfterMs: DROP_PENDING_RETRY_MS };
      }
      ctx.logger.warn('branch released without a drop: its runtime is gone', { branch: label, database: old.database });
    } else {
      const api = await podApi(ctx, pod, runtimeName ?? '');
      if (!api.ok) return { retry: api.message };
      try {
        await api.client.dropDatabase(old.database); // 204 also when it is already gone
      } catch (err) {
        return { retry: `cannot drop ${old.database} on pod ${old.pod}: ${kubeMessage(err)}` };
      }
      // The pod's kept status still counts the database: the next placement asks the pod again.
      ctx.pods.forgetStatus(namespace, old.pod);
      ctx.logger.info('database dropped', { branch: label, pod: old.pod, database: old.database });
      await ctx.events.record(obj, 'Normal', 'DatabaseDropped', `dropped database ${old.database} on pod ${old.pod}`);
    }
  }
  await removeFinalizer(ctx.kube, 'branches', obj, BRANCH_FINALIZER);
  return {};
}
