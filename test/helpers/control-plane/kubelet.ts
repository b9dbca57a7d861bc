// The node of the control-plane suite: what a kubelet (and a CSI driver, and CNI) would do for the
// runtime Pods the real StatefulSet controller makes, with no container runtime. It registers a Node
// and renews its Lease (so the node lifecycle controller keeps it Ready and evicts nothing), binds
// every unscheduled Pod to it (there is no scheduler), and runs each bound Pod's container: its own
// `args` given to this checkout's `node bin/pgx.js`, on a loopback address of its own (127.0.0.2, .3,
// ...; a new one for every Pod object, as a pod gets a new IP) with the Pod's ports, a data directory
// per PersistentVolumeClaim (`data-<pod>`, kept when the Pod is deleted and re-created, as a volume
// is), and the Secret volume written to files. It writes the Pod's status as a kubelet does (podIP,
// Ready from the container's readiness probe, /readyz), and on deletion stops the process (SIGTERM,
// then SIGKILL after the grace period) and removes the Pod object (grace 0), as a kubelet does.
//
// Image-specific paths are mapped: the image's /usr/lib/postgresql/18/bin becomes the embedded
// PostgreSQL 18 (the flag is dropped), the volume mounts become directories under the node's root.
// Only `pgx start` containers run; any other Pod is bound and stays Pending (there is no image to run).

import { CoreV1Api, CoordinationV1Api, makeInformer, type KubeConfig, type V1Pod, type Informer } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { MERGE_PATCH } from '../../../src/operator/kube.js';
import { microTime } from '../../../src/operator/leader.js';
import { systemClock } from '../../../src/clock.js';

export const NODE_NAME = 'pgx-test-node';
const checkoutRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');
/** How often readiness is probed. Faster than the StatefulSet's probe (5 s): tests and the benchmark wait on it. */
const PROBE_MS = 250;

interface Container {
  uid: string;
  key: string;
  ip: string;
  child: ChildProcess;
  exited: Promise<void>;
  ready: boolean;
  probe: NodeJS.Timeout | null;
  grace: number;
  /** A test's crash(): not restarted until it says so. */
  held: boolean;
  restarts: number;
  respawn(): void;
}

export interface Node {
  /** The Pod IP of a running pod (ns/name), for tests that reach it. */
  podIp(namespace: string, name: string): string | undefined;
  /** The process id of a running pod's container (its runtime), for CPU accounting. */
  pid(namespace: string, name: string): number | undefined;
  /** The data directory of a PVC (kept across pods). */
  volumeDir(namespace: string, claim: string): string;
  /**
   * Kills a pod's process as a crash would: the Pod object stays and turns not Ready. The kubelet's
   * restart is held until the returned function is called (same Pod, same IP, same volume).
   */
  crash(namespace: string, name: string): Promise<() => void>;
  /** Resolves a Pod's cluster DNS name (<hostname>.<subdomain>.<ns>.svc.cluster.local) to its Pod IP, as cluster DNS does. */
  resolve(host: string): Promise<string>;
  stop(): Promise<void>;
}

/** A container's processes are its process group (the runtime and its PostgreSQL): a crash or a kill after the grace period ends them all, as a container's cgroup. */
function killGroup(child: ChildProcess): void {
  try {
    process.kill(-child.pid!, 'SIGKILL');
  } catch {
    // already gone
  }
}

/** Still running: neither exited nor killed by a signal (a SIGKILLed child has exitCode null). */
function alive(child: ChildProcess): boolean {
  return child.exitCode === null && child.signalCode === null;
}

const groups = new Set<ChildProcess>();
process.once('exit', () => {
  for (const g of groups) killGroup(g);
});

