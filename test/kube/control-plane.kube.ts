// The control plane itself, before anything of ours runs on it: the API server answers kubectl as the
// admin and reports the Kubernetes version it was built from, the controller manager's controllers
// work (the ServiceAccount controller made `default`; the StatefulSet controller makes Pods and the
// test node runs them), our CRDs are served, and RBAC is in force for a ServiceAccount.

import { expect } from 'chai';
import { AppsV1Api, CoreV1Api, KubeConfig } from '@kubernetes/client-node';
import { tokenKubeconfig } from '../helpers/control-plane/pki.js';
import { kubectl, plane } from './hooks.js';
import { waitFor } from './harness.js';

describe('the control plane (etcd, kube-apiserver, kube-controller-manager)', function () {
  this.timeout(120_000);

  it('answers kubectl get ns, as the admin, with the namespaces the API server makes', function () {
    const out = kubectl('get', 'ns');
    expect(out).to.match(/^NAME\s+STATUS\s+AGE/);
    for (const ns of ['default', 'kube-system', 'kube-public', 'kube-node-lease']) expect(out).to.match(new RegExp(`^${ns}\\s+Active`, 'm'));
  });

  it('reports the release it was built from', function () {
    const v = JSON.parse(kubectl('version', '-o', 'json')) as { serverVersion: { gitVersion: string; major: string; minor: string } };
    expect(v.serverVersion).to.include({ gitVersion: 'v1.36.3', major: '1', minor: '36' });
  });

  it('serves our CRDs, with their printer columns', function () {
    // "No resources found" goes to stderr; stdout is empty.
    expect(kubectl('get', 'branches', '-A')).to.equal('');
    expect(kubectl('api-resources', '--api-group=pgx.dev')).to.contain('branches').and.contain('templates').and.contain('runtimes');
  });

  it('refuses a ServiceAccount with no role (RBAC)', async function () {
    const { cp } = plane();
    const core = cp.kubeConfig().makeApiClient(CoreV1Api);
    await core.createNamespacedServiceAccount({ namespace: 'default', body: { metadata: { name: 'nobody' } } });
    const tr = await core.createNamespacedServiceAccountToken({ name: 'nobody', namespace: 'default', body: { spec: { audiences: [], expirationSeconds: 600 } } });
    const kc = new KubeConfig();
    kc.loadFromString(tokenKubeconfig(cp.url, cp.pki, tr.status!.token!, 'default'));
    const err = await kc.makeApiClient(CoreV1Api).listNamespacedSecret({ namespace: 'default' }).then(() => null, (e: { code?: number }) => e);
    expect(err?.code).to.equal(403);
    await core.deleteNamespacedServiceAccount({ name: 'nobody', namespace: 'default' });
  });

  it('runs a StatefulSet: the controller manager makes the Pod, the test node binds and runs it, and the Pod turns Ready', async function () {
    const { cp, node } = plane();
    const kc = cp.kubeConfig();
    const apps = kc.makeApiClient(AppsV1Api);
    const core = kc.makeApiClient(CoreV1Api);
    // A runtime with no Runtime object around it: the container args the operator renders, reduced.
    await apps.createNamespacedStatefulSet({
      namespace: 'default',
      body: {
        metadata: { name: 'smoke' },
        spec: {
          serviceName: 'smoke',
          replicas: 1,
          selector: { matchLabels: { app: 'smoke' } },
          template: {
            metadata: { labels: { app: 'smoke' } },
            spec: {
              containers: [{
                name: 'runtime',
                image: 'ghcr.io/pgx/pgx:0.1.0',
                args: ['start', '--data-dir', '/var/lib/pgx/data', '--host', '0.0.0.0', '--port', '6432', '--socket-dir', '', '--api-port', '7432', '--api-host', '0.0.0.0', '--pool-size', '0'],
                readinessProbe: { httpGet: { path: '/readyz', port: 7432 } },
                volumeMounts: [{ name: 'data', mountPath: '/var/lib/pgx' }],
              }],
            },
          },
          volumeClaimTemplates: [{ metadata: { name: 'data' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } } } }],
        },
      },
    });
    const pod = await waitFor('smoke-0 Ready', async () => {
      const p = await core.readNamespacedPod({ name: 'smoke-0', namespace: 'default' }).catch(() => null);
      return p?.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ? p : null;
    }, 90_000);
    expect(pod.spec?.nodeName).to.equal('pgx-test-node');
    expect(pod.status?.podIP).to.equal(node.podIp('default', 'smoke-0'));
    expect((await fetch(`http://${pod.status!.podIP}:7432/healthz`)).ok).to.equal(true);
    // Deleting the StatefulSet: the garbage collector deletes the Pod, the node stops its process.
    await apps.deleteNamespacedStatefulSet({ name: 'smoke', namespace: 'default' });
    await waitFor('smoke-0 gone', async () => ((await core.readNamespacedPod({ name: 'smoke-0', namespace: 'default' }).then(() => false, () => true)) ? true : null), 90_000);
    await waitFor('the process stopped', async () => (node.podIp('default', 'smoke-0') === undefined ? true : null));
  });
});
