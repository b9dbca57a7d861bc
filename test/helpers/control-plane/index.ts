// A real Kubernetes control plane for the operator's end-to-end suite (npm run test:kube): etcd,
// Kubernetes' own kube-apiserver and kube-controller-manager (built by test/control-plane/build.sh),
// each a child process on loopback, in a fresh directory that stop() removes. The API server runs
// with its real admission chain, CRD validation and CEL rules, RBAC (the only authorizer: there are no
// kubelets), and an audit log of every request at Metadata level, which is how the tests see what the
// operator asked for and what it was refused (requests()). The controller manager runs every default
// controller (StatefulSet, garbage collector, EndpointSlice, ServiceAccount, ...) with per-controller
// service-account credentials, as kubeadm sets it up. There is no kubelet: kubelet.ts plays the node.

import { KubeConfig } from '@kubernetes/client-node';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import https from 'node:https';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { certKubeconfig, makePki, type Pki } from './pki.js';
import { scratchDir } from '../scratch.js';

export interface AuditRecord {
  verb: string;
  user: string;
  resource: string;
  subresource?: string;
  apiGroup: string;
  namespace: string | null;
  name?: string;
  code: number;
  /** The API server's time for it, from receipt to the response's end (a watch: its whole life). */
  ms: number;
}

export interface ControlPlane {
  /** https://127.0.0.1:PORT */
  url: string;
  dir: string;
  pki: Pki;
  /** The cluster admin's kubeconfig file (O=system:masters), for kubectl and helm. */
  adminKubeconfig: string;
  /** A KubeConfig loaded from adminKubeconfig. */
  kubeConfig(): KubeConfig;
  /** Every request the audit log holds so far (system components' own left out by the policy). */
  requests(): AuditRecord[];
  /** Process ids, for CPU accounting. */
  pids: { etcd: number; apiserver: number; controllerManager: number };
  stop(): Promise<void>;
}

const binDir = process.env.PGX_CONTROL_PLANE_BIN ?? path.join(process.env.PGX_CONTROL_PLANE_CACHE ?? path.join(os.homedir(), '.cache/pgx-control-plane'), 'bin');

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

// The controller manager's and the API server's own traffic is most of what an API server serves and
// none of what a test asks about; the harness's node (kubelet.ts) is the admin and stays in.
const AUDIT_POLICY = `apiVersion: audit.k8s.io/v1
kind: Policy
omitStages: [RequestReceived, ResponseStarted]
rules:
  - level: None
    users: [system:kube-controller-manager, system:apiserver, system:kube-scheduler]
  - level: None
    userGroups: [system:serviceaccounts:kube-system]
  - level: None
    nonResourceURLs: ['/healthz*', '/readyz*', '/livez*', '/version', '/openapi*', '/api', '/apis', '/api/*', '/apis/*']
  - level: Metadata
`;

interface Proc {
  name: string;
  child: ChildProcess;
  exited: Promise<void>;
}

function start(dir: string, name: string, args: string[]): Proc {
  const log = fs.openSync(path.join(dir, `${name}.log`), 'a');
  const child = spawn(path.join(binDir, name), args, { stdio: ['ignore', log, log] });
  fs.closeSync(log);
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  return { name, child, exited };
}

function logTail(dir: string, name: string): string {
  try {
    return fs.readFileSync(path.join(dir, `${name}.log`), 'utf8').split('\n').slice(-30).join('\n');
  } catch {
    return '';
  }
}

/** GET path on the API server as the admin; the status code, or 0 while it does not answer. */
function adminGet(url: string, pki: Pki, p: string): Promise<{ code: number; body: string }> {
  return new Promise((resolve) => {
    const req = https.get(url + p, { ca: fs.readFileSync(pki.caCert), cert: fs.readFileSync(pki.adminCert), key: fs.readFileSync(pki.adminKey), timeout: 5_000 }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () => resolve({ code: res.statusCode ?? 0, body }));
    });
    req.on('error', () => resolve({ code: 0, body: '' }));
    req.on('timeout', () => req.destroy());
  });
}

