// The operator benchmark on a real control plane (etcd, kube-apiserver, kube-controller-manager from
// test/control-plane, as `npm run test:kube` runs them; it replaced the API double on 2026-12-01): the
// operator runs here with its production settings (work queues, resync, lease) as the chart's
// ServiceAccount under the chart's Role, makes the Runtime's StatefulSet, the StatefulSet controller
// makes its Pods, and the test node (test/helpers/control-plane/kubelet.ts) runs each as a `pgx start`
// process on its own loopback address, which the operator reaches at its Pod IP. This process also
// plays kubectl and watches what happens.
//
// First one Branch at a time (apply, Ready, delete, gone; then the next), then bursts applied at once.
// Measured per Branch, from a watch on Branches and by polling the runtimes:
//   apply -> Ready       from the create call's return (the object is stored, as `kubectl apply`
//                        returns) to the watch event carrying condition Ready=True
//   expiry -> dropped    from status.expiresAt (createdAt + ttl) to the database's absence from its
//                        runtime's /v1/databases (polled every 50 ms from just before the first expiry)
//   expiry -> gone       to the Branch's DELETED event (the finalizer goes only after the drop)
// For profiling: the phase times on the way to Ready (finalizer added, Creating, Ready), the reconciles
// the operator ran and their mean time, the API requests by verb and the API server's own time for them
// (its audit log),
// the runtimes' mint counters, and the CPU each process used during the burst.

import { CustomObjectsApi, Watch } from '@kubernetes/client-node';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { ApiClient } from '../src/api/client.js';
import { systemClock } from '../src/clock.js';
import { PgxError } from '../src/errors.js';
import { silentLogger } from '../src/log.js';
import type { CustomObject } from '../src/operator/kube.js';
import { DEFAULT_WORKERS, Operator } from '../src/operator/operator.js';
import { startControlPlane, type AuditRecord } from '../test/helpers/control-plane/index.js';
import { startNode, type Node } from '../test/helpers/control-plane/kubelet.js';
import { PGX, runtimeApiToken, startCluster } from '../test/kube/harness.js';
import { installCrds } from '../test/kube/hooks.js';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { ownCpuMs, processCpuMs, treeCpuMs } from './lib/cpu.js';
import { median, percentile } from './lib/stats.js';
import { formatTable, markdownTable } from './lib/table.js';

const HELP = `Usage: npm run bench -- operator [options]

One Branch at a time, then a burst of Branches applied at once: apply -> Ready, and TTL expiry ->
database dropped, on a real control plane (test/control-plane/build.sh builds it) and runtime pods.

Options:
  --sequential N Branches applied one at a time, each Ready and gone before the next  [50]
  --branches N   Branches applied at once per round                               [200]
  --pods N       runtime pods (each a pgx start process)                           [2]
  --rounds N     bursts, one after the other (each waits for the last to be gone)  [3]
  --ttl S        the Branches' ttl in seconds (all should be Ready before it runs out) [180]
  --workers N    reconciles at once per controller                  [the operator's default, 32]
  --pool-size N|auto  the Runtime's spec.engine.poolSize: warm spares per template and pod (pgx
                 start --pool-size; auto is the Runtime's default)
                                     [sized for the burst: its Branches per pod + 10, here 110]
  --quick        smoke run: 5 one at a time, 20 at once, 1 round, ttl 30 s; results to a temp file, docs untouched
  --report FILE  redraw the table and docs section from a results JSON
  -h, --help     this help
`;

const RUNTIME = 'bench';
const NS = 'bench';
const TEMPLATE = 'app';
const SCHEMA = "CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items SELECT g, 'item ' || g FROM generate_series(1, 100) g;";
const READY_TIMEOUT_MS = 300_000;
const POLL_MS = 50;
const POOL_TIMEOUT_MS = 600_000;

interface Options {
  /** Branches applied one at a time before the bursts; 0 in results of runs before it was measured. */
  sequential: number;
  branches: number;
  pods: number;
  rounds: number;
  ttlSeconds: number;
  workers: number | null;
  /** The Runtime's spec.engine.poolSize; null in results of runs before it was set (the runtime's default, 2). */
  poolSize: number | 'auto' | null;
}

