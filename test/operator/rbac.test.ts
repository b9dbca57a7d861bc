// Least privilege, proven: the operator runs as the chart's ServiceAccount with the chart's Role (the
// real `helm template`), against the API double, which enforces RBAC as a real API server does (403 for a
// request no bound rule allows). A representative run (a Runtime's objects made and its StatefulSet
// replaced, Templates from SQL and from a ConfigMap, Branches made Ready, changed, expired at their TTL
// and deleted, a Template deletion held and released, Events, leader election and the Lease given up on
// stop) records every request the operator makes; then every RBAC rule set we ship (the chart's Role,
// its ClusterRole with operator.allNamespaces, the kustomize base's Role) must allow each of them and
// grant nothing the run did not use, unless a comment on the rule says why it is needed, in the form
// `# Unused (VERB, ...): why` (a comment that names a verb the run did use is stale, and fails too).

import { AppsV1Api, CoreV1Api, PolicyV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { parseAllDocuments, isMap, isSeq, type Node } from 'yaml';
import { MERGE_PATCH } from '../../src/operator/kube.js';
import type { Operator } from '../../src/operator/operator.js';
import { API_TOKEN_KEY, runtimeSecretName } from '../../src/operator/pods.js';
import { ruleAllows, type RequestAttributes, type RequestRecord } from '../helpers/kube-api/index.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { CustomObjectsApi, KubernetesObjectApi, type KubernetesObject } from '@kubernetes/client-node';
import { startKubeApi } from '../helpers/kube-api/index.js';
import { apply, forbidden, makePod, NS, PGX, read, remove, startCluster, startOperator, stopCluster, waitFor, waitForCondition, waitForGone, type Cluster } from './harness.js';
import { helm, kustomize, yamlObjects } from './kube-tools.js';

interface Rule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  resourceNames: string[];
}

interface RuleSet {
  source: string;
  kind: 'Role' | 'ClusterRole';
  rules: { rule: Rule; comment: string }[];
  /** The binding's subjects and role reference, checked against the ServiceAccount. */
  binding: { kind: string; roleName: string; subjects: { kind: string; name: string; namespace?: string }[] };
  roleName: string;
  serviceAccount: string;
  namespace: string;
}

/** The Role or ClusterRole of a rendered stream, each rule with the YAML comment on it (helm keeps `#` comments). */
function ruleSet(source: string, text: string): RuleSet {
  const docs = parseAllDocuments(text).filter((d) => d.contents !== null);
  const objs = docs.map((d) => ({ doc: d, obj: d.toJSON() as Record<string, unknown> }));
  const role = objs.find((o) => o.obj.kind === 'Role' || o.obj.kind === 'ClusterRole');
  const binding = objs.find((o) => o.obj.kind === 'RoleBinding' || o.obj.kind === 'ClusterRoleBinding')?.obj;
  const sa = objs.find((o) => o.obj.kind === 'ServiceAccount')?.obj;
  if (!role || !binding || !sa) throw new Error(`${source}: no Role/ClusterRole, binding and ServiceAccount`);
  const rulesNode = (role.doc.contents as Node & { get(k: string, keep: true): Node }).get('rules', true);
  if (!isSeq(rulesNode)) throw new Error(`${source}: rules is not a list`);
  const rules = rulesNode.items.map((item) => {
    const rule = (item as Node).toJSON() as Partial<Rule>;
    const comment = [(item as Node).commentBefore ?? '', (item as Node).comment ?? '', isMap(item) ? (item.items[0]?.key as Node | undefined)?.commentBefore ?? '' : ''].join(' ').trim();
    return { rule: { verbs: rule.verbs ?? [], apiGroups: rule.apiGroups ?? [], resources: rule.resources ?? [], resourceNames: rule.resourceNames ?? [] }, comment };
  });
  const meta = (o: Record<string, unknown>) => o.metadata as { name: string; namespace?: string };
  const b = binding as { kind: string; roleRef: { kind: string; name: string }; subjects: { kind: string; name: string; namespace?: string }[] };
  return {
    source,
    kind: role.obj.kind as 'Role' | 'ClusterRole',
    rules,
    binding: { kind: b.roleRef.kind, roleName: b.roleRef.name, subjects: b.subjects },
    roleName: meta(role.obj).name,
    serviceAccount: meta(sa).name,
    namespace: meta(sa).namespace ?? '',
  };
}

