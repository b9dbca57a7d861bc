// A Branch's status is not trusted. Whoever may write the branches/status subresource (a namespace
// admin role with resources ["*"] includes it) could point status.database at another namespace's
// Branch database, then delete their own Branch (its finalizer would drop the other's database) or be
// given a credential Secret for it. So the operator acts on status.pod and status.database only when
// they are what it would have written for this Branch: the database name is derived from the Branch's
// uid (set by the API server, immutable) and its Template (templateRef is immutable), and the pod must
// be a pod of the Template's Runtime. Cache reads and a parse: no request.

import type { OperatorContext } from '../context.js';
import { runtimeRefOf, templateNamespaceOf, templateRefOf } from '../context.js';
import { parseObject, runtime as runtimeSchema, templateDatabaseName, type ParseResult, type Runtime } from '../crds/index.js';
import type { CustomObject } from '../kube.js';
import { RUNTIME_LABEL } from '../pods.js';

/** The database of the Branch with uid `uid`: <prefix><template>__<token>, at most 63 bytes, the token from the uid. */
export function branchDatabaseName(prefix: string, template: string, uid: string): string {
  const tdb = templateDatabaseName(template);
  // The token is the Branch's uid, so a name is never reused, nor chosen by anyone but the API server.
  const tokenLength = Math.min(12, 63 - prefix.length - tdb.length - 2);
  return `${prefix}${tdb}__${uid.replace(/-/g, '').slice(0, tokenLength)}`;
}

/**
 * What a Branch's status.pod and status.database are: `trusted` (this operator would have written
 * them; `runtime` is the Runtime of the pod, `rt` its spec as read), `tampered` (written by someone else: act on neither),
 * `gone` (the Runtime is gone, or nothing says which it was: there is nothing to act on), or
 * `unknown` (the Runtime is there but its spec cannot be read: look again later).
 */
export type PlacementCheck =
  | { kind: 'trusted'; runtime: string; rt: Runtime }
  | { kind: 'tampered'; message: string }
  | { kind: 'gone'; message: string }
  | { kind: 'unknown'; message: string };

export function checkPlacement(ctx: Pick<OperatorContext, 'caches'>, branch: CustomObject, placed: { pod: string; database: string }): PlacementCheck {
  const namespace = templateNamespaceOf(branch);
  const tplName = templateRefOf(branch) ?? '';
  const tpl = ctx.caches.templates.get(tplName, namespace);
  const pod = ctx.caches.pods.get(placed.pod, namespace);
  // The Template's Runtime; a Template removed under its Branches (its finalizer forced off) leaves the
  // pod's own label, which only whoever may patch pods in the Runtime's namespace can change.
  const runtime = (tpl ? runtimeRefOf(tpl) : undefined) ?? pod?.metadata?.labels?.[RUNTIME_LABEL];
  if (runtime === undefined) return { kind: 'gone', message: `neither Template ${tplName} nor pod ${placed.pod} is there to say which Runtime holds database ${placed.database}` };
  const fix = 'the operator neither drops nor makes credentials for it; put back the status the operator wrote, or delete the Branch (which then drops nothing)';
  // Its StatefulSet names the pods <runtime>-<ordinal>, and labels them (a pod that is away has no label to read).
  const ordinal = placed.pod.startsWith(`${runtime}-`) ? placed.pod.slice(runtime.length + 1) : '';
  if (!/^\d+$/.test(ordinal) || (pod !== undefined && pod.metadata?.labels?.[RUNTIME_LABEL] !== runtime)) {
    return { kind: 'tampered', message: `status.pod ${placed.pod} is not a pod of the Branch's Runtime ${runtime} (${runtime}-N, labelled ${RUNTIME_LABEL}=${runtime}): ${fix}` };
  }
  const rtObj = ctx.caches.runtimes.get(runtime, namespace);
  if (!rtObj) return { kind: 'gone', message: `Runtime ${runtime}, which held database ${placed.database} on pod ${placed.pod}, is gone` };
  const rt = parsedRuntime(rtObj);
  if (!rt.ok) return { kind: 'unknown', message: `Runtime ${runtime}: ${rt.message}` };
  const expected = branchDatabaseName(rt.value.spec.engine.prefix, tplName, branch.metadata!.uid!);
  if (placed.database !== expected && !madeUnderAnotherPrefix(placed.database, tplName, branch.metadata!.uid!)) {
    return { kind: 'tampered', message: `status.database is ${placed.database}, but this Branch's database is ${expected} (from its Template, its uid and the Runtime's engine.prefix): ${fix}` };
  }
  return { kind: 'trusted', runtime, rt: rt.value };
}

/**
 * A Runtime's engine.prefix may change after a Branch was placed: its database keeps the name it was
 * made under. The token from the Branch's uid is what makes the name this Branch's, whatever prefix
 * stands before it.
 */
function madeUnderAnotherPrefix(database: string, template: string, uid: string): boolean {
  for (let length = 1; length <= 12; length++) {
    const prefix = database.slice(0, length);
    if (/^[a-z][a-z0-9_]*$/.test(prefix) && database === branchDatabaseName(prefix, template, uid)) return true;
  }
  return false;
}

/**
 * The pod on which `branch` holds a database, as its status says, unless that status is not what this
 * operator wrote (checkPlacement): a forged status.pod must not hold a Runtime's deletion or
 * scale-down, nor a Template's deletion, that are not its own.
 */
export function podHoldingDatabase(ctx: Pick<OperatorContext, 'caches'>, branch: CustomObject): string | undefined {
  const s = (branch.status ?? {}) as { pod?: string; database?: string };
  if (s.pod === undefined || s.database === undefined) return undefined;
  return checkPlacement(ctx, branch, { pod: s.pod, database: s.database }).kind === 'tampered' ? undefined : s.pod;
}

/**
 * A Runtime's spec, parsed once per version of it: the cache holds each version as its own object, and
 * a finalizer's pass checks every Branch of the Runtime against the same one.
 */
const parsedRuntimes = new WeakMap<CustomObject, ParseResult<Runtime>>();
function parsedRuntime(obj: CustomObject): ParseResult<Runtime> {
  let parsed = parsedRuntimes.get(obj);
  if (parsed === undefined) parsedRuntimes.set(obj, (parsed = parseObject(runtimeSchema, obj)));
  return parsed;
}
