// The operator process: informer caches for Runtimes, Templates, Branches and runtime Pods (run on every
// replica, so a new leader starts warm), the Template and Branch controllers behind their work queues,
// a periodic resync, and leader election: the queues' workers run only while this replica holds the
// Lease, so two replicas never act at once.

import os from 'node:os';
import crypto from 'node:crypto';
import type { KubeConfig, KubernetesListObject, KubernetesObject, V1Pod, V1PodDisruptionBudget } from '@kubernetes/client-node';
import { systemClock, type Clock } from '../clock.js';
import { silentLogger, type Logger } from '../log.js';
import { shareConnections } from './connections.js';
import { Controller } from './controller.js';
import { reconcileBranch } from './controllers/branch.js';
import { reconcileRuntime } from './controllers/runtime.js';
import { reconcileTemplate } from './controllers/template.js';
import { branchesOfTemplate, runtimeRefOf, templateNamespaceOf, templateRefOf, type Caches, type OperatorContext } from './context.js';
import { GROUP, VERSION } from './crds/index.js';
import { EventRecorder } from './events.js';
import { NamespacesCache, ResourceCache, type ObjectCache } from './informer.js';
import { keyOf, makeKube, pgxResource, type CustomObject, type Kube } from './kube.js';
import { LeaderElector } from './leader.js';
import { OperatorMetrics } from './metrics.js';
import { OwnWrites } from './own-writes.js';
import { PodCache } from './pod-cache.js';
import { PlacementLedger } from './placement.js';
import { TemplateBuilds } from './template-builds.js';
import { DEFAULT_POD_NETWORK, RUNTIME_LABEL, type PodNetwork } from './pods.js';
import type { QueueOptions } from './queue.js';

export interface OperatorOptions {
  kc: KubeConfig;
  /** Watch one namespace, a list of them, or every namespace when null. */
  namespace: string | readonly string[] | null;
  /** Where the leader-election Lease lives. */
  leaseNamespace: string;
  leaseName: string;
  /** This replica's name in the Lease; the pod name in a cluster. */
  identity?: string;
  clock?: Clock;
  logger?: Logger;
  network?: Partial<PodNetwork>;
  /** Every cached object is reconciled again this often (a watch can stall silently). */
  resyncMs?: number;
  lease?: { durationMs: number; renewDeadlineMs: number; retryPeriodMs: number };
  queue?: Partial<QueueOptions>;
  metrics?: OperatorMetrics;
}

/**
 * Reconciles at once per controller. Reconciles mostly wait on HTTP (runtime pods, the API server), and
 * the runtimes queue their own mints (2 at a time each): with 4 workers a burst of Branches kept them
 * all waiting on slow mints and drops while the cheap steps of every other key (a finalizer, a
 * placement, an expiry) queued behind them. A new Branch goes from finalizer to Ready in one pass, so a
 * worker is held for its whole creation: 32 keep 16 creates in flight per pod of a two-pod Runtime.
 */
export const DEFAULT_WORKERS = 32;

/** How long a Template waits after a Branch of it is added or deleted before counting its Branches again. */
const BRANCH_COUNT_DELAY_MS = 1_000;

export class Operator {
  readonly metrics: OperatorMetrics;
  readonly identity: string;
  private readonly kube: Kube;
  private readonly caches: Caches;
  private readonly runtimes: Controller;
  private readonly templates: Controller;
  private readonly branches: Controller;
  private readonly elector: LeaderElector;
  private readonly logger: Logger;
  private readonly resyncMs: number;
  private resyncTimer: NodeJS.Timeout | null = null;
  private synced = false;