interface Sample {
  round: number;
  branch: string;
  pod: string;
  /** Milliseconds from the round's start (the first create sent). */
  createMs: number;
  appliedMs: number;
  finalizerMs: number | null;
  creatingMs: number | null;
  readyMs: number | null;
  /** Wall-clock ms: when it was seen Ready, when it expires (status.expiresAt), and what was seen after. */
  readyAt: number | null;
  expiresAt: number | null;
  expiredSeenAt: number | null;
  droppedAt: number | null;
  goneAt: number | null;
}

interface RoundProfile {
  round: number;
  readyWindowMs: number;
  /** CPU milliseconds each process used from the first create to the last Ready. */
  /** kubeApi: the API server and etcd (before 2026-12-01 the API double's process). */
  cpu: { operator: number; kubeApi: number; runtimes: number };
  /** The runtimes' control API during the burst, probed by this process: GET /v1/status and a GET of a database (404). */
  runtimeApi: { statusP50Ms: number; getP50Ms: number; probes: number };
  reconciles: Record<string, { count: number; seconds: number }>;
  requests: { verb: string; resource: string; count: number; p50Ms: number; p99Ms: number }[];
  mints: { warm: number; cold: number }[];
}

interface Body {
  options: Options;
  operatorQueue: { workers: number };
  /** The same burst straight to the runtimes' API (create + credential), no operator: ms from its start. */
  runtimeFloor: { workers: number; doneMs: number[]; dropMs: number[] };
  /** apply -> Ready of each Branch applied alone (absent in results before the control plane). */
  sequentialMs?: number[];
  /** What the API server was: "kube-apiserver v1.36.3" (absent: the API double). */
  apiServer?: string;
  samples: Sample[];
  profiles: RoundProfile[];
}

interface Tracked {
  sample: Sample;
  database?: string;
}

