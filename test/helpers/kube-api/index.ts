// The Kubernetes API server test double: the one test double this project allows (see README.md here).
// startKubeApi() serves HTTPS on 127.0.0.1 with a fresh test CA, installs the pgx.dev CRDs from crds/
// (as `kubectl apply -f crds/` would), and writes a kubeconfig that @kubernetes/client-node loads with
// KubeConfig.loadFromFile, unmodified and with TLS verified.

import { KubeConfig } from '@kubernetes/client-node';
import fs from 'node:fs';
import path from 'node:path';
import crypto from 'node:crypto';
import { fileURLToPath } from 'node:url';
import { parseAllDocuments } from 'yaml';
import { systemClock, type Clock } from '../../../src/clock.js';
import type { Json, JsonObject } from './patch.js';
import { isWrite, KubeApiServer, type RequestRecord } from './server.js';
import { serviceAccountUser } from './rbac.js';
import { ObjectStore } from './store.js';
import { makeTestTls } from './tls.js';
import { scratchDir } from '../scratch.js';

export { isWrite, type RequestRecord } from './server.js';
export { authorize, ruleAllows, rulesFor, serviceAccountUser, type RequestAttributes, type UserInfo } from './rbac.js';
export { ObjectStore, StatusError } from './store.js';
export type { Json, JsonObject } from './patch.js';

export interface KubeApiOptions {
  /** Bearer token clients must send; random by default. */
  token?: string;
  /** Directory of CRD YAML to install at start; default the checkout's crds/. null installs none. */
  crdDir?: string | null;
  clock?: Clock;
  /** Changes kept for watches resuming from a resourceVersion; older ones get 410 Gone. */
  historyLimit?: number;
  /** The namespace of the kubeconfig context. Default "default". */
  namespace?: string;
}

export interface KubeApi {
  /** https://127.0.0.1:PORT */
  url: string;
  token: string;
  /** A kubeconfig file (in a temp dir) with the server, its CA and the token. */
  kubeconfigPath: string;
  caPem: string;
  store: ObjectStore;
  /** Every request served, in order. */
  requests: RequestRecord[];
  /** TLS connections accepted so far. */
  connections(): number;
  /** A client-side KubeConfig loaded from kubeconfigPath: the cluster admin (system:masters), allowed everything. */
  kubeConfig(): KubeConfig;
  /**
   * A KubeConfig with a new token for the service account `namespace/name` (as a pod's projected token):
   * its requests are allowed only what the Roles and ClusterRoles bound to the account allow (403
   * otherwise), and it is refused (401) while the ServiceAccount object does not exist.
   */
  serviceAccountKubeConfig(namespace: string, name: string): KubeConfig;
  /** Requests that wrote (create, update, patch, delete), optionally only for one resource (plural). */
  writes(resource?: string): RequestRecord[];
  /** Ends open watch streams, as an API server restart or a load balancer would. */
  endWatches(): void;
  close(): Promise<void>;
}

const checkoutRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../..');

export async function startKubeApi(opts: KubeApiOptions = {}): Promise<KubeApi> {
  const token = opts.token ?? crypto.randomBytes(24).toString('base64url');
  const tls = makeTestTls();
  const store = new ObjectStore(opts.clock ?? systemClock, opts.historyLimit);
  const crdDir = opts.crdDir === undefined ? path.join(checkoutRoot, 'crds') : opts.crdDir;
  if (crdDir !== null) {
    const crdType = store.typeFor('apiextensions.k8s.io', 'v1', 'customresourcedefinitions')!;
    for (const file of fs.readdirSync(crdDir).filter((f) => f.endsWith('.yaml')).sort()) {
      // Raw YAML on purpose: client-node's loadYaml turns objects into its typed models (x-kubernetes-* keys renamed).
      for (const doc of parseAllDocuments(fs.readFileSync(path.join(crdDir, file), 'utf8'))) store.create(crdType, '', doc.toJSON() as Json);
    }
  }
  const server = new KubeApiServer({ store, token, certPem: tls.certPem, keyPem: tls.keyPem });
  const port = await server.listen();
  const url = `https://127.0.0.1:${port}`;
  const dir = scratchDir('pgx-kube-');
  const kubeconfigPath = path.join(dir, 'kubeconfig');
  fs.writeFileSync(kubeconfigPath, kubeconfig(url, tls.caPem, token, opts.namespace ?? 'default'), { mode: 0o600 });
  return {
    url,
    token,
    kubeconfigPath,
    caPem: tls.caPem,
    store,
    requests: server.requests,
    connections: () => server.connections,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromFile(kubeconfigPath);
      return kc;
    },
    serviceAccountKubeConfig(namespace: string, name: string) {
      const saToken = crypto.randomBytes(24).toString('base64url');
      server.addToken(saToken, serviceAccountUser(namespace, name));
      const kc = new KubeConfig();
      kc.loadFromString(kubeconfig(url, tls.caPem, saToken, namespace));
      return kc;
    },
    writes(resource?: string) {
      return server.requests.filter((r) => isWrite(r) && (resource === undefined || r.resource === resource || r.resource === `${resource}/status`));
    },
    endWatches: () => server.endWatches(),
    async close() {
      await server.close();
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** A kubeconfig as `kubectl config view --raw` prints one: cluster with CA data, token user, context. */
function kubeconfig(server: string, caPem: string, token: string, namespace: string): string {
  const doc: JsonObject = {
    apiVersion: 'v1',
    kind: 'Config',
    clusters: [{ name: 'pgx-test', cluster: { server, 'certificate-authority-data': Buffer.from(caPem).toString('base64') } }],
    users: [{ name: 'pgx-test-operator', user: { token } }],
    contexts: [{ name: 'pgx-test', context: { cluster: 'pgx-test', user: 'pgx-test-operator', namespace } }],
    'current-context': 'pgx-test',
  };
  return JSON.stringify(doc, null, 2) + '\n'; // JSON is YAML
}
