// TLS and metrics on runtime pods the real control plane runs: a Runtime with spec.tls whose
// kubernetes.io/tls Secret holds a certificate made here with openssl for the pod DNS names Branch
// Secrets give (*.<runtime>-pods.<namespace>.svc.cluster.local); the StatefulSet's pods (admitted under
// the restricted profile) start with it mounted; a Branch's Secret says verify-full with the CA, and
// psql connects through it with the host name verified (hostaddr standing in for cluster DNS). The same
// pods serve /metrics on the port named metrics without the API token, and nothing else there.

import { execFileSync } from 'node:child_process';
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Operator } from '../../src/operator/operator.js';
import { runCommand } from '../helpers/commands.js';
import { apply, RESTRICTED_NAMESPACE, startCluster, startOperator, statusOf, stopCluster, waitFor, waitForCondition, type Cluster } from './harness.js';
import { plane } from './hooks.js';

const NS = 'tls-e2e';
const RUNTIME = 'secure';

/** A CA and a server certificate for every pod of the Runtime, made with openssl as a platform team would. */
function makeCertificates(dir: string): { ca: string; cert: string; key: string } {
  const f = (name: string): string => path.join(dir, name);
  const openssl = (...args: string[]): void => void execFileSync('openssl', args, { stdio: 'pipe' });
  openssl('req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-days', '1', '-subj', '/CN=pgx test CA', '-keyout', f('ca.key'), '-out', f('ca.crt'));
  const host = `*.${RUNTIME}-pods.${NS}.svc.cluster.local`;
  openssl('req', '-newkey', 'rsa:2048', '-nodes', '-subj', `/CN=${host}`, '-keyout', f('tls.key'), '-out', f('tls.csr'));
  fs.writeFileSync(f('ext.cnf'), `subjectAltName=DNS:${host}\nextendedKeyUsage=serverAuth\n`);
  openssl('x509', '-req', '-in', f('tls.csr'), '-CA', f('ca.crt'), '-CAkey', f('ca.key'), '-CAcreateserial', '-days', '1', '-extfile', f('ext.cnf'), '-out', f('tls.crt'));
  const read = (name: string): string => fs.readFileSync(f(name), 'utf8');
  return { ca: read('ca.crt'), cert: read('tls.crt'), key: read('tls.key') };
}

describe('operator on a real cluster: TLS from the Runtime to Branch Secrets, and metrics without the token', function () {
  this.timeout(300_000);
  let c: Cluster;
  let op: Operator;
  let dir: string;

  before(async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgx-kube-tls-'));
    c = await startCluster(NS, plane().cp, RESTRICTED_NAMESPACE);
    op = await startOperator(c);
    await waitFor('leadership', async () => (op.isLeader ? true : null));
  });

  after(async function () {
    await op?.stop();
    await stopCluster(c);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('serves TLS with the Runtime\'s Secret, and a Branch Secret connects with sslmode verify-full', async function () {
    const pem = makeCertificates(dir);
    const b64 = (s: string): string => Buffer.from(s).toString('base64');
    await c.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'secure-tls' }, type: 'kubernetes.io/tls', data: { 'tls.crt': b64(pem.cert), 'tls.key': b64(pem.key), 'ca.crt': b64(pem.ca) } } });
    await apply(c, 'runtimes', {
      apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: RUNTIME },
      spec: { replicas: 1, image: 'ghcr.io/pgx/pgx:0.1.0', storage: { size: '1Gi' }, engine: { poolSize: 0, grace: '2s' }, tls: { secretName: 'secure-tls' } },
    });
    await waitForCondition(c, 'runtimes', RUNTIME, 'Ready', 'AllPodsReady', 180_000);
    await apply(c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: RUNTIME }, source: { sql: "CREATE TABLE items (label text); INSERT INTO items VALUES ('one');" } } });
    await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');
    await apply(c, 'branches', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: 'app-pr' }, spec: { templateRef: { name: 'app' } } });
    const s = statusOf<{ secretName?: string }>(await waitForCondition(c, 'branches', 'app-pr', 'Ready', 'DatabaseReady'));
    const secret = await c.core.readNamespacedSecret({ name: s.secretName!, namespace: NS });
    const data = Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
    expect(data.sslmode).to.equal('verify-full');
    expect(data['ca.crt']).to.equal(pem.ca);
    expect(data.host).to.equal(`${RUNTIME}-0.${RUNTIME}-pods.${NS}.svc.cluster.local`);
    fs.writeFileSync(path.join(dir, 'branch-ca.crt'), data['ca.crt']!);
    // The host name is verified against the certificate; hostaddr is where cluster DNS would send it.
    const env = {
      PATH: process.env.PATH,
      PGHOST: data.host, PGHOSTADDR: await plane().node.resolve(data.host!), PGPORT: data.port, PGDATABASE: data.dbname, PGUSER: data.user, PGPASSWORD: data.password,
      PGSSLMODE: data.sslmode, PGSSLROOTCERT: path.join(dir, 'branch-ca.crt'),
    };
    const ok = await runCommand('psql', ['-X', '-At', '-c', 'SELECT label FROM items'], { env });
    expect(ok.stderr).to.equal('');
    expect(ok.stdout.trim()).to.equal('one');
    // A name the certificate does not hold is refused under verify-full: the check is real.
    const wrong = await runCommand('psql', ['-X', '-At', '-c', 'SELECT 1'], { env: { ...env, PGHOST: `elsewhere.${NS}.svc.cluster.local` } });
    expect(wrong.code).to.not.equal(0);
    expect(wrong.stderr).to.match(/does not match host name/);
  });

  it('serves /metrics on the pod port named metrics without the token, and no control route there', async function () {
    const pod = await c.core.readNamespacedPod({ name: `${RUNTIME}-0`, namespace: NS });
    const port = pod.spec!.containers[0]!.ports!.find((p) => p.name === 'metrics')!.containerPort;
    const ip = pod.status!.podIP!;
    const metrics = await fetch(`http://${ip}:${port}/metrics`);
    expect(metrics.status).to.equal(200);
    expect(await metrics.text()).to.match(/^pgx_/m);
    expect((await fetch(`http://${ip}:${port}/v1/status`)).status).to.equal(404);
    expect((await fetch(`http://${ip}:7432/metrics`)).status).to.equal(401);
  });
});