async function measure(opts: Options, { cleanup }: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  progress('starting the control plane (etcd, kube-apiserver, kube-controller-manager) and the test node');
  const cp = await startControlPlane();
  cleanup.add('control plane', () => cp.stop());
  const node: Node = await startNode(cp.kubeConfig(), path.join(cp.dir, 'node'));
  cleanup.add('test node', () => node.stop());
  installCrds(cp);
  const cluster = await startCluster(NS, cp);
  const kc = cluster.kc;
  const custom = kc.makeApiClient(CustomObjectsApi);
  const kubeApi = { requests: async () => cluster.requests(), cpuMs: () => processCpuMs(cp.pids.apiserver) + processCpuMs(cp.pids.etcd) };

  progress('starting the operator (production queue, resync and lease settings) as the chart\'s ServiceAccount');
  const op = new Operator({ kc: cluster.operatorKc, namespace: NS, leaseNamespace: NS, leaseName: 'pgx-operator', logger: silentLogger, ...(opts.workers !== null ? { queue: { workers: opts.workers } } : {}) });
  await op.start();
  cleanup.add('operator', () => op.stop());
  await until('the operator to lead', 30_000, async () => op.isLeader);

  // The Runtime as a user expecting the burst writes it: warm spares for the Branches each pod takes.
  progress(`applying a Runtime of ${opts.pods} pods (engine.poolSize ${opts.poolSize}); the StatefulSet controller makes them, the test node runs them`);
  const runtimeBody = { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: RUNTIME, namespace: NS }, spec: { replicas: opts.pods, image: 'ghcr.io/pgx/pgx:bench', storage: { size: '1Gi' }, engine: { poolSize: opts.poolSize } } };
  await custom.createNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', body: runtimeBody, fieldValidation: 'Strict' });
  await until('the Runtime\'s pods to be Ready', 600_000, async () => readyReason((await custom.getNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', name: RUNTIME })) as CustomObject) === 'AllPodsReady', 250);
  const token = await runtimeApiToken(cluster, RUNTIME);
  const podNames = Array.from({ length: opts.pods }, (_, i) => `${RUNTIME}-${i}`);
  const apis = podNames.map((p) => new ApiClient({ url: `http://${node.podIp(NS, p)}:7432`, token, timeoutMs: 120_000 }));
  const runtimes = podNames.map((p) => ({ pid: node.pid(NS, p)! }));

  await custom.createNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'templates', body: { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: TEMPLATE }, spec: { runtimeRef: { name: RUNTIME }, source: { sql: SCHEMA } } } });
  await until('the Template to be sealed on every pod', 120_000, async () => {
    const t = (await custom.getNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'templates', name: TEMPLATE })) as CustomObject;
    return readyReason(t) === 'Sealed';
  });

  // One at a time: each Branch alone on the system, Ready and then gone before the next is applied.
  const sequentialMs: number[] = [];
  if (opts.sequential > 0) {
    await until('the warm pools to fill', POOL_TIMEOUT_MS, async () => (await Promise.all(apis.map(async (a) => Object.values((await a.status()).pool).every((p) => p.ready >= p.size)))).every(Boolean), 250);
    progress(`one Branch at a time: ${opts.sequential} in a row`);
    for (let i = 0; i < opts.sequential; i++) {
      const name = `seq-${i}`;
      let readyAt = 0;
      let watchAbort: AbortController | undefined;
      const seen = new Promise<void>((resolve) => {
        void new Watch(kc)
          .watch(`/apis/pgx.dev/v1alpha1/namespaces/${NS}/branches`, { fieldSelector: `metadata.name=${name}` }, (_type: string, obj: CustomObject) => {
            if (readyAt === 0 && readyReason(obj) === 'DatabaseReady') {
              readyAt = systemClock.monotonic();
              resolve();
            }
          }, () => undefined)
          .then((a) => (watchAbort = a));
      });
      // The watch is open before the apply (its first event is the ADDED of the create).
      await until('the watch to open', 10_000, async () => watchAbort !== undefined, 5);
      await custom.createNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'branches', body: { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: TEMPLATE } } }, fieldValidation: 'Strict' });
      const applied = systemClock.monotonic();
      await Promise.race([seen, sleep(READY_TIMEOUT_MS).then(() => { throw new PgxError('INTERNAL', `${name} was not Ready within ${READY_TIMEOUT_MS / 1000} s`); })]);
      watchAbort?.abort();
      sequentialMs.push(readyAt - applied);
      await custom.deleteNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'branches', name });
      await until(`${name} to be gone`, READY_TIMEOUT_MS, async () => custom.getNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'branches', name }).then(() => false, () => true), 20);
    }
    progress(`  apply -> Ready one at a time: p50 ${median(sequentialMs).toFixed(0)} ms, p99 ${percentile(sequentialMs, 99).toFixed(0)} ms`);
  }

  // The floor: the same burst without the operator, straight to the runtimes' API: a create with its
  // credential per Branch (one call, as the operator makes it), all queued at once and spread evenly
  // over the pods, with as many in flight as the operator has workers (200 at once would only wait in
  // the runtimes' mint queues, past their --mint-timeout). Each is timed from the burst's start, as
  // apply -> Ready is from the apply.
  const poolsFull = async (): Promise<boolean> => (await Promise.all(apis.map(async (a) => Object.values((await a.status()).pool).every((p) => p.ready >= p.size)))).every(Boolean);
  await until('the warm pools to fill', POOL_TIMEOUT_MS, poolsFull, 250);
  const workers = opts.workers ?? DEFAULT_WORKERS;
  progress(`runtimes alone: ${opts.branches} creates + credentials, ${workers} at a time, through their API`);
  const directStart = systemClock.monotonic();
  const direct: { doneMs: number; api: ApiClient; name: string }[] = [];
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(workers, opts.branches) }, async () => {
      for (let i = next++; i < opts.branches; i = next++) {
        const api = apis[i % apis.length]!;
        const made = await api.createDatabase({ template: TEMPLATE, pinned: true, credential: {} });
        direct.push({ doneMs: systemClock.monotonic() - directStart, api, name: made.name });
      }
    }),
  );
  // And the drops, the same way: what expiry -> dropped cannot go below.
  const dropStart = systemClock.monotonic();
  const dropMs: number[] = [];
  let nextDrop = 0;
  await Promise.all(
    Array.from({ length: Math.min(workers, direct.length) }, async () => {
      for (let i = nextDrop++; i < direct.length; i = nextDrop++) {
        await direct[i]!.api.dropDatabase(direct[i]!.name);
        dropMs.push(systemClock.monotonic() - dropStart);
      }
    }),
  );
  await until('the warm pools to refill', POOL_TIMEOUT_MS, async () => (await Promise.all(apis.map(async (a) => Object.values((await a.status()).pool).every((p) => p.ready >= p.size)))).every(Boolean));
  const runtimeFloor = { workers, doneMs: direct.map((d) => d.doneMs), dropMs };
  progress(`  p50 ${median(runtimeFloor.doneMs).toFixed(0)} ms, p99 ${percentile(runtimeFloor.doneMs, 99).toFixed(0)} ms from the start of the burst; drops p50 ${median(dropMs).toFixed(0)} ms`);

  // One watch on Branches for the whole run: every sample's phase times come from it.
  const tracked = new Map<string, Tracked>();
  let roundStart = 0;
  // client-node ends a watch that has been quiet for a while (an inactivity timeout), as it ends the
  // operator's informers' watches: it is resumed from the last resourceVersion seen.
  let lastRv: string | undefined;
  let watching = true;
  let current: AbortController | undefined;
  const onEvent = (type: string, obj: CustomObject): void => {
    if (obj.metadata?.resourceVersion) lastRv = obj.metadata.resourceVersion;
    const t = tracked.get(obj.metadata?.name ?? '');
    if (!t) return;
    const now = systemClock.monotonic() - roundStart;
    const s = t.sample;
    if (type === 'DELETED') {
      s.goneAt ??= systemClock.now();
      return;
    }
    const status = (obj.status ?? {}) as { phase?: string; pod?: string; database?: string; expiresAt?: string };
    if (s.finalizerMs === null && (obj.metadata?.finalizers ?? []).length > 0) s.finalizerMs = now;
    if (s.creatingMs === null && status.phase === 'Creating') s.creatingMs = now;
    if (s.readyMs === null && readyReason(obj) === 'DatabaseReady') {
      s.readyMs = now;
      s.readyAt = systemClock.now();
      s.pod = status.pod ?? '';
      t.database = status.database;
      s.expiresAt = status.expiresAt ? Date.parse(status.expiresAt) : null;
    }
    if (s.expiredSeenAt === null && status.phase === 'Expired') s.expiredSeenAt = systemClock.now();
  };
  const startWatch = async (): Promise<void> => {
    if (!watching) return;
    current = await new Watch(kc).watch(`/apis/pgx.dev/v1alpha1/namespaces/${NS}/branches`, lastRv ? { resourceVersion: lastRv } : {}, onEvent, () => void startWatch());
  };
  await startWatch();
  cleanup.add('branch watch', () => {
    watching = false;
    current?.abort();
  });

  const samples: Sample[] = [];
  const profiles: RoundProfile[] = [];
  for (let round = 0; round < opts.rounds; round++) {
    tracked.clear();
    const names = Array.from({ length: opts.branches }, (_, i) => `r${round}-b${i}`);
    for (const branch of names) {
      tracked.set(branch, {
        sample: { round, branch, pod: '', createMs: 0, appliedMs: 0, finalizerMs: null, creatingMs: null, readyMs: null, readyAt: null, expiresAt: null, expiredSeenAt: null, droppedAt: null, goneAt: null },
      });
    }
    const before = {
      requests: (await kubeApi.requests()).length,
      reconciles: await reconcileTotals(op),
      cpu: { operator: ownCpuMs(), kubeApi: kubeApi.cpuMs(), runtimes: await runtimesCpu(runtimes) },
    };
    progress(`round ${round + 1}/${opts.rounds}: applying ${opts.branches} Branches at once (ttl ${opts.ttlSeconds}s)`);
    roundStart = systemClock.monotonic();
    await Promise.all(
      names.map(async (branch) => {
        const s = tracked.get(branch)!.sample;
        s.createMs = systemClock.monotonic() - roundStart;
        await custom.createNamespacedCustomObject({
          ...PGX,
          namespace: NS,
          plural: 'branches',
          body: { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: branch }, spec: { templateRef: { name: TEMPLATE }, ttl: `${opts.ttlSeconds}s` } },
          fieldValidation: 'Strict',
        });
        s.appliedMs = systemClock.monotonic() - roundStart;
      }),
    );
    const all = [...tracked.values()];
    // How long the runtimes' control API takes to answer while the burst runs (what every reconcile waits
    // on): a GET of a database every 250 ms, /v1/status only every 2 s. A status read walks the runtime's
    // process tree and cost the runtime 77-103 ms of CPU each (measured with 40 databases): read every
    // 250 ms from both pods, as runs before 2026-11-30 14:00 did, it took about a third of the machine's
    // two cores from the runtimes during the burst, and the operator's placement reads it too.
    const probes: { statusMs: number[]; getMs: number[] } = { statusMs: [], getMs: [] };
    let probing = true;
    const probe = (async () => {
      for (let tick = 0; probing; tick++) {
        for (const api of apis) {
          if (tick % 8 === 0) {
            const t0 = systemClock.monotonic();
            await api.status();
            probes.statusMs.push(systemClock.monotonic() - t0);
          }
          const t1 = systemClock.monotonic();
          await api.getDatabase('no_such_database').catch(() => undefined);
          probes.getMs.push(systemClock.monotonic() - t1);
        }
        await sleep(250);
      }
    })();
    await until(`${opts.branches} Branches to be Ready`, READY_TIMEOUT_MS, async () => all.every((t) => t.sample.readyMs !== null));
    probing = false;
    await probe;
    const readyWindowMs = systemClock.monotonic() - roundStart;
    const cpu = { operator: ownCpuMs() - before.cpu.operator, kubeApi: kubeApi.cpuMs() - before.cpu.kubeApi, runtimes: (await runtimesCpu(runtimes)) - before.cpu.runtimes };
    const ready = all.map((t) => t.sample.readyMs! - t.sample.appliedMs).sort((a, b) => a - b);
    progress(`  all Ready after ${(readyWindowMs / 1000).toFixed(2)} s; apply -> Ready p50 ${median(ready).toFixed(0)} ms, p99 ${percentile(ready, 99).toFixed(0)} ms`);

    // Expiry: poll each runtime's databases from just before the first expiresAt until all are gone.
    const firstExpiry = Math.min(...all.map((t) => t.sample.expiresAt ?? Infinity));
    const late = all.filter((t) => t.sample.expiresAt !== null && t.sample.expiresAt < systemClock.now()).length;
    if (late > 0) progress(`  ${late} Branches were Ready only after their expiresAt: raise --ttl`);
    await sleep(Math.max(0, firstExpiry - systemClock.now() - 500));
    progress('  waiting for the TTLs: polling the runtimes for the drops');
    const podIndex = (pod: string): number => Number(pod.slice(RUNTIME.length + 1));
    await until('every database to be dropped', opts.ttlSeconds * 1000 + READY_TIMEOUT_MS, async () => {
      const pending = all.filter((t) => t.sample.droppedAt === null);
      for (const [i, api] of apis.entries()) {
        const mine = pending.filter((t) => podIndex(t.sample.pod) === i);
        if (mine.length === 0) continue;
        const present = new Set((await api.listDatabases()).map((d) => d.name));
        const at = systemClock.now();
        for (const t of mine) if (t.database !== undefined && !present.has(t.database)) t.sample.droppedAt = at;
      }
      return all.every((t) => t.sample.droppedAt !== null);
    }, POLL_MS);
    await until('every Branch to be gone', READY_TIMEOUT_MS, async () => all.every((t) => t.sample.goneAt !== null));
    for (const t of all) samples.push(t.sample);

    const log = (await kubeApi.requests()).slice(before.requests);
    const afterReconciles = await reconcileTotals(op);
    const reconciles: RoundProfile['reconciles'] = {};
    for (const [k, v] of Object.entries(afterReconciles)) reconciles[k] = { count: v.count - (before.reconciles[k]?.count ?? 0), seconds: v.seconds - (before.reconciles[k]?.seconds ?? 0) };
    profiles.push({ round, readyWindowMs, cpu, runtimeApi: { statusP50Ms: median(probes.statusMs), getP50Ms: median(probes.getMs), probes: probes.statusMs.length }, reconciles, requests: requestProfile(log), mints: await Promise.all(apis.map(async (a) => { const m = (await a.status()).mints; return { warm: m.warm, cold: m.cold }; })) });
    // The warm pools refill in the background after a burst; let them, so rounds start alike.
    await until('the warm pools to refill', POOL_TIMEOUT_MS, async () => (await Promise.all(apis.map(async (a) => Object.values((await a.status()).pool).every((p) => p.ready >= p.size)))).every(Boolean));
  }
  return { options: opts, operatorQueue: { workers: opts.workers ?? DEFAULT_WORKERS }, runtimeFloor, sequentialMs, apiServer: 'kube-apiserver v1.36.3 (etcd 3.6.8, kube-controller-manager v1.36.3)', samples, profiles };
}

