// Every object we ship or render validates against the Kubernetes OpenAPI definitions of a current
// release (v1.36: kubernetes-models 5.1.0 and @kubernetes/client-node 2.0.1, see openapi.ts), and our
// own kinds against the CRDs' openAPIV3Schema: the Helm chart rendered by the real helm with several
// value sets, the kustomize base and examples built by the real kubectl, the objects the Runtime
// controller and the Branch controller create, and the Branch the GitHub Actions example applies. An
// unknown kind fails. The validator itself is shown to refuse bad objects, so a pass means something.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { parse as parseYaml } from 'yaml';
import { branchSecret } from '../../src/operator/controllers/branch-secret.js';
import { clientService, disruptionBudget, headlessService, runtimeSecret, statefulSet } from '../../src/operator/controllers/runtime-objects.js';
import { parseObject, runtime as runtimeSchema, type Runtime } from '../../src/operator/crds/index.js';
import type { CustomObject } from '../../src/operator/kube.js';
import { DEFAULT_POD_NETWORK } from '../../src/operator/pods.js';
import type { JsonObject } from '../helpers/kube-api/patch.js';
import { helm, kustomize, root, yamlObjects } from './kube-tools.js';
import { allProblems, KUBERNETES_RELEASE, objectProblems, ourKinds } from './openapi.js';
import { scratchDir } from '../helpers/scratch.js';

const kinds = (objs: JsonObject[]): string[] => objs.map((o) => String(o.kind)).sort();

