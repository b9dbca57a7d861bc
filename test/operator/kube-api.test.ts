// The Kubernetes API double, proven with the real @kubernetes/client-node over HTTPS: if the client
// library can use it unmodified for CRUD, conflicts, finalizers, garbage collection, the status
// subresource and informers, the operator's tests against it mean something.

import {
  ApiException,
  ApisApi,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  KubernetesObjectApi,
  makeInformer,
  PolicyV1Api,
  PatchStrategy,
  setHeaderOptions,
  VersionApi,
  Watch,
  type KubeConfig,
  type KubernetesListObject,
  type KubernetesObject,
  type V1Secret,
} from '@kubernetes/client-node';
import { expect } from 'chai';
import { startKubeApi, type KubeApi } from '../helpers/kube-api/index.js';

interface Status {
  code: number;
  reason: string;
  message: string;
}

/** The Status body of a failed call: what a controller switches on (reason) and shows (message). */
async function failure(call: Promise<unknown>): Promise<Status> {
  try {
    await call;
  } catch (err) {
    if (!(err instanceof ApiException)) throw err;
    const body = JSON.parse(String(err.body)) as Status & { kind: string };
    expect(body.kind).to.equal('Status');
    expect(body.code).to.equal(err.code);
    return { code: body.code, reason: body.reason, message: body.message };
  }
  throw new Error('expected the call to fail');
}

interface CustomObject extends KubernetesObject {
  spec?: Record<string, unknown>;
  status?: Record<string, unknown>;
}

const PGX = { group: 'pgx.dev', version: 'v1alpha1' } as const;
const merge = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);
const ns = 'default';

function branchBody(name: string, spec: Record<string, unknown> = {}): CustomObject {
  return { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: 'app' }, ...spec } };
}

/** Resolves when `pred` holds for an event; mocha's timeout fails the test if it never does. */
function nextEvent<T>(subscribe: (cb: (obj: T) => void) => void, pred: (obj: T) => boolean): Promise<T> {
  return new Promise((resolve) => subscribe((o) => pred(o) && resolve(o)));
}

/** Waits until fn returns non-null; for effects the API server (like a real one) makes after the fact. */
async function until<T>(fn: () => Promise<T | null>): Promise<T> {
  for (;;) {
    const v = await fn();
    if (v !== null) return v;
    await new Promise((r) => setTimeout(r, 10));
  }
}

