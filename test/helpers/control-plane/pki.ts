// The control plane's certificates and keys, made with the openssl CLI into a fresh directory, as
// kubeadm would: a CA, the API server's serving certificate (127.0.0.1, localhost), client
// certificates for the cluster admin (O=system:masters) and the controller manager
// (CN=system:kube-controller-manager, which the API server's bootstrap RBAC binds), and the
// service-account signing key pair. Nothing here is a secret outside the test run.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';

export interface Pki {
  dir: string;
  caCert: string;
  caKey: string;
  serverCert: string;
  serverKey: string;
  adminCert: string;
  adminKey: string;
  kcmCert: string;
  kcmKey: string;
  saKey: string;
  saPub: string;
}

function openssl(dir: string, ...args: string[]): void {
  execFileSync('openssl', args, { cwd: dir, stdio: ['ignore', 'ignore', 'pipe'] });
}

/** A key and a certificate signed by the CA; `ext` is an openssl extension section's lines. */
function signed(dir: string, name: string, subject: string, ext: string[]): void {
  openssl(dir, 'req', '-new', '-newkey', 'rsa:2048', '-nodes', '-keyout', `${name}.key`, '-subj', subject, '-out', `${name}.csr`);
  fs.writeFileSync(path.join(dir, `${name}.ext`), ext.join('\n') + '\n');
  openssl(dir, 'x509', '-req', '-in', `${name}.csr`, '-CA', 'ca.crt', '-CAkey', 'ca.key', '-CAcreateserial', '-days', '2', '-sha256', '-extfile', `${name}.ext`, '-out', `${name}.crt`);
}

export function makePki(dir: string): Pki {
  fs.mkdirSync(dir, { recursive: true });
  openssl(dir, 'req', '-x509', '-newkey', 'rsa:2048', '-nodes', '-keyout', 'ca.key', '-out', 'ca.crt', '-days', '2', '-subj', '/CN=pgx-test-ca', '-addext', 'basicConstraints=critical,CA:TRUE', '-addext', 'keyUsage=critical,keyCertSign,cRLSign');
  signed(dir, 'apiserver', '/CN=kube-apiserver', ['basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment', 'extendedKeyUsage=serverAuth', 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc']);
  const client = ['basicConstraints=CA:FALSE', 'keyUsage=critical,digitalSignature,keyEncipherment', 'extendedKeyUsage=clientAuth'];
  signed(dir, 'admin', '/O=system:masters/CN=pgx-test-admin', client);
  signed(dir, 'kcm', '/CN=system:kube-controller-manager', client);
  openssl(dir, 'genrsa', '-out', 'sa.key', '2048');
  openssl(dir, 'rsa', '-in', 'sa.key', '-pubout', '-out', 'sa.pub');
  const p = (f: string) => path.join(dir, f);
  return {
    dir,
    caCert: p('ca.crt'),
    caKey: p('ca.key'),
    serverCert: p('apiserver.crt'),
    serverKey: p('apiserver.key'),
    adminCert: p('admin.crt'),
    adminKey: p('admin.key'),
    kcmCert: p('kcm.crt'),
    kcmKey: p('kcm.key'),
    saKey: p('sa.key'),
    saPub: p('sa.pub'),
  };
}

/** A kubeconfig with a client certificate (embedded, as `kubectl config view --raw --flatten` shows one). */
export function certKubeconfig(server: string, pki: Pki, cert: string, key: string, namespace = 'default'): string {
  const b64 = (f: string) => fs.readFileSync(f).toString('base64');
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'pgx-test', cluster: { server, 'certificate-authority-data': b64(pki.caCert) } }],
    users: [{ name: 'pgx-test-user', user: { 'client-certificate-data': b64(cert), 'client-key-data': b64(key) } }],
    contexts: [{ name: 'pgx-test', context: { cluster: 'pgx-test', user: 'pgx-test-user', namespace } }],
    'current-context': 'pgx-test',
  }, null, 2) + '\n';
}

/** A kubeconfig with a bearer token (a ServiceAccount's, from the TokenRequest API). */
export function tokenKubeconfig(server: string, pki: Pki, token: string, namespace: string): string {
  return JSON.stringify({
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'pgx-test', cluster: { server, 'certificate-authority-data': fs.readFileSync(pki.caCert).toString('base64') } }],
    users: [{ name: 'pgx-test-sa', user: { token } }],
    contexts: [{ name: 'pgx-test', context: { cluster: 'pgx-test', user: 'pgx-test-sa', namespace } }],
    'current-context': 'pgx-test',
  }, null, 2) + '\n';
}
