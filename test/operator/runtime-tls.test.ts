// TLS to clients on a Runtime with spec.tls, on the API double with a real runtime started with the
// certificate the Runtime's kubernetes.io/tls Secret holds: the Branch Secret says sslmode verify-full
// and carries the CA as ca.crt, and real psql connects through it with the host verified; a CA that did
// not sign the certificate is refused (so the verification is real); a TLS Secret without ca.crt gives
// sslmode require. A Runtime without spec.tls keeps sslmode disable (branch-lifecycle.test.ts).

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import type { Operator } from '../../src/operator/operator.js';
import { runCommand } from '../helpers/commands.js';
import { makeTestTls } from '../helpers/kube-api/tls.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { apply, makePod, NS, remove, startCluster, startOperator, statusOf, stopCluster, TOKEN, waitFor, waitForCondition, waitForGone, type Cluster } from './harness.js';
import { API_TOKEN_KEY, runtimeSecretName } from '../../src/operator/pods.js';
import { scratchDir } from '../helpers/scratch.js';

const SCHEMA = "CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'one');";
const b64 = (s: string): string => Buffer.from(s).toString('base64');

describe('operator: TLS from the Runtime to Branch Secrets', function () {
  this.timeout(180_000);
  let c: Cluster;
  let rt: TestRuntime;
  let op: Operator;
  let dir: string;
  const tls = makeTestTls();

  before(async function () {
    dir = scratchDir('pgx-op-tls-');
    fs.writeFileSync(path.join(dir, 'server.pem'), tls.certPem);
    fs.writeFileSync(path.join(dir, 'server.key'), tls.keyPem, { mode: 0o600 });
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, tlsCert: path.join(dir, 'server.pem'), tlsKey: path.join(dir, 'server.key') });
    c = await startCluster();
    // The Runtime's TLS Secret as cert-manager writes one: tls.crt, tls.key and ca.crt.
    await c.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: 'main-tls' }, type: 'kubernetes.io/tls', data: { 'tls.crt': b64(tls.certPem), 'tls.key': b64(tls.keyPem), 'ca.crt': b64(tls.caPem) } } });
    await apply(c, 'runtimes', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main' }, spec: { replicas: 1, image: 'ghcr.io/pgx/runtime:test', tls: { secretName: 'main-tls' } } });
    await c.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: runtimeSecretName('main') }, stringData: { [API_TOKEN_KEY]: TOKEN } } });
    await makePod(c, 'main', 'main-0', rt);
    op = await startOperator(c);
    await waitFor('leadership', async () => (op.isLeader ? true : null));
    await apply(c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: 'main' }, source: { sql: SCHEMA } } });
    await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');
  });

  after(async function () {
    await op?.stop();
    await rt?.stop();
    await stopCluster(c);
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  const secretOf = async (branch: string): Promise<Record<string, string>> => {
    await apply(c, 'branches', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: branch }, spec: { templateRef: { name: 'app' } } });
    const s = statusOf<{ secretName?: string }>(await waitForCondition(c, 'branches', branch, 'Ready', 'DatabaseReady'));
    const secret = await c.core.readNamespacedSecret({ name: s.secretName!, namespace: NS });
    return Object.fromEntries(Object.entries(secret.data ?? {}).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
  };

  /** psql with the Secret's uri, as an app mounting ca.crt would run it. */
  const psql = (uri: string, env: Record<string, string>) => runCommand('psql', ['-X', '-At', '-d', uri, '-c', 'SELECT label FROM items'], { env: { PATH: process.env.PATH, ...env } });

  it('gives the Secret sslmode verify-full and the CA, and psql verifies the pod through them', async function () {
    const data = await secretOf('secure');
    expect(data.sslmode).to.equal('verify-full');
    expect(data['ca.crt']).to.equal(tls.caPem);
    expect(data.host).to.equal('127.0.0.1');
    // uri stays plain, as CloudNativePG's: libpq takes the mode and the CA from the environment.
    expect(data.uri).to.not.match(/sslmode/);
    expect(data.DATABASE_URL).to.equal(data.uri);
    expect(data['jdbc-uri']).to.match(/&sslmode=require$/);
    const caFile = path.join(dir, 'ca.crt');
    fs.writeFileSync(caFile, data['ca.crt']!);
    const verified = await psql(data.uri!, { PGSSLMODE: data.sslmode!, PGSSLROOTCERT: caFile });
    expect(verified.stderr).to.equal('');
    expect(verified.stdout.trim()).to.equal('one');
    // Another CA does not verify this pod's certificate: the check is real.
    const otherCa = path.join(dir, 'other-ca.crt');
    fs.writeFileSync(otherCa, makeTestTls().caPem);
    const refused = await psql(data.uri!, { PGSSLMODE: data.sslmode!, PGSSLROOTCERT: otherCa });
    expect(refused.code).to.not.equal(0);
    expect(refused.stderr).to.match(/certificate verify failed/);
    await remove(c, 'branches', 'secure');
    await waitForGone(c, 'branches', 'secure');
  });

  it('says sslmode require, with no ca.crt, when the TLS Secret has no CA', async function () {
    await c.core.replaceNamespacedSecret({ name: 'main-tls', namespace: NS, body: { metadata: { name: 'main-tls' }, type: 'kubernetes.io/tls', data: { 'tls.crt': b64(tls.certPem), 'tls.key': b64(tls.keyPem) } } });
    const data = await secretOf('encrypted');
    expect(data.sslmode).to.equal('require');
    expect(data).to.not.have.property('ca.crt');
    const r = await psql(data.uri!, { PGSSLMODE: data.sslmode! });
    expect(r.stdout.trim()).to.equal('one');
    await remove(c, 'branches', 'encrypted');
    await waitForGone(c, 'branches', 'encrypted');
  });
});