describe('Kubernetes API double (with @kubernetes/client-node)', () => {
  let api: KubeApi;
  let kc: KubeConfig;
  let core: CoreV1Api;
  let custom: CustomObjectsApi;

  beforeEach(async () => {
    api = await startKubeApi();
    kc = api.kubeConfig();
    core = kc.makeApiClient(CoreV1Api);
    custom = kc.makeApiClient(CustomObjectsApi);
  });

  afterEach(async () => {
    await api.close();
  });

  it('serves HTTPS with a test CA from a kubeconfig file, and refuses a wrong token', async () => {
    expect(api.url).to.match(/^https:\/\/127\.0\.0\.1:/);
    expect(kc.getCurrentCluster()?.caData).to.be.a('string');
    const version = await kc.makeApiClient(VersionApi).getCode();
    expect(version.major).to.equal('1');
    const other = api.kubeConfig();
    other.users = [{ name: 'pgx-test-operator', token: 'wrong' }];
    const err = await other
      .makeApiClient(CoreV1Api)
      .listNamespacedSecret({ namespace: ns })
      .then(() => null, (e: unknown) => e);
    expect(err).to.be.instanceOf(ApiException);
    expect((err as ApiException<unknown>).code).to.equal(401);
  });

  it('serves discovery for the core group, the built-in groups and pgx.dev', async () => {
    const groups = await kc.makeApiClient(ApisApi).getAPIVersions();
    expect(groups.groups.map((g) => g.name)).to.include.members(['apps', 'policy', 'coordination.k8s.io', 'apiextensions.k8s.io', 'pgx.dev']);
    const coreResources = await core.getAPIResources();
    expect(coreResources.resources.find((r) => r.name === 'pods/status')?.kind).to.equal('Pod');
    // KubernetesObjectApi finds the plural of a kind through discovery, as kubectl does.
    const objects = KubernetesObjectApi.makeApiClient(kc);
    await objects.create(branchBody('via-discovery') as KubernetesObject & { metadata: { name: string } });
    const read = (await objects.read({ apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: 'via-discovery', namespace: ns } })) as CustomObject;
    expect(read.spec?.templateRef).to.deep.equal({ name: 'app' });
    const plurals = api.store.allTypes().map((t) => `${t.group}/${t.version}/${t.plural}`);
    expect(plurals).to.include.members([
      '/v1/secrets',
      '/v1/services',
      '/v1/configmaps',
      '/v1/pods',
      '/v1/events',
      '/v1/persistentvolumeclaims',
      'apps/v1/statefulsets',
      'policy/v1/poddisruptionbudgets',
      'coordination.k8s.io/v1/leases',
      'pgx.dev/v1alpha1/runtimes',
      'pgx.dev/v1alpha1/templates',
      'pgx.dev/v1alpha1/branches',
    ]);
    const crds = await custom.listClusterCustomObject({ group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions' });
    const established = (crds as KubernetesListObject<CustomObject>).items.map((c) => [c.metadata?.name, (c.status?.conditions as { type: string; status: string }[]).find((x) => x.type === 'Established')?.status]);
    expect(established).to.deep.equal([
      ['branches.pgx.dev', 'True'],
      ['runtimes.pgx.dev', 'True'],
      ['templates.pgx.dev', 'True'],
    ]);
  });

  it('creates, gets, lists by label, merge-patches, JSON-patches and deletes a Secret', async () => {
    const created = await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'db', labels: { app: 'pgx' } }, stringData: { password: 'pw' } } });
    expect(created.metadata?.uid).to.be.a('string');
    expect(created.metadata?.resourceVersion).to.match(/^[0-9]+$/);
    expect(created.metadata?.creationTimestamp).to.be.instanceOf(Date);
    expect(created.data).to.deep.equal({ password: Buffer.from('pw').toString('base64') });
    expect(created.type).to.equal('Opaque');
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'other', labels: { app: 'else' } } } });

    const got = await core.readNamespacedSecret({ name: 'db', namespace: ns });
    expect(got.metadata?.uid).to.equal(created.metadata?.uid);
    const listed = await core.listNamespacedSecret({ namespace: ns, labelSelector: 'app=pgx' });
    expect(listed.items.map((s) => s.metadata?.name)).to.deep.equal(['db']);
    expect(Number(listed.metadata?.resourceVersion)).to.be.at.least(Number(created.metadata?.resourceVersion));
    expect((await core.listNamespacedSecret({ namespace: ns, labelSelector: 'app in (pgx,else)' })).items).to.have.length(2);
    expect((await core.listNamespacedSecret({ namespace: 'elsewhere' })).items).to.have.length(0);

    const patched = await core.patchNamespacedSecret({ name: 'db', namespace: ns, body: { metadata: { labels: { tier: 'a' } } } }, merge);
    expect(patched.metadata?.labels).to.deep.equal({ app: 'pgx', tier: 'a' });
    expect(Number(patched.metadata?.resourceVersion)).to.be.greaterThan(Number(created.metadata?.resourceVersion));
    const jsonPatched = await core.patchNamespacedSecret({ name: 'db', namespace: ns, body: [{ op: 'remove', path: '/metadata/labels/tier' }] });
    expect(jsonPatched.metadata?.labels).to.deep.equal({ app: 'pgx' });

    await core.deleteNamespacedSecret({ name: 'db', namespace: ns });
    expect(await failure(core.readNamespacedSecret({ name: 'db', namespace: ns }))).to.deep.equal({ code: 404, reason: 'NotFound', message: 'secrets "db" not found' });
  });

  it('answers AlreadyExists, stale-resourceVersion Conflict and NotFound with Status objects', async () => {
    const body: V1Secret = { metadata: { name: 'db' } };
    const first = await core.createNamespacedSecret({ namespace: ns, body });
    expect(await failure(core.createNamespacedSecret({ namespace: ns, body }))).to.deep.equal({ code: 409, reason: 'AlreadyExists', message: 'secrets "db" already exists' });

    const updated = await core.replaceNamespacedSecret({ name: 'db', namespace: ns, body: { ...first, data: { a: 'YQ==' } } });
    expect(updated.data).to.deep.equal({ a: 'YQ==' });
    const stale = await failure(core.replaceNamespacedSecret({ name: 'db', namespace: ns, body: { ...first, data: { b: 'Yg==' } } }));
    expect(stale.code).to.equal(409);
    expect(stale.reason).to.equal('Conflict');
    expect(stale.message).to.contain('the object has been modified; please apply your changes to the latest version and try again');
    // A merge patch carrying a resourceVersion is a precondition too.
    const stalePatch = await failure(core.patchNamespacedSecret({ name: 'db', namespace: ns, body: { metadata: { resourceVersion: first.metadata?.resourceVersion } } }, merge));
    expect(stalePatch.reason).to.equal('Conflict');
    expect((await failure(core.deleteNamespacedSecret({ name: 'nope', namespace: ns }))).reason).to.equal('NotFound');
  });

  it('checks names and field selectors as a real API server does', async () => {
    const service = await failure(core.createNamespacedService({ namespace: ns, body: { metadata: { name: '1st' }, spec: { ports: [{ port: 1 }] } } }));
    expect(service.reason).to.equal('Invalid');
    expect(service.message).to.contain('a DNS-1035 label must consist of lower case alphanumeric characters');
    expect((await failure(core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'Upper' } } }))).message).to.contain('a lowercase RFC 1123 subdomain');
    // Custom resources support only metadata.name and metadata.namespace in field selectors.
    const field = await failure(custom.listNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', fieldSelector: 'spec.templateRef.name=app' }));
    expect(field).to.deep.equal({ code: 400, reason: 'BadRequest', message: 'field label not supported: spec.templateRef.name' });
    expect((await failure(core.listNamespacedSecret({ namespace: ns, labelSelector: 'a in (b' }))).reason).to.equal('BadRequest');
  });

  it('checks labels and owner references of every object', async () => {
    const long = await failure(core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 's', labels: { 'pgx.dev/branch': 'b'.repeat(64) } } } }));
    expect(long.message).to.contain('must be no more than 63 characters');
    const key = await failure(core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 's', labels: { 'bad key': 'x' } } } }));
    expect(key.reason).to.equal('Invalid');
    const ref = { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', name: 'b', uid: 'u1', controller: true };
    const two = await failure(core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 's', ownerReferences: [ref, { ...ref, uid: 'u2' }] } } }));
    expect(two.message).to.contain('Only one reference can have Controller set to true');
    // An owner that does not exist (a wrong uid, or another namespace) makes the object garbage at once.
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'dangling', ownerReferences: [ref] } } });
    await until(async () => ((await core.listNamespacedSecret({ namespace: ns })).items.length === 0 ? true : null));
  });

  it('keeps a Lease under optimistic concurrency, as leader election needs', async () => {
    const leases = kc.makeApiClient(CoordinationV1Api);
    const lease = await leases.createNamespacedLease({ namespace: ns, body: { metadata: { name: 'pgx-operator' }, spec: { holderIdentity: 'a', leaseDurationSeconds: 15 } } });
    const mine = await leases.replaceNamespacedLease({ name: 'pgx-operator', namespace: ns, body: { ...lease, spec: { ...lease.spec, holderIdentity: 'a', leaseTransitions: 0 } } });
    // Replica b read the same version and loses the race.
    const lost = await failure(leases.replaceNamespacedLease({ name: 'pgx-operator', namespace: ns, body: { ...lease, spec: { ...lease.spec, holderIdentity: 'b' } } }));
    expect(lost.reason).to.equal('Conflict');
    expect((await leases.readNamespacedLease({ name: 'pgx-operator', namespace: ns })).spec?.holderIdentity).to.equal('a');
    expect(mine.metadata?.resourceVersion).to.not.equal(lease.metadata?.resourceVersion);
  });

  it('defaults and validates custom objects against the CRD schema (422 Invalid, 400 for unknown fields under Strict)', async () => {
    const created = (await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-1', { ttl: '2h' }) })) as CustomObject;
    expect(created.spec).to.deep.equal({ templateRef: { name: 'app' }, ttl: '2h', expiryPolicy: 'Delete', pinned: true });
    expect(created.metadata?.generation).to.equal(1);

    const badTtl = await failure(custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-2', { ttl: '-1h' }) }));
    expect(badTtl.code).to.equal(422);
    expect(badTtl.reason).to.equal('Invalid');
    expect(badTtl.message).to.equal(`Branch.pgx.dev "pr-2" is invalid: spec.ttl: Invalid value: "-1h": spec.ttl in body should match '^([0-9]{1,5}[smhd])*0{0,4}[1-9][0-9]{0,4}[smhd]([0-9]{1,5}[smhd])*$'`);

    const badMemory = await failure(custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-3', { limits: { memory: 'lots' } }) }));
    expect(badMemory.message).to.contain('spec.limits.memory: Invalid value: "lots"');

    const longName = await failure(custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('b'.repeat(64)) }));
    expect(longName.message).to.contain('a Branch name must be at most 63 characters');

    const strict = await failure(custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-4', { tll: '2h' }), fieldValidation: 'Strict' }));
    expect(strict).to.deep.include({ code: 400, reason: 'BadRequest' });
    expect(strict.message).to.contain('unknown field "spec.tll"');
    // Without Strict an unknown field is pruned, as a real API server does.
    const pruned = (await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-5', { tll: '2h' }) })) as CustomObject;
    expect(pruned.spec).to.deep.equal({ templateRef: { name: 'app' }, expiryPolicy: 'Delete', pinned: true });

    // templateRef is immutable (a CEL transition rule in the CRD).
    const moved = await failure(custom.patchNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', name: 'pr-1', body: { spec: { templateRef: { name: 'other' } } } }, merge));
    expect(moved.message).to.contain('templateRef is immutable');
  });

  it('bumps generation on spec changes only, ignores status on the main endpoint and changes only status on /status', async () => {
    const base = { ...PGX, namespace: ns, plural: 'branches', name: 'pr-1' };
    const body = { ...branchBody('pr-1'), status: { phase: 'Ready' } };
    const created = (await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body })) as CustomObject;
    expect(created.status).to.equal(undefined);

    const labelled = (await custom.patchNamespacedCustomObject({ ...base, body: { metadata: { labels: { pr: '1' } } } }, merge)) as CustomObject;
    expect(labelled.metadata?.generation).to.equal(1);
    const pinned = (await custom.patchNamespacedCustomObject({ ...base, body: { spec: { pinned: false }, status: { phase: 'Ready' } } }, merge)) as CustomObject;
    expect(pinned.metadata?.generation).to.equal(2);
    expect(pinned.status).to.equal(undefined);

    const withStatus = (await custom.patchNamespacedCustomObjectStatus({ ...base, body: { spec: { pinned: true }, status: { phase: 'Ready', observedGeneration: 2 } } }, merge)) as CustomObject;
    expect(withStatus.status).to.deep.equal({ phase: 'Ready', observedGeneration: 2 });
    expect(withStatus.spec?.pinned).to.equal(false);
    expect(withStatus.metadata?.generation).to.equal(2);

    const replaced = (await custom.replaceNamespacedCustomObjectStatus({ ...base, body: { ...withStatus, status: { phase: 'Failed' } } })) as CustomObject;
    expect(replaced.status).to.deep.equal({ phase: 'Failed' });
    const stale = await failure(custom.replaceNamespacedCustomObjectStatus({ ...base, body: { ...withStatus, status: { phase: 'Pending' } } }));
    expect(stale.reason).to.equal('Conflict');
    const badPhase = await failure(custom.patchNamespacedCustomObjectStatus({ ...base, body: { status: { phase: 'Sleeping' } } }, merge));
    expect(badPhase.message).to.contain('status.phase: Unsupported value: "Sleeping"');

    // A write that changes nothing is not a write: same resourceVersion, no watch event.
    const again = (await custom.patchNamespacedCustomObjectStatus({ ...base, body: { status: { phase: 'Failed' } } }, merge)) as CustomObject;
    expect(again.metadata?.resourceVersion).to.equal(replaced.metadata?.resourceVersion);
    expect(api.writes('branches').map((w) => w.verb)).to.deep.equal(['create', 'patch', 'patch', 'patch', 'update', 'update', 'patch', 'patch']);
  });

  it('holds an object with finalizers until the last one is removed', async () => {
    const base = { ...PGX, namespace: ns, plural: 'branches', name: 'pr-1' };
    await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: { ...branchBody('pr-1'), metadata: { name: 'pr-1', finalizers: ['pgx.dev/drop-database'] } } });
    await custom.deleteNamespacedCustomObject(base);
    const deleting = (await custom.getNamespacedCustomObject(base)) as CustomObject;
    expect(deleting.metadata?.deletionTimestamp).to.be.a('string');
    expect(deleting.metadata?.generation).to.equal(2);
    const added = await failure(custom.patchNamespacedCustomObject({ ...base, body: { metadata: { finalizers: ['pgx.dev/drop-database', 'another'] } } }, merge));
    expect(added.message).to.contain('no new finalizers can be added if the object is being deleted');
    // A second delete changes nothing.
    await custom.deleteNamespacedCustomObject(base);
    expect(((await custom.getNamespacedCustomObject(base)) as CustomObject).metadata?.deletionTimestamp).to.equal(deleting.metadata?.deletionTimestamp);
    // Creating the name again while it is being deleted is refused.
    expect((await failure(custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-1') }))).reason).to.equal('AlreadyExists');

    await custom.patchNamespacedCustomObject({ ...base, body: [{ op: 'remove', path: '/metadata/finalizers/0' }] });
    expect((await failure(custom.getNamespacedCustomObject(base))).reason).to.equal('NotFound');
  });

  it('garbage-collects objects whose owner is gone, waiting for their finalizers, and releases them with Orphan', async () => {
    const owner = (await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-1') })) as CustomObject;
    const ownerRef = { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', name: 'pr-1', uid: owner.metadata!.uid!, controller: true, blockOwnerDeletion: true };
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'pr-1-db', ownerReferences: [ownerRef] } } });
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'pr-1-held', ownerReferences: [ownerRef], finalizers: ['test/hold'] } } });
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'unowned' } } });
    await custom.deleteNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', name: 'pr-1' });

    await until(async () => ((await core.listNamespacedSecret({ namespace: ns })).items.some((s) => s.metadata?.name === 'pr-1-db') ? null : true));
    const held = await until(async () => {
      const s = await core.readNamespacedSecret({ name: 'pr-1-held', namespace: ns });
      return s.metadata?.deletionTimestamp ? s : null;
    });
    expect(held.metadata?.finalizers).to.deep.equal(['test/hold']);
    await core.patchNamespacedSecret({ name: 'pr-1-held', namespace: ns, body: { metadata: { finalizers: null } } }, merge);
    expect((await core.listNamespacedSecret({ namespace: ns })).items.map((s) => s.metadata?.name)).to.deep.equal(['unowned']);

    const owner2 = (await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-2') })) as CustomObject;
    await core.createNamespacedSecret({ namespace: ns, body: { metadata: { name: 'pr-2-db', ownerReferences: [{ ...ownerRef, name: 'pr-2', uid: owner2.metadata!.uid! }] } } });
    await custom.deleteNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', name: 'pr-2', propagationPolicy: 'Orphan' });
    const orphan = await until(async () => {
      const s = await core.readNamespacedSecret({ name: 'pr-2-db', namespace: ns });
      return s.metadata?.ownerReferences === undefined ? s : null;
    });
    expect(orphan.metadata?.name).to.equal('pr-2-db');
  });

  it('feeds an informer (list + watch): add, update and delete events, and a label selector', async () => {
    const path = `/apis/pgx.dev/v1alpha1/namespaces/${ns}/branches`;
    await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('before') });
    const list = async (): Promise<KubernetesListObject<CustomObject>> => (await custom.listNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches' })) as KubernetesListObject<CustomObject>;
    const informer = makeInformer<CustomObject>(kc, path, list);
    const adds: string[] = [];
    informer.on('add', (o) => adds.push(o.metadata!.name!));
    const connected = new Promise<void>((resolve) => informer.on('connect', () => resolve()));
    const errors: unknown[] = [];
    informer.on('error', (e) => errors.push(e));
    await informer.start();
    await connected;
    try {
      expect(adds).to.deep.equal(['before']);
      const added = nextEvent<CustomObject>((cb) => informer.on('add', cb), (o) => o.metadata?.name === 'pr-1');
      await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-1') });
      expect((await added).spec?.templateRef).to.deep.equal({ name: 'app' });

      const updated = nextEvent<CustomObject>((cb) => informer.on('update', cb), (o) => o.status?.phase === 'Ready');
      await custom.patchNamespacedCustomObjectStatus({ ...PGX, namespace: ns, plural: 'branches', name: 'pr-1', body: { status: { phase: 'Ready' } } }, merge);
      expect((await updated).metadata?.name).to.equal('pr-1');
      expect(informer.get('pr-1', ns)?.status?.phase).to.equal('Ready');

      const deleted = nextEvent<CustomObject>((cb) => informer.on('delete', cb), (o) => o.metadata?.name === 'pr-1');
      await custom.deleteNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', name: 'pr-1' });
      await deleted;
      expect(informer.list(ns).map((o) => o.metadata?.name)).to.deep.equal(['before']);
      expect(errors).to.deep.equal([]);
    } finally {
      await informer.stop();
    }
  });

  it('resumes a watch after the stream ends, and relists after 410 Gone', async () => {
    const path = `/api/v1/namespaces/${ns}/configmaps`;
    // makeInformer applies its label selector to the watch only: the list function must apply it too.
    const informer = makeInformer(kc, path, () => core.listNamespacedConfigMap({ namespace: ns, labelSelector: 'app=pgx' }), 'app=pgx');
    const names = (): string[] => informer.list(ns).map((o) => o.metadata!.name!).sort();
    let connects = 0;
    const connectedTimes = (n: number): Promise<void> => new Promise((resolve) => informer.on('connect', () => ++connects >= n && resolve()));
    const first = connectedTimes(1);
    await informer.start();
    await first;
    try {
      const seen = nextEvent<KubernetesObject>((cb) => informer.on('add', cb), (o) => o.metadata?.name === 'a');
      await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'a', labels: { app: 'pgx' } } } });
      await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'ignored' } } });
      await seen;

      // The stream ends (an API server restart): the informer re-watches from its last resourceVersion.
      const reconnected = connectedTimes(2);
      api.endWatches();
      await reconnected;
      const b = nextEvent<KubernetesObject>((cb) => informer.on('add', cb), (o) => o.metadata?.name === 'b');
      await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'b', labels: { app: 'pgx' } } } });
      await b;

      // Every resourceVersion so far expires (an API server restart): resuming gets 410 and the informer
      // lists again, then watches on; an object leaving its label selector is a delete to it.
      api.store.compact();
      const relabelled = nextEvent<KubernetesObject>((cb) => informer.on('delete', cb), (o) => o.metadata?.name === 'a');
      const lists = (): number => api.requests.filter((r) => r.verb === 'list' && r.resource === 'configmaps').length;
      const listsBefore = lists();
      api.endWatches();
      await until(async () => (lists() > listsBefore ? true : null));
      await core.patchNamespacedConfigMap({ name: 'a', namespace: ns, body: { metadata: { labels: { app: 'moved' } } } }, merge);
      await relabelled;
      expect(api.requests.filter((r) => r.verb === 'watch' && r.code === 410)).to.have.length(1);
      const c = nextEvent<KubernetesObject>((cb) => informer.on('add', cb), (o) => o.metadata?.name === 'c');
      await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'c', labels: { app: 'pgx' } } } });
      await c;
      expect(names()).to.deep.equal(['b', 'c']);
    } finally {
      await informer.stop();
    }
  });
  it('streams a raw watch: replays changes after a resourceVersion, filters by field selector, ends with 410 as an ERROR event', async () => {
    const a = await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'a' }, data: { v: '1' } } });
    await core.patchNamespacedConfigMap({ name: 'a', namespace: ns, body: { data: { v: '2' } } }, merge);
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'b' } } });
    await core.deleteNamespacedConfigMap({ name: 'a', namespace: ns });

    const events: string[] = [];
    const ended = new Promise<unknown>((resolve) => {
      void new Watch(kc).watch(
        `/api/v1/namespaces/${ns}/configmaps`,
        { resourceVersion: a.metadata!.resourceVersion!, fieldSelector: 'metadata.name=a', timeoutSeconds: 1 },
        (type: string, obj: KubernetesObject & { data?: Record<string, string> }) => events.push(`${type} ${obj.metadata?.name} ${obj.data?.v}`),
        resolve,
      );
    });
    expect(await ended).to.equal(null); // the server ended the stream at timeoutSeconds
    expect(events).to.deep.equal(['MODIFIED a 2', 'DELETED a 2']);

    api.store.compact();
    const errors: { type: string; code: unknown }[] = [];
    await new Promise<unknown>((resolve) => {
      void new Watch(kc).watch(`/api/v1/namespaces/${ns}/configmaps`, { resourceVersion: a.metadata!.resourceVersion! }, (type: string, obj: { code?: number }) => errors.push({ type, code: obj.code }), resolve);
    });
    expect(errors).to.deep.equal([{ type: 'ERROR', code: 410 }]);
  });

  it('refuses server-side apply, strategic merge patch of a custom object and a failed JSON patch test', async () => {
    await custom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('pr-1') });
    const base = { ...PGX, namespace: ns, plural: 'branches', name: 'pr-1' };
    const ssa = await failure(custom.patchNamespacedCustomObject({ ...base, body: branchBody('pr-1'), fieldManager: 'test' }, setHeaderOptions('Content-Type', PatchStrategy.ServerSideApply)));
    expect(ssa).to.deep.include({ code: 415, reason: 'UnsupportedMediaType' });
    const smp = await failure(custom.patchNamespacedCustomObject({ ...base, body: { spec: { pinned: false } } }, setHeaderOptions('Content-Type', PatchStrategy.StrategicMergePatch)));
    expect(smp.code).to.equal(415);
    const test = await failure(custom.patchNamespacedCustomObject({ ...base, body: [{ op: 'test', path: '/spec/pinned', value: false }, { op: 'replace', path: '/spec/ttl', value: '1h' }] }));
    expect(test).to.deep.include({ code: 422, reason: 'Invalid' });
    expect(((await custom.getNamespacedCustomObject(base)) as CustomObject).spec?.ttl).to.equal(undefined);
  });

  it('serves a kind as soon as its CustomResourceDefinition is created, and stops when it is deleted', async () => {
    const crd = {
      apiVersion: 'apiextensions.k8s.io/v1',
      kind: 'CustomResourceDefinition',
      metadata: { name: 'widgets.example.com' },
      spec: {
        group: 'example.com',
        names: { kind: 'Widget', plural: 'widgets', singular: 'widget', listKind: 'WidgetList' },
        scope: 'Namespaced',
        versions: [{ name: 'v1', served: true, storage: true, schema: { openAPIV3Schema: { type: 'object', properties: { spec: { type: 'object', properties: { size: { type: 'integer', minimum: 1 } } } } } } }],
      },
    };
    const widgets = { group: 'example.com', version: 'v1', namespace: ns, plural: 'widgets' };
    expect((await failure(custom.listNamespacedCustomObject(widgets))).code).to.equal(404);
    await custom.createClusterCustomObject({ group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions', body: crd });
    await custom.createNamespacedCustomObject({ ...widgets, body: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'w' }, spec: { size: 2 } } });
    expect((await failure(custom.createNamespacedCustomObject({ ...widgets, body: { apiVersion: 'example.com/v1', kind: 'Widget', metadata: { name: 'v' }, spec: { size: 0 } } }))).reason).to.equal('Invalid');
    await custom.deleteClusterCustomObject({ group: 'apiextensions.k8s.io', version: 'v1', plural: 'customresourcedefinitions', name: 'widgets.example.com' });
    expect((await failure(custom.listNamespacedCustomObject(widgets))).code).to.equal(404);
  });
  it('round-trips what the Runtime controller writes through the typed clients: StatefulSet, Services, PDB, Pod status, Event', async () => {
    const labels = { 'app.kubernetes.io/instance': 'main' };
    const sts = await kc.makeApiClient(AppsV1Api).createNamespacedStatefulSet({
      namespace: ns,
      body: {
        metadata: { name: 'main', labels },
        spec: {
          replicas: 2,
          serviceName: 'main-pods',
          selector: { matchLabels: labels },
          template: { metadata: { labels }, spec: { containers: [{ name: 'pgx', image: 'pgx:dev', ports: [{ containerPort: 6432 }] }] } },
          volumeClaimTemplates: [{ metadata: { name: 'data' }, spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '10Gi' } } } }],
        },
      },
    });
    expect(sts.metadata?.generation).to.equal(1);
    expect(sts.spec?.volumeClaimTemplates?.[0]?.spec?.resources?.requests).to.deep.equal({ storage: '10Gi' });

    const headless = await core.createNamespacedService({ namespace: ns, body: { metadata: { name: 'main-pods' }, spec: { clusterIP: 'None', selector: labels, ports: [{ port: 6432 }] } } });
    expect(headless.spec?.clusterIP).to.equal('None');
    const clients = await core.createNamespacedService({ namespace: ns, body: { metadata: { name: 'main' }, spec: { selector: labels, ports: [{ port: 6432 }] } } });
    expect(clients.spec?.clusterIP).to.match(/^10\.96\./);
    // An update that leaves clusterIP out keeps the allocated one, as the API server does.
    const replaced = await core.replaceNamespacedService({ name: 'main', namespace: ns, body: { ...clients, spec: { ...clients.spec, clusterIP: undefined, clusterIPs: undefined } } });
    expect(replaced.spec?.clusterIP).to.equal(clients.spec?.clusterIP);

    const pdb = await kc.makeApiClient(PolicyV1Api).createNamespacedPodDisruptionBudget({ namespace: ns, body: { metadata: { name: 'main' }, spec: { maxUnavailable: 1, selector: { matchLabels: labels } } } });
    expect(pdb.spec?.maxUnavailable).to.equal(1);

    // Nothing runs pods here: a test plays the StatefulSet controller and the kubelet itself.
    await core.createNamespacedPod({ namespace: ns, body: { metadata: { name: 'main-0', labels }, spec: { containers: [{ name: 'pgx', image: 'pgx:dev' }] } } });
    const ready = await core.patchNamespacedPodStatus(
      { name: 'main-0', namespace: ns, body: { status: { phase: 'Running', podIP: '127.0.0.1', conditions: [{ type: 'Ready', status: 'True' }] } } },
      merge,
    );
    expect(ready.status?.podIP).to.equal('127.0.0.1');
    expect((await core.listNamespacedPod({ namespace: ns, labelSelector: 'app.kubernetes.io/instance=main' })).items.map((p) => p.status?.phase)).to.deep.equal(['Running']);

    const event = await core.createNamespacedEvent({
      namespace: ns,
      body: { metadata: { generateName: 'main.' }, involvedObject: { kind: 'Runtime', name: 'main', namespace: ns }, reason: 'Scaled', message: 'StatefulSet main has 2 replicas', type: 'Normal' },
    });
    expect(event.metadata?.name).to.match(/^main\./);
    const forRuntime = await core.listNamespacedEvent({ namespace: ns, fieldSelector: 'involvedObject.kind=Runtime,involvedObject.name=main' });
    expect(forRuntime.items.map((e) => e.reason)).to.deep.equal(['Scaled']);
  });

  it('authorizes a service account by RBAC: Roles in their namespace, ClusterRoles everywhere, subresources and names apart', async () => {
    const rbac = KubernetesObjectApi.makeApiClient(kc);
    const create = (o: Record<string, unknown>) => rbac.create(o as unknown as KubernetesObject);
    await core.createNamespacedServiceAccount({ namespace: ns, body: { metadata: { name: 'robot' } } });
    const robotKc = api.serviceAccountKubeConfig(ns, 'robot');
    const robot = robotKc.makeApiClient(CoreV1Api);
    const robotCustom = robotKc.makeApiClient(CustomObjectsApi);
    const user = 'system:serviceaccount:default:robot';
    // Nothing bound yet: everything but discovery is refused.
    expect((await robotKc.makeApiClient(VersionApi).getCode()).major).to.equal('1');
    const refused = await failure(robot.listNamespacedConfigMap({ namespace: ns }));
    expect(refused).to.deep.equal({ code: 403, reason: 'Forbidden', message: `configmaps is forbidden: User "${user}" cannot list resource "configmaps" in API group "" in the namespace "default"` });

    await create({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'Role', metadata: { name: 'r', namespace: ns }, rules: [
      { apiGroups: [''], resources: ['configmaps'], verbs: ['list', 'create'] },
      { apiGroups: [''], resources: ['configmaps'], verbs: ['get'], resourceNames: ['allowed'] },
      { apiGroups: ['pgx.dev'], resources: ['branches'], verbs: ['create', 'patch'] },
    ] });
    await create({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'RoleBinding', metadata: { name: 'r', namespace: ns }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'Role', name: 'r' }, subjects: [{ kind: 'ServiceAccount', name: 'robot', namespace: ns }] });
    expect((await robot.listNamespacedConfigMap({ namespace: ns })).items).to.deep.equal([]);
    await robot.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'allowed' } } });
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'other' } } });
    expect((await robot.readNamespacedConfigMap({ name: 'allowed', namespace: ns })).metadata?.name).to.equal('allowed');
    expect((await failure(robot.readNamespacedConfigMap({ name: 'other', namespace: ns }))).message).to.equal(`configmaps "other" is forbidden: User "${user}" cannot get resource "configmaps" in API group "" in the namespace "default"`);
    // A Role grants in its namespace only, and not across namespaces.
    expect((await failure(robot.listNamespacedConfigMap({ namespace: 'elsewhere' }))).code).to.equal(403);
    expect((await failure(robot.listConfigMapForAllNamespaces())).message).to.contain('at the cluster scope');
    // branches does not grant branches/status.
    await robotCustom.createNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', body: branchBody('b') });
    await robotCustom.patchNamespacedCustomObject({ ...PGX, namespace: ns, plural: 'branches', name: 'b', body: { metadata: { labels: { a: 'b' } } } }, merge);
    expect((await failure(robotCustom.patchNamespacedCustomObjectStatus({ ...PGX, namespace: ns, plural: 'branches', name: 'b', body: { status: { phase: 'Ready' } } }, merge))).message).to.contain('cannot patch resource "branches/status" in API group "pgx.dev"');

    // A ClusterRole bound by a ClusterRoleBinding to a group the account is in: everywhere.
    await create({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRole', metadata: { name: 'system:pod-reader' }, rules: [{ apiGroups: [''], resources: ['pods'], verbs: ['list'] }] });
    await create({ apiVersion: 'rbac.authorization.k8s.io/v1', kind: 'ClusterRoleBinding', metadata: { name: 'pod-readers' }, roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'system:pod-reader' }, subjects: [{ kind: 'Group', name: 'system:serviceaccounts:default' }] });
    expect((await robot.listPodForAllNamespaces()).items).to.deep.equal([]);
    expect((await robot.listNamespacedPod({ namespace: 'elsewhere' })).items).to.deep.equal([]);
    // The request log says who asked, and what was refused.
    const mine = api.requests.filter((r) => r.user === user);
    expect(mine.filter((r) => r.code === 403).map((r) => `${r.verb} ${r.apiGroup}/${r.resource}`)).to.deep.equal(['list /configmaps', 'get /configmaps', 'list /configmaps', 'list /configmaps', 'patch pgx.dev/branches/status']);

    // A token whose ServiceAccount is gone is no longer accepted.
    await core.deleteNamespacedServiceAccount({ name: 'robot', namespace: ns });
    const gone = await robot.listNamespacedPod({ namespace: ns }).then(() => null, (e: unknown) => e);
    expect(gone).to.be.instanceOf(ApiException);
    expect((gone as ApiException<unknown>).code).to.equal(401);
  });
});