  constructor(private readonly opts: OperatorOptions) {
    const clock = opts.clock ?? systemClock;
    this.identity = opts.identity ?? `${os.hostname()}-${crypto.randomBytes(3).toString('hex')}`;
    this.logger = (opts.logger ?? silentLogger).child({ component: 'operator', identity: this.identity });
    this.metrics = opts.metrics ?? new OperatorMetrics();
    shareConnections(opts.kc, clock);
    this.kube = makeKube(opts.kc);
    this.resyncMs = opts.resyncMs ?? 300_000;
    const queue: QueueOptions = { workers: DEFAULT_WORKERS, baseDelayMs: 500, maxDelayMs: 60_000, ...opts.queue };

    this.caches = {
      runtimes: this.customCache('runtimes', () => this.enqueueForRuntime),
      templates: this.customCache('templates', () => this.enqueueForTemplate),
      branches: this.customCache('branches', () => this.enqueueForBranch),
      pods: this.podCache(),
      disruptionBudgets: this.disruptionBudgetCache(),
    };
    const ctx: OperatorContext = {
      kube: this.kube,
      caches: this.caches,
      clock,
      logger: this.logger,
      events: new EventRecorder(this.kube, clock, this.logger, this.identity),
      net: { ...DEFAULT_POD_NETWORK, ...opts.network },
      metrics: this.metrics,
      pods: new PodCache(this.kube, clock),
      placements: new PlacementLedger(),
      writes: new OwnWrites(clock),
      builds: new TemplateBuilds(),
    };
    this.runtimes = new Controller('runtime', (key) => reconcileRuntime(ctx, key), queue, this.logger, this.metrics, clock);
    this.templates = new Controller('template', (key) => reconcileTemplate(ctx, key), queue, this.logger, this.metrics, clock);
    this.branches = new Controller('branch', (key) => reconcileBranch(ctx, key), queue, this.logger, this.metrics, clock);
    const lease = opts.lease ?? { durationMs: 15_000, renewDeadlineMs: 10_000, retryPeriodMs: 2_000 };
    this.elector = new LeaderElector(
      this.kube,
      { namespace: opts.leaseNamespace, name: opts.leaseName, identity: this.identity, leaseDurationMs: lease.durationMs, renewDeadlineMs: lease.renewDeadlineMs, retryPeriodMs: lease.retryPeriodMs },
      clock,
      this.logger,
      (leading) => this.onLeadership(leading),
    );
  }

  get isLeader(): boolean {
    return this.elector.isLeader;
  }

  /** Caches filled (the /readyz of the operator). */
  get ready(): boolean {
    return this.synced;
  }

  async start(): Promise<void> {
    const all = Object.values(this.caches) as ObjectCache<KubernetesObject>[];
    await Promise.all(all.map((c) => c.start()));
    await Promise.all(all.map((c) => c.synced));
    this.synced = true;
    this.resyncTimer = setInterval(() => this.resync(), this.resyncMs);
    this.resyncTimer.unref();
    this.elector.start();
    this.logger.info('operator started', { namespace: this.opts.namespace === null ? '(all)' : [this.opts.namespace].flat().join(','), lease: `${this.opts.leaseNamespace}/${this.opts.leaseName}` });
  }

  async stop(): Promise<void> {
    if (this.resyncTimer) clearInterval(this.resyncTimer);
    for (const c of this.controllers()) c.queue.stop();
    await Promise.all(this.controllers().map((c) => c.queue.idle()));
    await this.elector.stop();
    await Promise.all((Object.values(this.caches) as ObjectCache<KubernetesObject>[]).map((c) => c.stop()));
  }

  /** Resolves when no reconcile is queued or running (tests). */
  async idle(): Promise<void> {
    await Promise.all(this.controllers().map((c) => c.queue.idle()));
  }

  private controllers(): Controller[] {
    return [this.runtimes, this.templates, this.branches];
  }

  private onLeadership(leading: boolean): void {
    this.metrics.leader.set(leading ? 1 : 0);
    for (const c of this.controllers()) c.queue.setActive(leading);
    // A new leader looks at everything: the old one may have stopped mid-way.
    if (leading) this.resync();
  }

  private resync(): void {
    for (const r of this.caches.runtimes.list()) this.runtimes.queue.add(keyOf(r));
    for (const t of this.caches.templates.list()) this.templates.queue.add(keyOf(t));
    for (const b of this.caches.branches.list()) this.branches.queue.add(keyOf(b));
  }

  /** The generation last seen per Runtime: its status changes (capacity) are not spec changes. */
  private readonly runtimeGenerations = new Map<string, number | undefined>();