async function until(what: string, procs: Proc[], dir: string, timeoutMs: number, fn: () => Promise<boolean>): Promise<void> {
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    for (const p of procs) if (p.child.exitCode !== null) throw new Error(`${p.name} exited (${p.child.exitCode}) while waiting for ${what}:\n${logTail(dir, p.name)}`);
    if (await fn()) return;
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}:\n${procs.map((p) => `${p.name}:\n${logTail(dir, p.name)}`).join('\n')}`);
    await new Promise((r) => setTimeout(r, 200));
  }
}

const running = new Set<Proc>();
process.once('exit', () => {
  for (const p of running) p.child.kill('SIGKILL');
});

export async function startControlPlane(): Promise<ControlPlane> {
  for (const b of ['etcd', 'kube-apiserver', 'kube-controller-manager']) {
    if (!fs.existsSync(path.join(binDir, b))) throw new Error(`${path.join(binDir, b)} is missing: run test/control-plane/build.sh (npm run test:kube does)`);
  }
  const dir = scratchDir('pgx-control-plane-');
  // The node's runtimes run PostgreSQL as an unprivileged user, under this directory; the keys stay private.
  fs.chmodSync(dir, 0o755);
  const pki = makePki(path.join(dir, 'pki'));
  fs.chmodSync(pki.dir, 0o700);
  const [etcdClient, etcdPeer, apiPort] = [await freePort(), await freePort(), await freePort()];
  const procs: Proc[] = [];
  const stop = async () => {
    for (const p of [...procs].reverse()) {
      p.child.kill('SIGTERM');
      const killer = setTimeout(() => p.child.kill('SIGKILL'), 10_000);
      await p.exited;
      clearTimeout(killer);
      running.delete(p);
    }
    if (!process.env.PGX_KEEP_CONTROL_PLANE) fs.rmSync(dir, { recursive: true, force: true });
  };
  try {
    const etcdUrl = `http://127.0.0.1:${etcdClient}`;
    procs.push(start(dir, 'etcd', [
      '--name', 'pgx-test', '--data-dir', path.join(dir, 'etcd'),
      '--listen-client-urls', etcdUrl, '--advertise-client-urls', etcdUrl,
      '--listen-peer-urls', `http://127.0.0.1:${etcdPeer}`, '--initial-advertise-peer-urls', `http://127.0.0.1:${etcdPeer}`,
      '--initial-cluster', `pgx-test=http://127.0.0.1:${etcdPeer}`,
      '--log-level', 'warn',
    ]));
    running.add(procs[0]!);
    await until('etcd', procs, dir, 60_000, async () => (await fetch(`${etcdUrl}/health`).then((r) => r.ok, () => false)));

    fs.writeFileSync(path.join(dir, 'audit-policy.yaml'), AUDIT_POLICY);
    const url = `https://127.0.0.1:${apiPort}`;
    procs.push(start(dir, 'kube-apiserver', [
      '--etcd-servers', etcdUrl,
      '--bind-address', '127.0.0.1', '--advertise-address', '127.0.0.1', '--secure-port', String(apiPort),
      '--cert-dir', path.join(dir, 'apiserver-certs'),
      '--tls-cert-file', pki.serverCert, '--tls-private-key-file', pki.serverKey,
      '--client-ca-file', pki.caCert,
      '--service-account-issuer', 'https://kubernetes.default.svc.cluster.local',
      '--service-account-key-file', pki.saPub, '--service-account-signing-key-file', pki.saKey,
      // ClusterIPs are only allocated from this range; nothing is ever sent to them.
      '--service-cluster-ip-range', '10.96.0.0/16',
      '--authorization-mode', 'RBAC',
      // The `kubernetes` Service's endpoints would be 127.0.0.1, which Endpoints validation refuses.
      '--endpoint-reconciler-type', 'none',
      '--audit-policy-file', path.join(dir, 'audit-policy.yaml'), '--audit-log-path', path.join(dir, 'audit.log'), '--audit-log-format', 'json', '--audit-log-mode', 'blocking',
      '--profiling=false',
    ]));
    running.add(procs[1]!);
    await until('kube-apiserver /readyz', procs, dir, 120_000, async () => (await adminGet(url, pki, '/readyz')).code === 200);

    const kcmKubeconfig = path.join(dir, 'kcm.kubeconfig');
    fs.writeFileSync(kcmKubeconfig, certKubeconfig(url, pki, pki.kcmCert, pki.kcmKey, 'kube-system'), { mode: 0o600 });
    procs.push(start(dir, 'kube-controller-manager', [
      '--kubeconfig', kcmKubeconfig,
      '--secure-port', '0',
      '--controllers', '*',
      '--use-service-account-credentials',
      '--service-account-private-key-file', pki.saKey,
      '--root-ca-file', pki.caCert,
      '--cluster-signing-cert-file', pki.caCert, '--cluster-signing-key-file', pki.caKey,
      '--leader-elect=false',
    ]));
    running.add(procs[2]!);
    // The ServiceAccount controller made `default` in default: the controller manager is working.
    await until('the controller manager (ServiceAccount default/default)', procs, dir, 120_000, async () => (await adminGet(url, pki, '/api/v1/namespaces/default/serviceaccounts/default')).code === 200);

    const adminKubeconfig = path.join(dir, 'admin.kubeconfig');
    fs.writeFileSync(adminKubeconfig, certKubeconfig(url, pki, pki.adminCert, pki.adminKey), { mode: 0o600 });
    const audit = auditReader(path.join(dir, 'audit.log'));
    return {
      url,
      dir,
      pki,
      adminKubeconfig,
      kubeConfig() {
        const kc = new KubeConfig();
        kc.loadFromFile(adminKubeconfig);
        return kc;
      },
      requests: audit,
      pids: { etcd: procs[0]!.child.pid!, apiserver: procs[1]!.child.pid!, controllerManager: procs[2]!.child.pid! },
      stop,
    };
  } catch (err) {
    await stop();
    throw err;
  }
}