describe(`OpenAPI validation against Kubernetes ${KUBERNETES_RELEASE} and our CRDs`, function () {
  this.timeout(60_000);
  const tmp = scratchDir('pgx-openapi-');
  after(() => fs.rmSync(tmp, { recursive: true, force: true }));

  describe('the validator', () => {
    const deployment = (): JsonObject => yamlObjects(fs.readFileSync(path.join(root, 'manifests/base/deployment.yaml'), 'utf8'))[0]!;
    const container = (d: JsonObject): JsonObject => ((((d.spec as JsonObject).template as JsonObject).spec as JsonObject).containers as JsonObject[])[0]!;

    it('passes a valid object', async () => {
      expect(await objectProblems(deployment())).to.deep.equal([]);
    });

    it('refuses a wrong type, a missing required field and a bad enum value (kubernetes-models)', async () => {
      const d = deployment();
      (container(d).ports as JsonObject[])[0]!.containerPort = '8080';
      expect((await objectProblems(d)).join('\n')).to.match(/containerPort must be integer/);
      const e = deployment();
      delete container(e).name;
      expect((await objectProblems(e)).join('\n')).to.match(/must have required property name/);
      const f = deployment();
      container(f).imagePullPolicy = 'Sometimes';
      expect((await objectProblems(f)).join('\n')).to.match(/imagePullPolicy must be equal to one of the allowed values/);
    });

    it('refuses unknown fields, in metadata too (client-node models, as --validate=strict)', async () => {
      const d = deployment();
      container(d).livenessProbe = { httpGet: { path: '/healthz', port: 'metrics', shceme: 'HTTP' } };
      (d.metadata as JsonObject).labelz = {};
      expect(await objectProblems(d)).to.deep.equal(['metadata.labelz: unknown field', 'spec.template.spec.containers[0].livenessProbe.httpGet.shceme: unknown field']);
    });

    it('refuses an unknown kind, and a kind of a group version Kubernetes does not have', async () => {
      expect(await objectProblems({ apiVersion: 'apps/v1', kind: 'Deploymint', metadata: { name: 'x' } })).to.deep.equal([
        `unknown kind Deploymint in apps/v1: neither a Kubernetes ${KUBERNETES_RELEASE} kind nor one of our CRDs`,
      ]);
      expect(await objectProblems({ apiVersion: 'pgx.dev/v1', kind: 'Branch', metadata: { name: 'x' }, spec: {} })).to.have.length(1);
      expect(await objectProblems({ apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'x' } })).to.have.length(1);
    });

    it('checks our kinds against the CRD schema: unknown fields, patterns, CEL name rules', async () => {
      expect(ourKinds().map((k) => k.kind).sort()).to.deep.equal(['Branch', 'Runtime', 'Template']);
      const problems = await objectProblems({
        apiVersion: 'pgx.dev/v1alpha1',
        kind: 'Branch',
        metadata: { name: 'Not_A_Label' },
        spec: { templateRef: { name: 'app' }, ttl: '-1h', colour: 'blue' },
      });
      expect(problems.join('\n')).to.contain('spec.colour: unknown field').and.contain("spec.ttl in body should match").and.contain('a Branch name must be');
    });
  });

  it('the Helm chart, with defaults and with every option, renders only valid objects', async () => {
    const values = path.join(tmp, 'values.yaml');
    fs.writeFileSync(
      values,
      [
        'image: { tag: "9.9.9", pullPolicy: Always }',
        'operator:',
        '  nodeSelector: { kubernetes.io/os: linux }',
        '  tolerations: [{ key: dedicated, operator: Equal, value: pgx, effect: NoSchedule }]',
        '  affinity:',
        '    podAntiAffinity:',
        '      preferredDuringSchedulingIgnoredDuringExecution:',
        '        - weight: 100',
        '          podAffinityTerm: { topologyKey: kubernetes.io/hostname, labelSelector: { matchLabels: { app.kubernetes.io/name: pgx } } }',
        'serviceAccount: { name: pgx-sa }',
        'runtime: { create: true, name: previews, replicas: 3, storage: { storageClassName: pgx-zfs, size: 50Gi } }',
        'storageClass: { create: true }',
        '',
      ].join('\n'),
    );
    const sets: [string, string[]][] = [
      ['defaults', []],
      ['every option', ['--set', 'operator.allNamespaces=true', '-f', values]],
      ['a Runtime on the default StorageClass', ['--set', 'runtime.create=true']],
    ];
    const seen = new Set<string>();
    for (const [label, args] of sets) {
      const objs = yamlObjects(helm('template', 'pgx', 'charts/pgx', '--namespace', 'pgx-system', '--include-crds', ...args));
      for (const k of kinds(objs)) seen.add(k);
      expect(await allProblems(objs), label).to.deep.equal([]);
    }
    expect([...seen].sort()).to.deep.equal([
      'ClusterRole', 'ClusterRoleBinding', 'CustomResourceDefinition', 'Deployment', 'PodDisruptionBudget', 'Role', 'RoleBinding', 'Runtime', 'Service', 'ServiceAccount', 'StorageClass',
    ]);
  });

  it('the kustomize base and examples build into valid objects', async () => {
    const base = yamlObjects(kustomize('manifests/base'));
    expect(kinds(base)).to.deep.equal(['CustomResourceDefinition', 'CustomResourceDefinition', 'CustomResourceDefinition', 'Deployment', 'Namespace', 'Role', 'RoleBinding', 'Service', 'ServiceAccount']);
    expect(await allProblems(base)).to.deep.equal([]);
    const examples = yamlObjects(kustomize('manifests/examples'));
    expect(kinds(examples)).to.deep.equal(['Branch', 'Runtime', 'Template']);
    expect(await allProblems(examples)).to.deep.equal([]);
    // Each example file on its own too (kubectl apply -f manifests/examples/branch.yaml).
    for (const f of fs.readdirSync(path.join(root, 'manifests/examples')).filter((f) => f.endsWith('.yaml') && f !== 'kustomization.yaml')) {
      expect(await allProblems(yamlObjects(fs.readFileSync(path.join(root, 'manifests/examples', f), 'utf8'))), f).to.deep.equal([]);
    }
  });

  it('what the Runtime and Branch controllers create is valid', async () => {
    const example = yamlObjects(fs.readFileSync(path.join(root, 'manifests/examples/runtime.yaml'), 'utf8'))[0]!;
    const minimal = { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'small' }, spec: { image: 'ghcr.io/pgx/pgx:0.1.0' } };
    const withLimits = { ...example, metadata: { name: 'limited' }, spec: { ...(example.spec as JsonObject), engine: { prefix: 'pr_', grace: '0s', poolSize: 0, databaseDefaults: { connections: 5 } } } };
    for (const raw of [example, minimal, withLimits]) {
      const parsed = parseObject(runtimeSchema, { ...raw, metadata: { ...(raw.metadata as JsonObject), namespace: 'previews', uid: '0b8f3f4e-1111-4222-8333-444455556666' } });
      if (!parsed.ok) throw new Error(parsed.message);
      const rt: Runtime = parsed.value;
      const objs = [statefulSet(rt, DEFAULT_POD_NETWORK), headlessService(rt, DEFAULT_POD_NETWORK), clientService(rt, DEFAULT_POD_NETWORK), runtimeSecret(rt), disruptionBudget(rt)] as unknown as JsonObject[];
      expect(await allProblems(objs), String((raw.metadata as JsonObject).name)).to.deep.equal([]);
    }
    const branch: CustomObject = { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: 'pr-1', namespace: 'previews', uid: '0b8f3f4e-aaaa-4222-8333-444455556666' } };
    const secret = branchSecret(branch, 'pr-1-db', { host: 'main-0.main-pods.previews.svc.cluster.local', port: 6432 }, 'tdb_app__0b8f3f4eaaaa', { user: 'u', password: 'p', url: '' });
    expect(await allProblems([secret as unknown as JsonObject])).to.deep.equal([]);
  });

  it('the GitHub Actions example parses, and the Branch it applies is valid', async () => {
    const workflow = parseYaml(fs.readFileSync(path.join(root, 'manifests/examples/branch-per-pr.yml'), 'utf8')) as {
      name: string;
      on: { pull_request: unknown };
      jobs: Record<string, { 'runs-on': unknown; env?: Record<string, string>; steps: { name?: string; uses?: string; run?: string }[] }>;
    };
    expect(workflow.name).to.be.a('string');
    expect(workflow.on.pull_request).to.not.equal(undefined);
    const job = workflow.jobs.test!;
    expect(job['runs-on']).to.not.equal(undefined);
    for (const s of job.steps) expect(typeof s.uses === 'string' || typeof s.run === 'string', JSON.stringify(s)).to.equal(true);
    const script = job.steps.map((s) => s.run ?? '').join('\n');
    const heredoc = /kubectl apply -f - <<EOF\n([\s\S]*?)\nEOF/.exec(script);
    expect(heredoc, 'a kubectl apply of a heredoc').to.not.equal(null);
    const branch = yamlObjects(heredoc![1]!.replaceAll('${BRANCH}', 'pr-123-1'));
    expect(kinds(branch)).to.deep.equal(['Branch']);
    expect(await allProblems(branch)).to.deep.equal([]);
    // It names the example Template.
    const template = yamlObjects(fs.readFileSync(path.join(root, 'manifests/examples/template.yaml'), 'utf8'))[0]!;
    expect(((branch[0]!.spec as JsonObject).templateRef as JsonObject).name).to.equal((template.metadata as JsonObject).name);
    // Running its kubectl commands against the API double and the operator: workflow.test.ts.
  });
});
