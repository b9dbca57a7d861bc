// What a platform team meets on a real cluster, where only the real control plane shows it: runtime
// pods admitted by the API server's PodSecurity admission in a namespace that enforces the restricted
// profile; a Branch brought back to Ready when its pod is deleted and the StatefulSet controller
// re-creates it; a Runtime spec change rolling the pods of the same StatefulSet (never replacing it)
// with its Branches Ready again after; and a Branch deleted and re-created under the same name while
// the garbage collector still holds the old one's Secret (the new Branch is never Ready on it).

import { AppsV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import type { Operator } from '../../src/operator/operator.js';
import { MERGE_PATCH } from '../../src/operator/kube.js';
import {
  apply,
  condition,
  makeRuntime,
  read,
  remove,
  resolvedUrl,
  RESTRICTED_NAMESPACE,
  startCluster,
  startOperator,
  statusOf,
  stopCluster,
  waitFor,
  waitForCondition,
  waitForEvents,
  waitForGone,
  type Cluster,
} from './harness.js';
import { kubectl, plane } from './hooks.js';
import { root } from '../operator/kube-tools.js';

const NS = 'platform-e2e';
const HOLD = 'test.pgx.dev/hold';

interface BranchStatus {
  phase?: string;
  pod?: string;
  database?: string;
  secretName?: string;
}

const branchBody = (name: string, spec: Record<string, unknown> = {}) => ({ apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: 'app' }, ...spec } });