export async function startNode(kc: KubeConfig, root: string): Promise<Node> {
  const core = kc.makeApiClient(CoreV1Api);
  const coordination = kc.makeApiClient(CoordinationV1Api);
  fs.mkdirSync(root, { recursive: true });
  await core.createNode({ body: { metadata: { name: NODE_NAME, labels: { 'kubernetes.io/hostname': NODE_NAME, 'kubernetes.io/os': 'linux' } } } });
  const now = () => new Date(systemClock.now()).toISOString();
  await core.patchNodeStatus({
    name: NODE_NAME,
    body: {
      status: {
        capacity: { cpu: '2', memory: '24Gi', pods: '110' },
        allocatable: { cpu: '2', memory: '24Gi', pods: '110' },
        addresses: [{ type: 'InternalIP', address: '127.0.0.1' }, { type: 'Hostname', address: NODE_NAME }],
        conditions: [{ type: 'Ready', status: 'True', reason: 'KubeletReady', message: 'the test harness plays the kubelet', lastHeartbeatTime: now(), lastTransitionTime: now() }],
        nodeInfo: { architecture: 'amd64', operatingSystem: 'linux', kubeletVersion: 'v1.36.3', kubeProxyVersion: '', containerRuntimeVersion: 'pgx-test://0', kernelVersion: '', osImage: '', bootID: '', machineID: '', systemUUID: '' },
      },
    },
  }, MERGE_PATCH);
  const renewLease = async () => {
    const spec = { holderIdentity: NODE_NAME, leaseDurationSeconds: 40, renewTime: microTime(systemClock.now()) };
    try {
      await coordination.replaceNamespacedLease({ name: NODE_NAME, namespace: 'kube-node-lease', body: { metadata: { name: NODE_NAME, resourceVersion: (await coordination.readNamespacedLease({ name: NODE_NAME, namespace: 'kube-node-lease' })).metadata?.resourceVersion }, spec } });
    } catch (err) {
      if ((err as { code?: number }).code === 404) await coordination.createNamespacedLease({ namespace: 'kube-node-lease', body: { metadata: { name: NODE_NAME }, spec } }).catch(() => undefined);
    }
  };
  await renewLease();
  const leaseTimer = setInterval(() => void renewLease(), 10_000);

  const containers = new Map<string, Container>(); // by pod uid
  const busy = new Map<string, Promise<void>>(); // per pod key: one reconcile at a time
  const latest = new Map<string, V1Pod | null>();
  let nextIp = 2;
  let stopping = false;

  const volumeDir = (ns: string, claim: string) => path.join(root, 'volumes', ns, claim);

  async function writeStatus(pod: V1Pod, c: Container): Promise<void> {
    const t = now();
    const cond = (type: string, ok: boolean) => ({ type, status: ok ? 'True' : 'False', lastTransitionTime: t as unknown as Date });
    await core.patchNamespacedPodStatus({
      name: pod.metadata!.name!,
      namespace: pod.metadata!.namespace!,
      body: {
        status: {
          phase: 'Running',
          hostIP: '127.0.0.1',
          hostIPs: [{ ip: '127.0.0.1' }],
          podIP: c.ip,
          podIPs: [{ ip: c.ip }],
          startTime: t,
          conditions: [cond('PodScheduled', true), cond('Initialized', true), cond('ContainersReady', c.ready), cond('Ready', c.ready)],
          containerStatuses: (pod.spec?.containers ?? []).map((ct) => ({ name: ct.name, image: ct.image, imageID: '', ready: c.ready, started: alive(c.child), restartCount: c.restarts, state: alive(c.child) ? { running: { startedAt: t } } : { terminated: { exitCode: c.child.exitCode ?? 1, reason: 'Error' } } })),
        },
      },
    }, MERGE_PATCH).catch((err: { code?: number }) => {
      if (err.code !== 404) throw err;
    });
  }

  async function secretFiles(pod: V1Pod, dir: string): Promise<Map<string, string>> {
    const mounts = new Map<string, string>();
    const container = pod.spec!.containers[0]!;
    for (const m of container.volumeMounts ?? []) {
      const vol = pod.spec!.volumes?.find((v) => v.name === m.name);
      if (vol?.secret?.secretName) {
        const secret = await core.readNamespacedSecret({ name: vol.secret.secretName, namespace: pod.metadata!.namespace! });
        const to = path.join(dir, 'volumes', m.name);
        fs.mkdirSync(to, { recursive: true });
        for (const [k, v] of Object.entries(secret.data ?? {})) fs.writeFileSync(path.join(to, k), Buffer.from(v, 'base64'), { mode: 0o400 });
        mounts.set(m.mountPath, to);
      } else if (vol?.emptyDir) {
        // An emptyDir (the runtime's /dev/shm): a directory of the pod's own, gone with it.
        const to = path.join(dir, 'volumes', m.name);
        fs.mkdirSync(to, { recursive: true });
        mounts.set(m.mountPath, to);
      } else if (m.name !== 'kube-api-access' && !m.name.startsWith('kube-api-access')) {
        // A claim from the StatefulSet's volumeClaimTemplates: <template>-<pod>.
        const claim = vol?.persistentVolumeClaim?.claimName ?? `${m.name}-${pod.metadata!.name}`;
        const to = volumeDir(pod.metadata!.namespace!, claim);
        fs.mkdirSync(to, { recursive: true });
        for (let d = to; d.startsWith(root); d = path.dirname(d)) fs.chmodSync(d, 0o755);
        mounts.set(m.mountPath, to);
      }
    }
    return mounts;
  }

  function mapArgs(args: string[], ip: string, mounts: Map<string, string>): string[] {
    const out: string[] = [];
    for (let i = 0; i < args.length; i++) {
      const a = args[i]!;
      if (a === '--pg-bin') {
        i++; // the image's PostgreSQL: here the embedded one, the runtime's default
        continue;
      }
      if ((a === '--host' || a === '--api-host' || a === '--metrics-host') && args[i + 1] === '0.0.0.0') {
        out.push(a, ip);
        i++;
        continue;
      }
      let v = a;
      for (const [from, to] of mounts) if (v === from || v.startsWith(from + '/')) v = to + v.slice(from.length);
      out.push(v);
    }
    return out;
  }

  async function run(pod: V1Pod): Promise<void> {
    const uid = pod.metadata!.uid!;
    const key = `${pod.metadata!.namespace}/${pod.metadata!.name}`;
    const dir = path.join(root, 'pods', uid);
    fs.mkdirSync(dir, { recursive: true, mode: 0o755 });
    const ip = `127.0.0.${nextIp++}`;
    const mounts = await secretFiles(pod, dir);
    const container = pod.spec!.containers[0]!;
    const args = mapArgs(container.args ?? [], ip, mounts);
    const spawnIt = (): ChildProcess => {
      const log = fs.openSync(path.join(dir, 'container.log'), 'a');
      const child = spawn(process.execPath, [path.join(checkoutRoot, 'bin/pgx.js'), ...args], { stdio: ['ignore', log, log], detached: true, env: { ...process.env, POD_NAME: pod.metadata!.name! } });
      groups.add(child);
      child.once('exit', () => groups.delete(child));
      fs.closeSync(log);
      return child;
    };
    const child = spawnIt();
    const c: Container = { uid, key, ip, child, exited: new Promise((r) => child.once('exit', () => r())), ready: false, probe: null, grace: pod.spec?.terminationGracePeriodSeconds ?? 30, held: false, restarts: 0, respawn: () => undefined };
    // The container exits on its own (a crash): restarted in the same Pod, on the same IP, after the
    // kubelet's first back-off (10 s), unless a test holds it (crash()).
    const watchExit = () => {
      void c.exited.then(() => {
        if (containers.get(uid) !== c) return; // stopped by kill()
        if (c.held) return;
        setTimeout(() => c.respawn(), 10_000);
      });
    };
    c.respawn = () => {
      if (containers.get(uid) !== c || alive(c.child)) return;
      c.held = false;
      c.restarts++;
      c.child = spawnIt();
      c.exited = new Promise((r) => c.child.once('exit', () => r()));
      watchExit();
    };
    watchExit();
    containers.set(uid, c);
    await writeStatus(pod, c);
    const port = container.readinessProbe?.httpGet?.port ?? 7432;
    const probePath = container.readinessProbe?.httpGet?.path ?? '/readyz';
    let probing = false;
    c.probe = setInterval(() => {
      if (probing) return;
      probing = true;
      void (async () => {
        const ok = alive(c.child) && (await fetch(`http://${ip}:${port}${probePath}`, { signal: AbortSignal.timeout(2_000) }).then((r) => r.ok, () => false));
        if (ok !== c.ready && containers.get(uid) === c) {
          c.ready = ok;
          const current = latest.get(key);
          if (current && current.metadata?.uid === uid && !current.metadata.deletionTimestamp) await writeStatus(current, c);
        }
      })().catch(() => undefined).finally(() => (probing = false));
    }, PROBE_MS);
  }

  async function kill(c: Container): Promise<void> {
    if (c.probe) clearInterval(c.probe);
    containers.delete(c.uid);
    if (alive(c.child)) {
      c.child.kill('SIGTERM');
      const killer = setTimeout(() => killGroup(c.child), c.grace * 1000);
      await c.exited;
      clearTimeout(killer);
    }
  }

  async function reconcile(key: string): Promise<void> {
    const pod = latest.get(key);
    // Containers of Pods that are gone, or that are no longer this key's current Pod.
    for (const c of [...containers.values()]) if (c.key === key && (!pod || pod.metadata?.uid !== c.uid)) await kill(c);
    if (!pod || stopping) return;
    const { name, namespace, uid } = pod.metadata as { name: string; namespace: string; uid: string };
    if (pod.metadata?.deletionTimestamp) {
      const c = containers.get(uid);
      if (c) await kill(c);
      // With a body, the API server reads the options from it only (query parameters are ignored).
      await core.deleteNamespacedPod({ name, namespace, body: { gracePeriodSeconds: 0, preconditions: { uid } } }).catch((err: { code?: number }) => {
        if (err.code !== 404 && err.code !== 409) throw err;
      });
      return;
    }
    if (!pod.spec?.nodeName) {
      await core.createNamespacedPodBinding({ name, namespace, body: { metadata: { name }, target: { apiVersion: 'v1', kind: 'Node', name: NODE_NAME } } }).catch((err: { code?: number }) => {
        if (err.code !== 409) throw err;
      });
      return; // the bound Pod comes back as an update
    }
    if (pod.spec.nodeName !== NODE_NAME || containers.has(uid)) return;
    // Only the runtime image's `pgx start` can run here (no container runtime): other Pods (the chart's
    // operator Deployment under helm install) stay bound and Pending.
    if (pod.spec.containers[0]?.args?.[0] !== 'start') return;
    await run(pod);
  }

  function queue(pod: V1Pod | null, key: string): void {
    latest.set(key, pod);
    const prev = busy.get(key) ?? Promise.resolve();
    const next = prev.then(() => reconcile(key)).catch((err) => {
      if (!stopping) console.error(`test node: pod ${key}: ${(err as Error).message}`);
    });
    busy.set(key, next);
  }

  const informer: Informer<V1Pod> = makeInformer(kc, '/api/v1/pods', () => core.listPodForAllNamespaces());
  const keyOf = (p: V1Pod) => `${p.metadata?.namespace}/${p.metadata?.name}`;
  informer.on('add', (p) => queue(p, keyOf(p)));
  informer.on('update', (p) => queue(p, keyOf(p)));
  informer.on('delete', (p) => queue(null, keyOf(p)));
  informer.on('error', () => {
    if (!stopping) setTimeout(() => void informer.start(), 500);
  });
  await informer.start();

  return {
    podIp(namespace, name) {
      return [...containers.values()].find((c) => c.key === `${namespace}/${name}`)?.ip;
    },
    pid(namespace, name) {
      return [...containers.values()].find((c) => c.key === `${namespace}/${name}`)?.child.pid;
    },
    volumeDir,
    async crash(namespace, name) {
      const c = [...containers.values()].find((x) => x.key === `${namespace}/${name}`);
      if (!c) throw new Error(`no container for ${namespace}/${name}`);
      c.held = true;
      killGroup(c.child);
      await c.exited;
      return () => c.respawn();
    },
    async resolve(host) {
      const m = /^([^.]+)\.([^.]+)\.([^.]+)\.svc\.cluster\.local$/.exec(host);
      if (!m) throw new Error(`${host} is not a pod DNS name`);
      const [, hostname, subdomain, namespace] = m as unknown as [string, string, string, string];
      const pods = await core.listNamespacedPod({ namespace });
      const pod = pods.items.find((p) => (p.spec?.hostname ?? p.metadata?.name) === hostname && p.spec?.subdomain === subdomain && !p.metadata?.deletionTimestamp);
      if (!pod?.status?.podIP) throw new Error(`${host} does not resolve: no Pod ${hostname} with an IP under ${subdomain} in ${namespace}`);
      return pod.status.podIP;
    },
    async stop() {
      stopping = true;
      clearInterval(leaseTimer);
      await informer.stop();
      await Promise.all([...busy.values()]);
      await Promise.all([...containers.values()].map((c) => kill(c)));
    },
  };
}