  private readonly enqueueForRuntime = (rt: CustomObject, kind: 'add' | 'update' | 'delete'): void => {
    const key = keyOf(rt);
    // A Runtime's status moves with its pods' memory: react to spec changes only, or each status write
    // would trigger the next reconcile (and every Template's) in a loop. Pod events and resync refresh it.
    if (kind === 'update' && this.runtimeGenerations.get(key) === rt.metadata?.generation) return;
    if (kind === 'delete') this.runtimeGenerations.delete(key);
    else this.runtimeGenerations.set(key, rt.metadata?.generation);
    this.runtimes.queue.add(key);
    const ns = rt.metadata!.namespace!;
    const templates = new Set<string>();
    for (const t of this.caches.templates.list(ns)) {
      if (runtimeRefOf(t) !== rt.metadata!.name) continue;
      this.templates.queue.add(keyOf(t));
      templates.add(t.metadata!.name!);
    }
    // Its Branches too: whether it admits their namespaces (spec.allowedNamespaces) is read on every pass,
    // and a change should place the Branches it now admits, and cut off those it no longer does, now.
    for (const b of this.caches.branches.list()) if (templateNamespaceOf(b) === ns && templates.has(templateRefOf(b) ?? '')) this.branches.queue.add(keyOf(b));
  };

  /** What Branches read of their Template, per Template key: a change of anything else does not concern them. */
  private readonly templateFacts = new Map<string, string>();

  private readonly enqueueForTemplate = (t: CustomObject, kind: 'add' | 'update' | 'delete'): void => {
    const key = keyOf(t);
    this.templates.queue.add(key);
    // The Template's status counts its Branches, so each Branch added or deleted rewrites it: requeueing
    // every Branch of the Template for that would make a burst of N Branches cost N^2 reconciles.
    const facts = branchFacts(t);
    const changed = kind !== 'update' || this.templateFacts.get(key) !== facts;
    if (kind === 'delete') this.templateFacts.delete(key);
    else this.templateFacts.set(key, facts);
    if (!changed) return;
    for (const b of branchesOfTemplate({ caches: this.caches }, t.metadata!.namespace!, t.metadata!.name!)) this.branches.queue.add(keyOf(b));
  };

  private readonly enqueueForBranch = (b: CustomObject, kind: 'add' | 'update' | 'delete'): void => {
    this.branches.queue.add(keyOf(b));
    const ns = templateNamespaceOf(b);
    const tplName = templateRefOf(b);
    const tpl = tplName ? this.caches.templates.get(tplName, ns) : undefined;
    // The Template counts its Branches and, while deleting, waits for them. Not at once: a burst of N
    // Branches added (or expiring) would run N Template passes, each asking every pod for its templates
    // while the pods are busy minting; one pass a little later counts them all.
    if (tpl && (kind !== 'update' || tpl.metadata?.deletionTimestamp)) this.templates.queue.addAfter(keyOf(tpl), BRANCH_COUNT_DELAY_MS);
    // A Runtime keeps a pod past its replicas, or waits to be deleted, while Branches are on its pods.
    const runtime = tpl ? runtimeRefOf(tpl) : undefined;
    if (runtime && kind === 'delete') this.runtimes.queue.addAfter(`${ns}/${runtime}`, BRANCH_COUNT_DELAY_MS);
  };

  private readonly enqueueForPod = (pod: V1Pod): void => {
    const ns = pod.metadata!.namespace!;
    const runtime = pod.metadata?.labels?.[RUNTIME_LABEL];
    if (runtime) this.runtimes.queue.add(`${ns}/${runtime}`);
    for (const t of this.caches.templates.list(ns)) if (runtimeRefOf(t) === runtime) this.templates.queue.add(keyOf(t));
    for (const b of this.caches.branches.list()) {
      if (templateNamespaceOf(b) !== ns) continue;
      const s = b.status as { pod?: string } | undefined;
      if (s?.pod === undefined || s.pod === pod.metadata!.name) this.branches.queue.add(keyOf(b));
    }
  };

