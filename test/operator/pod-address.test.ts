// Where the operator reaches a runtime pod, and so where it sends the Runtime's API token: the pod's IP,
// unless the operator was started with --pod-address-overrides, the only case in which the pod
// annotations pgx.dev/api-url, engine-host and engine-port count. Anyone who may patch a pod's
// annotations must not be able to have the token sent to a server of their own.

import { expect } from 'chai';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { V1Pod } from '@kubernetes/client-node';
import { MERGE_PATCH } from '../../src/operator/kube.js';
import type { Operator } from '../../src/operator/operator.js';
import { API_TOKEN_KEY, API_URL_ANNOTATION, DEFAULT_POD_NETWORK, ENGINE_HOST_ANNOTATION, ENGINE_PORT_ANNOTATION, podApiUrl, podEngineEndpoint, RUNTIME_LABEL, runtimeSecretName } from '../../src/operator/pods.js';
import { apply, NS, startCluster, startOperator, stopCluster, TOKEN, waitFor, type Cluster } from './harness.js';

/** An HTTP server that records the Authorization header of every request and answers 503. */
async function recorder(): Promise<{ port: number; tokens: string[]; close: () => Promise<void> }> {
  const tokens: string[] = [];
  const server = http.createServer((req, res) => {
    tokens.push(req.headers.authorization ?? '');
    res.writeHead(503, { 'content-type': 'application/json' }).end('{"code":"UNAVAILABLE","message":"a recorder"}');
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { port: (server.address() as AddressInfo).port, tokens, close: () => new Promise<void>((resolve) => server.close(() => resolve())) };
}

const annotated = (apiUrl: string): V1Pod => ({
  metadata: { name: 'main-0', namespace: NS, labels: { [RUNTIME_LABEL]: 'main' }, annotations: { [API_URL_ANNOTATION]: apiUrl, [ENGINE_HOST_ANNOTATION]: 'evil.example', [ENGINE_PORT_ANNOTATION]: '1' } },
  status: { podIP: '10.1.2.3' },
});

describe('operator: where runtime pods are reached (pod address annotations only with --pod-address-overrides)', function () {
  this.timeout(60_000);

  it('ignores the annotations by default: the API at the pod IP, the engine at its DNS name', () => {
    const pod = annotated('http://evil.example:80');
    expect(podApiUrl(pod, DEFAULT_POD_NETWORK)).to.equal('http://10.1.2.3:7432');
    expect(podEngineEndpoint(pod, DEFAULT_POD_NETWORK)).to.deep.equal({ host: 'main-0.main-pods.default.svc.cluster.local', port: 6432 });
    const on = { ...DEFAULT_POD_NETWORK, addressOverrides: true };
    expect(podApiUrl(pod, on)).to.equal('http://evil.example:80');
    expect(podEngineEndpoint(pod, on)).to.deep.equal({ host: 'evil.example', port: 1 });
  });

  it("sends the Runtime's API token to the pod IP, never to the server an annotation names, unless overrides are on", async () => {
    const c: Cluster = await startCluster();
    const atIp = await recorder(); // what the pod IP 127.0.0.1 answers on the API port
    const decoy = await recorder(); // what the annotation names
    let op: Operator | undefined;
    try {
      await apply(c, 'runtimes', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main' }, spec: { replicas: 1, image: 'ghcr.io/pgx/runtime:test' } });
      await c.core.createNamespacedSecret({ namespace: NS, body: { metadata: { name: runtimeSecretName('main') }, stringData: { [API_TOKEN_KEY]: TOKEN } } });
      const pod = annotated(`http://127.0.0.1:${decoy.port}`);
      await c.core.createNamespacedPod({ namespace: NS, body: { metadata: pod.metadata!, spec: { containers: [{ name: 'runtime', image: 'ghcr.io/pgx/runtime:test' }] } } });
      await c.core.patchNamespacedPodStatus({ name: 'main-0', namespace: NS, body: { status: { phase: 'Running', podIP: '127.0.0.1', conditions: [{ type: 'Ready', status: 'True' }] } } }, MERGE_PATCH);

      // The Runtime controller asks each pod for its /v1/status.
      op = await startOperator(c, { network: { apiPort: atIp.port, addressOverrides: false } });
      await waitFor('a request at the pod IP', async () => (atIp.tokens.length > 0 ? true : null));
      await op.idle();
      expect(atIp.tokens[0]).to.equal(`Bearer ${TOKEN}`);
      expect(decoy.tokens, 'the annotation was followed').to.deep.equal([]);
      await op.stop();

      // The harness's setting: the annotation is where the pod is.
      op = await startOperator(c, { network: { apiPort: atIp.port, addressOverrides: true } });
      await waitFor('a request at the annotated URL', async () => (decoy.tokens.length > 0 ? true : null));
      expect(decoy.tokens[0]).to.equal(`Bearer ${TOKEN}`);
    } finally {
      await op?.stop();
      await atIp.close();
      await decoy.close();
      await stopCluster(c);
    }
  });
});