function readyReason(obj: CustomObject): string | undefined {
  return ((obj.status as { conditions?: { type: string; status: string; reason: string }[] } | undefined)?.conditions ?? []).find((c) => c.type === 'Ready' && c.status === 'True')?.reason;
}

async function until(what: string, timeoutMs: number, fn: () => Promise<boolean>, intervalMs = 20): Promise<void> {
  const deadline = systemClock.monotonic() + timeoutMs;
  while (!(await fn())) {
    if (systemClock.monotonic() > deadline) throw new PgxError('INTERNAL', `timed out after ${timeoutMs / 1000} s waiting for ${what}`);
    await sleep(intervalMs);
  }
}

async function runtimesCpu(runtimes: { pid: number }[]): Promise<number> {
  return (await Promise.all(runtimes.map((r) => treeCpuMs(r.pid)))).reduce((a, b) => a + b, 0);
}

async function reconcileTotals(op: Operator): Promise<Record<string, { count: number; seconds: number }>> {
  const out: Record<string, { count: number; seconds: number }> = {};
  for (const m of await op.metrics.registry.getMetricsAsJSON()) {
    if (m.name !== 'pgx_operator_reconcile_duration_seconds') continue;
    for (const v of (m as unknown as { values: { metricName?: string; labels: { controller?: string }; value: number }[] }).values) {
      const c = v.labels.controller ?? '';
      out[c] ??= { count: 0, seconds: 0 };
      if (v.metricName?.endsWith('_count')) out[c].count = v.value;
      if (v.metricName?.endsWith('_sum')) out[c].seconds = v.value;
    }
  }
  return out;
}