/** `verb apiGroup/resource[/subresource]`: one permission, as a rule grants it. */
const permission = (verb: string, group: string, resource: string): string => `${verb} ${group === '' ? 'core' : group}/${resource}`;

describe('operator RBAC: what the chart and the manifests grant is what the operator uses', function () {
  this.timeout(240_000);
  let c: Cluster;
  let op: Operator | null = null;
  let rt: TestRuntime | null = null;
  let used: RequestRecord[] = [];

  before(async () => {
    c = await startCluster();
  });
  after(async () => {
    await op?.stop();
    await rt?.stop();
    await stopCluster(c);
  });

  it("refuses the operator's identity what the chart's Role does not grant (403, as a real API server)", async () => {
    const asOperator = c.operatorKc.makeApiClient(CoreV1Api);
    // Granted: reading a Secret by name (404 here: it does not exist, but the request was allowed).
    const read404 = await asOperator.readNamespacedSecret({ name: 'nothing', namespace: NS }).then(() => 200, (e: { code?: number }) => e.code);
    expect(read404).to.equal(404);
    // Not granted: listing Secrets, deleting a Pod, listing Pods in every namespace (a Role is one namespace).
    const refusal = (p: Promise<unknown>) => p.then(() => null, (e: { code?: number; body?: string }) => ({ code: e.code, message: String((JSON.parse(String(e.body)) as { message?: string }).message) }));
    const list = await refusal(asOperator.listNamespacedSecret({ namespace: NS }));
    expect(list?.code).to.equal(403);
    expect(list?.message).to.equal(`secrets is forbidden: User "${c.operatorUser}" cannot list resource "secrets" in API group "" in the namespace "default"`);
    expect((await refusal(asOperator.deleteNamespacedPod({ name: 'x', namespace: NS })))?.code).to.equal(403);
    const everywhere = await refusal(asOperator.listPodForAllNamespaces({ labelSelector: 'pgx.dev/runtime' }));
    expect(everywhere?.code).to.equal(403);
    expect(everywhere?.message).to.contain('cannot list resource "pods" in API group "" at the cluster scope');
    // The admin is not bound by it.
    expect((await c.core.listNamespacedSecret({ namespace: NS })).items).to.be.an('array');
    // Forget these probes: they were the test's, not the operator's.
    c.api.requests.length = 0;
  });

  it('runs a Runtime, Templates and Branches through their lifecycles, leader election included, without a refusal', async () => {
    op = await startOperator(c, { identity: 'rbac-a' });
    await waitFor('leadership', async () => (op!.isLeader ? true : null));

    // A Runtime: the operator makes its Secret, Services, PodDisruptionBudget and StatefulSet.
    await apply(c, 'runtimes', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main' }, spec: { replicas: 1, image: 'ghcr.io/pgx/runtime:test', engine: { poolSize: 0 } } });
    const apps = c.kc.makeApiClient(AppsV1Api);
    const first = await waitFor('the StatefulSet', () => apps.readNamespacedStatefulSet({ name: 'main', namespace: NS }).catch(() => null));
    const secret = await waitFor('the Runtime Secret', () => c.core.readNamespacedSecret({ name: runtimeSecretName('main'), namespace: NS }).catch(() => null));
    const token = Buffer.from(secret.data![API_TOKEN_KEY]!, 'base64').toString('utf8');
    rt = await startTestRuntime({ apiPort: 0, apiToken: token, poolSize: 0 });
    await makePod(c, 'main', 'main-0', rt);
    await waitForCondition(c, 'runtimes', 'main', 'Ready', 'AllPodsReady');
    // A spec change replaces the StatefulSet (update).
    await c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', name: 'main', body: { spec: { engine: { poolSize: 1 } } } }, MERGE_PATCH);
    await waitFor('the StatefulSet replaced', async () => {
      const s = await apps.readNamespacedStatefulSet({ name: 'main', namespace: NS });
      return s.metadata?.resourceVersion !== first.metadata?.resourceVersion ? s : null;
    });

    // Its PodDisruptionBudget edited by hand is put back.
    const policy = c.kc.makeApiClient(PolicyV1Api);
    // Twice: the second "Applied" Event is the first's again, aggregated (a patch of its count).
    for (let i = 0; i < 2; i++) {
      await policy.patchNamespacedPodDisruptionBudget({ name: 'main', namespace: NS, body: { spec: { maxUnavailable: 2 } } }, MERGE_PATCH);
      await waitFor('the PodDisruptionBudget put back', async () => ((await policy.readNamespacedPodDisruptionBudget({ name: 'main', namespace: NS })).spec?.maxUnavailable === 1 ? true : null));
    }

    // Templates from SQL and from a ConfigMap.
    await apply(c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: 'main' }, source: { sql: 'CREATE TABLE t (x int);' } } });
    await c.core.createNamespacedConfigMap({ namespace: NS, body: { metadata: { name: 'schema' }, data: { 'schema.sql': 'CREATE TABLE u (y int);' } } });
    await apply(c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'from-cm' }, spec: { runtimeRef: { name: 'main' }, source: { configMapRef: { name: 'schema' } } } });
    await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');
    await waitForCondition(c, 'templates', 'from-cm', 'Ready', 'Sealed');

    // Branches: Ready with a Secret, a limit changed, one expired at its TTL, one deleted by hand.
    const branch = (name: string, template: string, spec: Record<string, unknown> = {}) => ({ apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: template }, ...spec } });
    await apply(c, 'branches', branch('b1', 'from-cm', { limits: { memory: '64Mi' } }));
    await apply(c, 'branches', branch('short', 'app', { ttl: '2s' }));
    await waitForCondition(c, 'branches', 'b1', 'Ready', 'DatabaseReady');
    await c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'branches', name: 'b1', body: { spec: { limits: { memory: '32Mi' } } } }, MERGE_PATCH);
    await waitForGone(c, 'branches', 'short', 30_000);
    // Expired and kept (expiryPolicy Retain): its database dropped and its Secret deleted.
    await apply(c, 'branches', branch('kept', 'app', { ttl: '2s', expiryPolicy: 'Retain' }));
    await waitForCondition(c, 'branches', 'kept', 'Expired', 'TTLExpired', 30_000);
    await remove(c, 'branches', 'kept');
    await waitForGone(c, 'branches', 'kept');
    // A Template in use is held (its finalizer) until its Branch goes.
    await remove(c, 'templates', 'from-cm');
    await waitForCondition(c, 'templates', 'from-cm', 'Ready', 'DeletionBlocked');
    await remove(c, 'branches', 'b1');
    await waitForGone(c, 'branches', 'b1');
    await waitForGone(c, 'templates', 'from-cm');
    expect(await read(c, 'templates', 'app')).to.not.equal(null);

    // A clean stop gives the Lease up.
    await op.stop();
    op = null;
    used = c.api.requests.filter((r) => r.user === c.operatorUser);
    expect([...new Set(forbidden(c).map((r) => permission(r.verb, r.apiGroup, r.resource)))], 'requests the chart refused the operator').to.deep.equal([]);
    expect(used.length).to.be.greaterThan(50);
    // What the run was to cover, so that a permission missing from it is not mistaken for one not needed.
    const seen = new Set(used.map((r) => permission(r.verb, r.apiGroup, r.resource)));
    for (const p of ['create core/secrets', 'create core/services', 'create policy/poddisruptionbudgets', 'create apps/statefulsets', 'update apps/statefulsets', 'get core/configmaps', 'delete pgx.dev/branches', 'patch pgx.dev/templates', 'patch pgx.dev/runtimes', 'delete core/secrets', 'update policy/poddisruptionbudgets', 'patch core/events', 'create core/events', 'create coordination.k8s.io/leases', 'update coordination.k8s.io/leases']) {
      expect(seen, p).to.include(p);
    }
  });

  for (const [source, render] of [
    ["the chart's Role (defaults)", () => helm('template', 'pgx', 'charts/pgx', '--namespace', NS)],
    ["the chart's ClusterRole (operator.allNamespaces=true)", () => helm('template', 'pgx', 'charts/pgx', '--namespace', NS, '--set', 'operator.allNamespaces=true')],
    ["the kustomize base's Role", () => kustomize('manifests/base')],
  ] as const) {
    it(`${source} allows every request of that run and grants nothing more, or says why`, function () {
      if (used.length === 0) throw new Error('the lifecycle run above recorded no requests (it failed)');
      const set = ruleSet(source, render());
      // Bound to the operator's ServiceAccount.
      expect(set.binding.kind).to.equal(set.kind);
      expect(set.binding.roleName).to.equal(set.roleName);
      expect(set.binding.subjects).to.deep.equal([{ kind: 'ServiceAccount', name: set.serviceAccount, namespace: set.namespace }]);
      // No wildcards: each permission named.
      for (const { rule } of set.rules) for (const v of [...rule.verbs, ...rule.apiGroups, ...rule.resources]) expect(v, `${source}: a wildcard in ${JSON.stringify(rule)}`).to.not.contain('*');

      const notAllowed: string[] = [];
      for (const r of used) {
        const [resource, subresource = ''] = r.resource.split('/');
        const a: RequestAttributes = { verb: r.verb, apiGroup: r.apiGroup, resource: resource!, subresource, namespace: r.namespace ?? '', name: r.name ?? '' };
        // A Role grants in its own namespace only: a request across namespaces (or cluster-scoped) needs a ClusterRole.
        const inScope = set.kind === 'ClusterRole' || r.namespace !== null;
        if (!inScope || !set.rules.some(({ rule }) => ruleAllows(rule, a))) notAllowed.push(`${permission(r.verb, r.apiGroup, r.resource)}${r.namespace === null ? ' (all namespaces)' : ''}`);
      }

      const usedPermissions = new Set(used.map((r) => permission(r.verb, r.apiGroup, r.resource)));
      const unused: string[] = [];
      const explained: string[] = [];
      for (const { rule, comment } of set.rules) {
        const m = /Unused \(([^)]*)\):\s*(\S.*)/s.exec(comment);
        const excused = new Set((m?.[1] ?? '').split(',').map((v) => v.trim()).filter((v) => v !== ''));
        for (const v of excused) if (!rule.verbs.includes(v)) unused.push(`"Unused (${v})" on a rule without that verb: ${JSON.stringify(rule)}`);
        for (const g of rule.apiGroups) {
          for (const res of rule.resources) {
            for (const v of rule.verbs) {
              const p = permission(v, g, res);
              if (usedPermissions.has(p)) {
                if (excused.has(v)) unused.push(`${p} is used, but its rule's comment says Unused (stale)`);
                continue;
              }
              if (excused.has(v)) explained.push(`${p}: ${m![2]!.replace(/\s+/g, ' ')}`);
              else unused.push(p);
            }
          }
        }
        if (rule.resourceNames.length > 0) unused.push(`resourceNames ${rule.resourceNames.join(',')} (the operator's names are not fixed)`);
      }
      if (explained.length > 0) console.log(`      ${source}: granted though the run did not use them, as the chart's comments say:\n        ${explained.join('\n        ')}`);
      expect({ notAllowed: [...new Set(notAllowed)], unused }, `${source}: notAllowed is what the operator does and it does not allow; unused what it grants and the operator never uses (remove it, or say why in a comment on the rule: # Unused (VERB): why)`).to.deep.equal({ notAllowed: [], unused: [] });
    });
  }
});