  /**
   * A cache of one resource over what the operator watches: every namespace (null), one, or a list (one
   * list and watch per namespace). `make` gives the watch path and the list call for a namespace or all.
   */
  private watch<T extends KubernetesObject>(
    make: (ns: string | null) => { path: string; list: () => Promise<KubernetesListObject<T>> },
    onChange: (o: T, kind: 'add' | 'update' | 'delete') => void,
    labelSelector?: string,
  ): ObjectCache<T> {
    const one = (ns: string | null): ResourceCache<T> => new ResourceCache<T>({ kc: this.opts.kc, ...make(ns), onChange, logger: this.logger, ...(labelSelector !== undefined ? { labelSelector } : {}) });
    const ns = this.opts.namespace;
    if (ns === null || typeof ns === 'string') return one(ns);
    return new NamespacesCache<T>(new Map(ns.map((n) => [n, one(n)])));
  }

  private customCache(plural: 'runtimes' | 'templates' | 'branches', handler: () => (o: CustomObject, kind: 'add' | 'update' | 'delete') => void): ObjectCache<CustomObject> {
    return this.watch<CustomObject>(
      (ns) => ({
        path: ns === null ? `/apis/${GROUP}/${VERSION}/${plural}` : `/apis/${GROUP}/${VERSION}/namespaces/${ns}/${plural}`,
        list: async () =>
          (ns === null
            ? await this.kube.custom.listClusterCustomObject({ ...pgxResource(plural) })
            : await this.kube.custom.listNamespacedCustomObject({ ...pgxResource(plural), namespace: ns })) as KubernetesListObject<CustomObject>,
      }),
      (o, kind) => handler()(o, kind),
    );
  }

  /** PodDisruptionBudgets labelled pgx.dev/runtime: a change of one (someone edited it) requeues its Runtime, which puts it back. */
  private disruptionBudgetCache(): ObjectCache<V1PodDisruptionBudget & KubernetesObject> {
    return this.watch<V1PodDisruptionBudget & KubernetesObject>(
      (ns) => ({
        path: ns === null ? '/apis/policy/v1/poddisruptionbudgets' : `/apis/policy/v1/namespaces/${ns}/poddisruptionbudgets`,
        list: async () =>
          (ns === null
            ? await this.kube.policy.listPodDisruptionBudgetForAllNamespaces({ labelSelector: RUNTIME_LABEL })
            : await this.kube.policy.listNamespacedPodDisruptionBudget({ namespace: ns, labelSelector: RUNTIME_LABEL })) as KubernetesListObject<V1PodDisruptionBudget & KubernetesObject>,
      }),
      (pdb, kind) => {
        const runtime = pdb.metadata?.labels?.[RUNTIME_LABEL];
        if (runtime && kind !== 'add') this.runtimes.queue.add(`${pdb.metadata!.namespace}/${runtime}`);
      },
      RUNTIME_LABEL,
    );
  }

  /** Only runtime pods: the label selector goes on the list and (by makeInformer) on the watch. */
  private podCache(): ObjectCache<V1Pod & KubernetesObject> {
    return this.watch<V1Pod & KubernetesObject>(
      (ns) => ({
        path: ns === null ? '/api/v1/pods' : `/api/v1/namespaces/${ns}/pods`,
        list: async () =>
          (ns === null
            ? await this.kube.core.listPodForAllNamespaces({ labelSelector: RUNTIME_LABEL })
            : await this.kube.core.listNamespacedPod({ namespace: ns, labelSelector: RUNTIME_LABEL })) as KubernetesListObject<V1Pod & KubernetesObject>,
      }),
      (p) => this.enqueueForPod(p),
      RUNTIME_LABEL,
    );
  }
}

/** The parts of a Template that Branch placement depends on: its generation, whether it is being
 * deleted, and on which pods it is sealed at which generation. */
function branchFacts(t: CustomObject): string {
  const pods = ((t.status as { pods?: { pod?: string; phase?: string; observedGeneration?: number }[] } | undefined)?.pods ?? []).map((p) => [p.pod, p.phase, p.observedGeneration]);
  return JSON.stringify([t.metadata?.generation, t.metadata?.deletionTimestamp ?? null, pods]);
}