describe('operator on a real cluster: restricted pods, pods that come back, rolling updates, Secrets of an earlier Branch', function () {
  this.timeout(300_000);
  let c: Cluster;
  let op: Operator;

  before(async function () {
    c = await startCluster(NS, plane().cp, RESTRICTED_NAMESPACE);
    op = await startOperator(c);
    await waitFor('leadership', async () => (op.isLeader ? true : null));
  });

  after(async function () {
    await op?.stop();
    await stopCluster(c);
  });

  /** The rows a Branch's Secret sees, connecting as an app would. */
  async function rowsThroughSecret(branch: string): Promise<number> {
    const s = statusOf<BranchStatus>(await read(c, 'branches', branch));
    const secret = await c.core.readNamespacedSecret({ name: s.secretName!, namespace: NS });
    const client = new pg.Client({ connectionString: await resolvedUrl(Buffer.from(secret.data!.uri!, 'base64').toString('utf8')) });
    await client.connect();
    try {
      return Number((await client.query<{ n: string }>('SELECT count(*) AS n FROM items')).rows[0]!.n);
    } finally {
      await client.end();
    }
  }

  const podUid = async (name: string): Promise<string | undefined> => (await c.core.readNamespacedPod({ name, namespace: NS }).catch(() => null))?.metadata?.uid;

  it('runs the runtime pods in a namespace that enforces the restricted Pod Security profile', async function () {
    const ns = await c.core.readNamespace({ name: NS });
    expect(ns.metadata?.labels?.['pod-security.kubernetes.io/enforce']).to.equal('restricted');
    // The StatefulSet controller's pod creates pass the API server's PodSecurity admission.
    await makeRuntime(c, 'main', { replicas: 2 });
    const events = await c.core.listNamespacedEvent({ namespace: NS, fieldSelector: 'involvedObject.name=main' });
    expect(events.items.filter((e) => e.reason === 'FailedCreate').map((e) => e.message)).to.deep.equal([]);
    await apply(c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: 'main' }, source: { sql: 'CREATE TABLE items (id int); INSERT INTO items VALUES (1), (2);' } } });
    await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');
  });

  it('brings a Branch back to Ready when its pod is deleted and re-created with its volume', async function () {
    await apply(c, 'branches', branchBody('survivor', { affinity: { pod: 'main-0' } }));
    const ready = statusOf<BranchStatus>(await waitForCondition(c, 'branches', 'survivor', 'Ready', 'DatabaseReady'));
    const before = await podUid('main-0');
    await c.core.deleteNamespacedPod({ name: 'main-0', namespace: NS });
    await waitFor('main-0 re-created', async () => {
      const uid = await podUid('main-0');
      return uid !== undefined && uid !== before ? uid : null;
    }, 120_000);
    // Away meanwhile (an Event says so), then Ready with its database checked on the new pod.
    await waitForEvents(c, 'survivor', ['PodUnavailable'], 120_000);
    const back = await waitFor('survivor Ready again', async () => {
      const b = await read(c, 'branches', 'survivor');
      return condition(b, 'Ready')?.reason === 'DatabaseReady' && statusOf<BranchStatus>(b).phase === 'Ready' ? b : null;
    }, 120_000);
    expect(statusOf<BranchStatus>(back)).to.include({ pod: 'main-0', database: ready.database });
    expect(await rowsThroughSecret('survivor')).to.equal(2);
  });

  it('rolls the pods of the same StatefulSet on a Runtime spec change, and its Branches are Ready after', async function () {
    const apps = c.kc.makeApiClient(AppsV1Api);
    const set = await apps.readNamespacedStatefulSet({ name: 'main', namespace: NS });
    const uids = [await podUid('main-0'), await podUid('main-1')];
    await c.custom.patchNamespacedCustomObject({ group: 'pgx.dev', version: 'v1alpha1', namespace: NS, plural: 'runtimes', name: 'main', body: { spec: { engine: { grace: '3s' } } } }, MERGE_PATCH);
    await waitFor('both pods rolled and ready', async () => {
      const now = [await podUid('main-0'), await podUid('main-1')];
      if (now.some((u, i) => u === undefined || u === uids[i])) return null;
      return statusOf<{ readyReplicas?: number }>(await read(c, 'runtimes', 'main')).readyReplicas === 2 ? true : null;
    }, 240_000);
    const after = await apps.readNamespacedStatefulSet({ name: 'main', namespace: NS });
    // Updated in place: the same object (uid), a new generation, the new setting in its pods.
    expect(after.metadata?.uid).to.equal(set.metadata?.uid);
    expect(after.metadata?.generation).to.be.greaterThan(set.metadata!.generation!);
    expect(after.spec?.template.spec?.containers[0]?.args).to.include.members(['--grace', '3']);
    await waitFor('survivor Ready after the roll', async () => {
      const b = await read(c, 'branches', 'survivor');
      return condition(b, 'Ready')?.reason === 'DatabaseReady' && statusOf<BranchStatus>(b).phase === 'Ready' ? b : null;
    }, 120_000);
    expect(await rowsThroughSecret('survivor')).to.equal(2);
  });

  it('is never Ready on the Secret an earlier Branch of the same name left, and makes its own once it is gone', async function () {
    await apply(c, 'branches', branchBody('again'));
    const first = await waitForCondition(c, 'branches', 'again', 'Ready', 'DatabaseReady');
    // Hold the Secret as the garbage collector may (a finalizer): it outlives its Branch.
    await c.core.patchNamespacedSecret({ name: 'again-db', namespace: NS, body: { metadata: { finalizers: [HOLD] } } }, MERGE_PATCH);
    await remove(c, 'branches', 'again');
    await waitForGone(c, 'branches', 'again');
    await waitFor('the garbage collector to delete the old Secret', async () => ((await c.core.readNamespacedSecret({ name: 'again-db', namespace: NS })).metadata?.deletionTimestamp ? true : null));
    const second = await apply(c, 'branches', branchBody('again'));
    expect(second.metadata!.uid).to.not.equal(first.metadata!.uid);
    const waiting = await waitForCondition(c, 'branches', 'again', 'Ready', 'SecretDeleting', 120_000);
    expect(condition(waiting, 'Ready')?.status).to.equal('False');
    await c.core.patchNamespacedSecret({ name: 'again-db', namespace: NS, body: { metadata: { finalizers: null } } }, MERGE_PATCH);
    await waitForCondition(c, 'branches', 'again', 'Ready', 'DatabaseReady', 120_000);
    const secret = await c.core.readNamespacedSecret({ name: 'again-db', namespace: NS });
    expect(secret.metadata?.ownerReferences?.[0]?.uid).to.equal(second.metadata!.uid);
    expect(await rowsThroughSecret('again')).to.equal(2);
  });

  it("applies the Argo CD example's per-PR Branch as the ApplicationSet would (kustomize with a name suffix)", async function () {
    // What Argo CD does for PR 42: the preview directory with nameSuffix -pr-42 and the PR label.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgx-argocd-'));
    try {
      fs.writeFileSync(
        path.join(dir, 'kustomization.yaml'),
        `apiVersion: kustomize.config.k8s.io/v1beta1\nkind: Kustomization\nresources:\n  - ${path.relative(dir, path.join(root, 'manifests/examples/argocd/preview'))}\nnameSuffix: -pr-42\nlabels:\n  - pairs:\n      pgx.dev/pull-request: "42"\n`,
      );
      const rendered = kubectl('kustomize', dir);
      fs.writeFileSync(path.join(dir, 'rendered.yaml'), rendered);
      expect(kubectl('apply', '-n', NS, '-f', path.join(dir, 'rendered.yaml'))).to.contain('branch.pgx.dev/preview-db-pr-42 created');
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const ready = await waitForCondition(c, 'branches', 'preview-db-pr-42', 'Ready', 'DatabaseReady');
    expect(ready.metadata?.labels?.['pgx.dev/pull-request']).to.equal('42');
    expect((ready.spec as { expiryPolicy?: string }).expiryPolicy).to.equal('Retain');
    expect(await rowsThroughSecret('preview-db-pr-42')).to.equal(2);
    await remove(c, 'branches', 'preview-db-pr-42');
    await waitForGone(c, 'branches', 'preview-db-pr-42');
  });

  it('holds the deletion of a Runtime while Branches are on its pods, naming them', async function () {
    await remove(c, 'runtimes', 'main');
    const blocked = await waitForCondition(c, 'runtimes', 'main', 'Ready', 'DeletionBlocked');
    expect(condition(blocked, 'Ready')?.message).to.contain('again').and.to.contain('survivor');
    expect(condition(await read(c, 'branches', 'survivor'), 'Ready')?.reason).to.equal('DatabaseReady');
    await remove(c, 'branches', 'survivor');
    await remove(c, 'branches', 'again');
    await waitForGone(c, 'branches', 'survivor');
    await waitForGone(c, 'branches', 'again');
    await waitForGone(c, 'runtimes', 'main', 120_000);
  });
});