function requestProfile(log: AuditRecord[]): RoundProfile['requests'] {
  const groups = new Map<string, number[]>();
  for (const r of log) {
    if (r.verb === 'watch') continue;
    const k = `${r.verb} ${r.resource}${r.subresource ? '/' + r.subresource : ''}`;
    (groups.get(k) ?? groups.set(k, []).get(k)!).push(r.ms);
  }
  return [...groups.entries()]
    .map(([k, ms]) => ({ verb: k.split(' ')[0]!, resource: k.split(' ')[1]!, count: ms.length, p50Ms: median(ms), p99Ms: percentile(ms, 99) }))
    .sort((a, b) => b.count - a.count);
}

function render(r: Meta & Body) {
  const ms = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(0)} ms` : '-');
  const stat = (values: number[]): { p50: number; p99: number; n: number } => ({ p50: median(values), p99: percentile(values, 99), n: values.length });
  const s = r.samples;
  const applyReady = stat(s.flatMap((x) => (x.readyMs !== null ? [x.readyMs - x.appliedMs] : [])));
  const create = stat(s.map((x) => x.appliedMs - x.createMs));
  const toFinalizer = stat(s.flatMap((x) => (x.finalizerMs !== null ? [x.finalizerMs - x.appliedMs] : [])));
  const toCreating = stat(s.flatMap((x) => (x.creatingMs !== null && x.finalizerMs !== null ? [x.creatingMs - x.finalizerMs] : [])));
  const creatingReady = stat(s.flatMap((x) => (x.readyMs !== null && x.creatingMs !== null ? [x.readyMs - x.creatingMs] : [])));
  // A Branch Ready only after its expiresAt expires at once: its expiry is not a TTL running out.
  const onTime = s.filter((x) => x.expiresAt !== null && x.readyAt !== null && x.readyAt < x.expiresAt);
  const lateCount = s.length - onTime.length;
  const expirySeen = stat(onTime.flatMap((x) => (x.expiredSeenAt !== null ? [x.expiredSeenAt - x.expiresAt!] : [])));
  const dropped = stat(onTime.flatMap((x) => (x.droppedAt !== null ? [x.droppedAt - x.expiresAt!] : [])));
  const gone = stat(onTime.flatMap((x) => (x.goneAt !== null ? [x.goneAt - x.expiresAt!] : [])));
  const header = ['interval', 'p50', 'p99', 'samples'];
  const floor = stat(r.runtimeFloor.doneMs);
  const row = (label: string, v: { p50: number; p99: number; n: number }): string[] => [label, ms(v.p50), ms(v.p99), String(v.n)];
  const sequential = stat(r.sequentialMs ?? []);
  const rows = [
    ...(sequential.n > 0 ? [row('one Branch at a time: apply -> Ready', sequential)] : []),
    row(`runtimes alone: create with its credential, same burst, ${r.runtimeFloor.workers} at a time, no operator`, floor),
    row('apply -> Ready', applyReady),
    row('  create call (apply returns)', create),
    row('  applied -> finalizer added', toFinalizer),
    row('  finalizer -> Creating (placed)', toCreating),
    row('  Creating -> Ready (mint, credential, Secret)', creatingReady),
    row(`runtimes alone: drop, the same databases, ${r.runtimeFloor.workers} at a time, no operator`, stat(r.runtimeFloor.dropMs)),
    row(`TTL expiry -> database dropped${lateCount ? ` (${lateCount} Ready only after their expiry left out)` : ''}`, dropped),
    row('  expiry -> Expired seen', expirySeen),
    row('  expiry -> Branch gone', gone),
  ];
  const bars: Bar[] = sequential.n > 0
    ? [
        { text: 'one at a time: apply -> Ready p50 <= 200 ms', measured: `${ms(sequential.p50)} (p99 ${ms(sequential.p99)})`, pass: sequential.p50 <= 200 },
        { text: `${r.options.branches} at once: apply -> Ready p50 within 1.2x of the runtimes alone`, measured: `${ms(applyReady.p50)} against ${ms(floor.p50)}: ${(applyReady.p50 / floor.p50).toFixed(2)}x`, pass: applyReady.p50 <= 1.2 * floor.p50 },
      ]
    : [{ text: 'apply -> Ready p50 <= 200 ms', measured: `${ms(applyReady.p50)} (p99 ${ms(applyReady.p99)})`, pass: applyReady.p50 <= 200 }];
  const perSecond = (n: number, windowMs: number): string => `${((n / windowMs) * 1000).toFixed(1)}/s`;
  const floorWindow = Math.max(...r.runtimeFloor.doneMs);
  const readyWindows = r.profiles.map((p) => p.readyWindowMs);
  const diagnosis =
    `The bar asks for about ${Math.ceil(r.options.branches / 2)} of ${r.options.branches} Branches to be Ready within 200 ms, i.e. ${perSecond(Math.ceil(r.options.branches / 2), 200)} new databases. ` +
    `The runtimes alone, without the operator, made the same burst's databases and credentials at ${perSecond(r.runtimeFloor.doneMs.length, floorWindow)} (p50 ${ms(floor.p50)} from the burst's start); ` +
    `through the operator the rounds took ${readyWindows.map((w) => `${(w / 1000).toFixed(1)} s`).join(', ')} to get every Branch Ready (${readyWindows.map((w) => perSecond(r.options.branches, w)).join(', ')}), ` +
    `so apply -> Ready p50 is ${ms(applyReady.p50 - floor.p50)} above the floor; of the steps, Creating -> Ready (the runtime's mint, then credential and Secret) takes ${ms(creatingReady.p50)} at p50. ` +
    `Dropping the same number of databases straight through the runtimes' API took p50 ${ms(median(r.runtimeFloor.dropMs))} from the first drop; TTL expiry -> dropped p50 is ${ms(dropped.p50)}.`;

  const perRound = r.profiles.map((p) => {
    const rs = s.filter((x) => x.round === p.round);
    const ar = rs.flatMap((x) => (x.readyMs !== null ? [x.readyMs - x.appliedMs] : []));
    const dr = rs.flatMap((x) => (x.droppedAt !== null && x.expiresAt !== null && x.readyAt !== null && x.readyAt < x.expiresAt ? [x.droppedAt - x.expiresAt] : []));
    const window = p.readyWindowMs / 1000;
    const share = (v: number): string => `${((v / p.readyWindowMs) * 100).toFixed(0)}%`;
    const rec = Object.entries(p.reconciles).map(([c, v]) => `${c} ${v.count} (mean ${v.count ? ((v.seconds / v.count) * 1000).toFixed(0) : '-'} ms)`).join(', ');
    return [
      String(p.round + 1),
      ms(median(ar)),
      ms(percentile(ar, 99)),
      `${window.toFixed(2)} s`,
      ms(median(dr)),
      ms(percentile(dr, 99)),
      `${share(p.cpu.operator)} / ${share(p.cpu.kubeApi)} / ${share(p.cpu.runtimes)}`,
      `${ms(p.runtimeApi.statusP50Ms)} / ${ms(p.runtimeApi.getP50Ms)}`,
      rec,
      p.mints.map((m) => `${m.warm}w+${m.cold}c`).join(', '),
    ];
  });
  const roundHeader = ['round', 'apply->Ready p50', 'p99', 'all Ready after', 'expiry->dropped p50', 'p99', `CPU of one core during the burst: operator / ${r.apiServer ? 'kube-apiserver+etcd' : 'API double'} / runtimes`, 'runtime API p50 during the burst: status / get', 'reconciles (mean time)', 'mints per pod (warm+cold, cumulative)'];
  const reqs = r.profiles[r.profiles.length - 1]?.requests ?? [];
  const server = r.apiServer ? 'API server' : 'double';
  const reqHeader = ['request', 'count', `${server} p50`, `${server} p99`];
  const reqRows = reqs.slice(0, 12).map((q) => [`${q.verb} ${q.resource}`, String(q.count), `${q.p50Ms.toFixed(1)} ms`, `${q.p99Ms.toFixed(1)} ms`]);
  const o = r.options;
  const about = [
    `${describeMachine(r.machine, r.durationSeconds)}.`,
    `${o.sequential ? `${o.sequential} Branches one at a time, then ` : ''}${o.branches} Branches applied at once per round, ${o.rounds} round${o.rounds === 1 ? '' : 's'}, ttl ${o.ttlSeconds}s; ${o.pods} runtime pods (pgx start processes, ${o.poolSize === null || o.poolSize === undefined ? 'default warm pool of 2' : `the Runtime's engine.poolSize ${o.poolSize}, i.e. --pool-size ${o.poolSize}`} per template);` +
      ` ${r.apiServer ? `a real control plane (${r.apiServer}), the chart's RBAC in force, runtime pods run by the test node on their own loopback addresses` : 'the API double in its own process'}; the operator with ${r.operatorQueue.workers} workers per controller${o.workers === null ? ' (its default)' : ''}, resync 300 s.`,
  ];
  return {
    bars,
    terminal: [...about, '', formatTable(header, rows), '', diagnosis, '', formatTable(roundHeader, perRound), '', `API requests of the last round (the ${server}'s time for each):`, formatTable(reqHeader, reqRows)].join('\n'),
    markdown: (raw: string) =>
      [
        `Latest run: ${about.join(' ')}`,
        '',
        markdownTable(header, rows, ['l', 'r', 'r', 'r']),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        '',
        diagnosis,
        '',
        markdownTable(roundHeader, perRound, ['r', 'r', 'r', 'r', 'r', 'r', 'l', 'l', 'l', 'l']),
        '',
        `API requests of the last round, with the time the ${server} took to answer each${r.apiServer ? ' (its audit log: receipt to response; the operator\'s requests and this process\'s)' : ''}:`,
        '',
        markdownTable(reqHeader, reqRows, ['l', 'r', 'r', 'r']),
        '',
        `Timers: apply -> Ready from the create call's return to the watch event with Ready=True; expiry -> dropped from status.expiresAt to the database's absence in its runtime's /v1/databases (polled every ${POLL_MS} ms). Raw samples: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

export const main = benchMain<Options, Body>({
  name: 'operator',
  help: HELP,
  options: ['sequential', 'branches', 'pods', 'rounds', 'ttl', 'workers', 'pool-size'],
  parse: (v, quick) => ({
    sequential: intOption(v, 'sequential', quick ? 5 : 50, 0),
    branches: intOption(v, 'branches', quick ? 20 : 200, 1),
    pods: intOption(v, 'pods', 2, 1),
    rounds: intOption(v, 'rounds', quick ? 1 : 3, 1),
    ttlSeconds: intOption(v, 'ttl', quick ? 30 : 180, 1),
    workers: v.workers === undefined ? null : intOption(v, 'workers', 4, 1),
    poolSize: v['pool-size'] === 'auto' ? 'auto' : intOption(v, 'pool-size', Math.ceil(intOption(v, 'branches', quick ? 20 : 200, 1) / intOption(v, 'pods', 2, 1)) + 10, 0),
  }),
  measure,
  render,
});