/** Reads the audit log incrementally (it only grows): every call parses what was appended since the last. */
function auditReader(file: string): () => AuditRecord[] {
  const records: AuditRecord[] = [];
  let offset = 0;
  let partial = '';
  return () => {
    let fd: number;
    try {
      fd = fs.openSync(file, 'r');
    } catch {
      return records;
    }
    try {
      const size = fs.fstatSync(fd).size;
      if (size > offset) {
        const buf = Buffer.alloc(size - offset);
        fs.readSync(fd, buf, 0, buf.length, offset);
        offset = size;
        const lines = (partial + buf.toString('utf8')).split('\n');
        partial = lines.pop() ?? '';
        for (const line of lines) {
          if (!line) continue;
          const e = JSON.parse(line) as { requestReceivedTimestamp?: string; stageTimestamp?: string; verb: string; user: { username: string }; objectRef?: { resource?: string; subresource?: string; apiGroup?: string; namespace?: string; name?: string }; responseStatus?: { code?: number } };
          if (!e.objectRef?.resource) continue;
          records.push({
            verb: e.verb,
            user: e.user.username,
            resource: e.objectRef.resource,
            ...(e.objectRef.subresource ? { subresource: e.objectRef.subresource } : {}),
            apiGroup: e.objectRef.apiGroup ?? '',
            namespace: e.objectRef.namespace ?? null,
            ...(e.objectRef.name ? { name: e.objectRef.name } : {}),
            code: e.responseStatus?.code ?? 0,
            ms: e.requestReceivedTimestamp && e.stageTimestamp ? micros(e.stageTimestamp) - micros(e.requestReceivedTimestamp) : 0,
          });
        }
      }
    } finally {
      fs.closeSync(fd);
    }
    return records;
  };
}

/** An audit timestamp (RFC 3339 with microseconds) in milliseconds, keeping the microseconds Date drops. */
function micros(ts: string): number {
  const m = /\.(\d+)Z$/.exec(ts);
  const frac = m ? Number(`0.${m[1]}`) * 1000 : 0;
  return Date.parse(ts.replace(/\.\d+Z$/, 'Z')) + frac;
}