describe('operator RBAC: every namespace (operator.allNamespaces=true, a ClusterRole)', function () {
  this.timeout(120_000);
  let c: Cluster | undefined;
  let op: Operator | undefined;

  after(async () => {
    await op?.stop();
    await stopCluster(c);
  });

  it("watches and acts in every namespace with the chart's ClusterRole: the Role's rules, bound cluster-wide", async () => {
    const api = await startKubeApi();
    const kc = api.kubeConfig();
    const rendered = yamlObjects(helm('template', 'pgx', 'charts/pgx', '--namespace', 'pgx-system', '--set', 'operator.allNamespaces=true'));
    const objects = KubernetesObjectApi.makeApiClient(kc);
    for (const o of rendered.filter((o) => ['ServiceAccount', 'ClusterRole', 'ClusterRoleBinding'].includes(String(o.kind)))) await objects.create(o as unknown as KubernetesObject);
    const saName = String((rendered.find((o) => o.kind === 'ServiceAccount')!.metadata as { name: string }).name);
    c = { api, kc, operatorKc: api.serviceAccountKubeConfig('pgx-system', saName), operatorUser: `system:serviceaccount:pgx-system:${saName}`, core: kc.makeApiClient(CoreV1Api), custom: kc.makeApiClient(CustomObjectsApi) };
    op = await startOperator(c, { namespace: null, leaseNamespace: 'pgx-system' });
    await waitFor('leadership and full caches', async () => (op!.isLeader && op!.ready ? true : null));
    await c.custom.createNamespacedCustomObject({ ...PGX, namespace: 'team-a', plural: 'runtimes', body: { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'db' }, spec: { image: 'ghcr.io/pgx/runtime:test' } } });
    const apps = kc.makeApiClient(AppsV1Api);
    await waitFor('the StatefulSet in team-a', () => apps.readNamespacedStatefulSet({ name: 'db', namespace: 'team-a' }).catch(() => null));
    expect(forbidden(c)).to.deep.equal([]);
    const ops = api.requests.filter((r) => r.user === c!.operatorUser);
    const acrossNamespaces = [...new Set(ops.filter((r) => r.namespace === null).map((r) => permission(r.verb, r.apiGroup, r.resource)))].sort();
    expect(acrossNamespaces).to.deep.equal(['list core/pods', 'list pgx.dev/branches', 'list pgx.dev/runtimes', 'list pgx.dev/templates', 'list policy/poddisruptionbudgets', 'watch core/pods', 'watch pgx.dev/branches', 'watch pgx.dev/runtimes', 'watch pgx.dev/templates', 'watch policy/poddisruptionbudgets']);
    // The same rules as the Role of the default install, which grants in its namespace only (a list across
    // namespaces is refused with it: the first test above).
    const role = ruleSet('the Role', helm('template', 'pgx', 'charts/pgx', '--namespace', 'pgx-system'));
    expect(role.kind).to.equal('Role');
    const clusterRole = ruleSet('the ClusterRole', helm('template', 'pgx', 'charts/pgx', '--namespace', 'pgx-system', '--set', 'operator.allNamespaces=true'));
    // Plus get on namespaces, cluster-scoped, which only a ClusterRole can grant: the labels a Runtime's
    // allowedNamespaces selector matches.
    const namespaces = { apiGroups: [''], resources: ['namespaces'], verbs: ['get'] };
    expect(clusterRole.rules.map((r) => r.rule).filter((r) => !r.resources.includes('namespaces'))).to.deep.equal(role.rules.map((r) => r.rule));
    expect(clusterRole.rules.map((r) => r.rule).filter((r) => r.resources.includes('namespaces'))).to.deep.equal([{ ...namespaces, resourceNames: [] }]);
  });
});
