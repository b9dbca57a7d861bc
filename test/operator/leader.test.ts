// Leader election: two operator replicas against one API server never both act. The follower keeps its
// caches warm but reconciles nothing; when the leader steps down, the follower takes the Lease and acts.

import { CoordinationV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import type { Operator } from '../../src/operator/operator.js';
import { apply, NS, startCluster, stopCluster, startOperator, waitFor, waitForCondition, type Cluster } from './harness.js';

function branchBody(name: string) {
  return { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: 'missing' } } };
}

describe('operator leader election (Lease)', function () {
  this.timeout(60_000);
  let c: Cluster;
  const ops: Operator[] = [];
  let sampler: NodeJS.Timeout | null = null;
  let bothLed = 0;

  before(async function () {
    c = await startCluster();
  });

  after(async function () {
    if (sampler) clearInterval(sampler);
    await Promise.all(ops.map((o) => o.stop()));
    await stopCluster(c);
  });

  it('lets one replica act at a time, and hands over when the leader stops', async function () {
    const a = await startOperator(c, { identity: 'replica-a' });
    ops.push(a);
    await waitFor('replica-a to lead', async () => (a.isLeader ? true : null));
    // MicroTime, as a real API server requires (it refuses three fractional digits with 400); the double
    // stores what it is given, so the format is checked here.
    const written = await c.kc.makeApiClient(CoordinationV1Api).readNamespacedLease({ name: 'pgx-operator', namespace: NS });
    for (const t of [written.spec?.renewTime, written.spec?.acquireTime]) expect(String(t)).to.match(/^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$/);
    const b = await startOperator(c, { identity: 'replica-b' });
    ops.push(b);
    sampler = setInterval(() => {
      if (a.isLeader && b.isLeader) bothLed++;
    }, 20);

    await apply(c, 'branches', branchBody('first'));
    await waitForCondition(c, 'branches', 'first', 'Ready', 'TemplateNotFound');
    // Let b try for the Lease many times (its retry period is 250 ms, the lease 2 s).
    const leases = (): number => c.api.requests.filter((r) => r.resource === 'leases').length;
    const seen = leases();
    await waitFor('b to try the Lease again and again', async () => (leases() >= seen + 16 ? true : null));
    expect(a.isLeader).to.equal(true);
    expect(b.isLeader).to.equal(false);
    expect(await b.metrics.reconcileCount()).to.equal(0);
    expect(await a.metrics.reconcileCount()).to.be.greaterThan(0);

    // The leader stops (a rollout): it gives the Lease up, and b takes over and acts.
    await a.stop();
    ops.shift();
    await waitFor('replica-b to lead', async () => (b.isLeader ? true : null));
    await apply(c, 'branches', branchBody('second'));
    await waitForCondition(c, 'branches', 'second', 'Ready', 'TemplateNotFound');
    expect(await b.metrics.reconcileCount()).to.be.greaterThan(0);
    const lease = await c.kc.makeApiClient((await import('@kubernetes/client-node')).CoordinationV1Api).readNamespacedLease({ name: 'pgx-operator', namespace: 'default' });
    expect(lease.spec?.holderIdentity).to.equal('replica-b');
    expect(lease.spec?.leaseTransitions).to.equal(1);
    expect(bothLed).to.equal(0);
  });

  it('takes over from a leader that vanished without giving the Lease up, only after the lease duration', async function () {
    const b = ops[0]!;
    // Another holder wrote the Lease (a replica that then died): b must stop acting, and only take it
    // back once that holder has not renewed for a lease duration.
    const { CoordinationV1Api } = await import('@kubernetes/client-node');
    const leases = c.kc.makeApiClient(CoordinationV1Api);
    // b renews the Lease meanwhile: read and replace until our write lands on the version we read.
    for (let attempt = 0; ; attempt++) {
      const lease = await leases.readNamespacedLease({ name: 'pgx-operator', namespace: 'default' });
      try {
        await leases.replaceNamespacedLease({ name: 'pgx-operator', namespace: 'default', body: { ...lease, spec: { ...lease.spec, holderIdentity: 'ghost', renewTime: new Date() } } });
        break;
      } catch (err) {
        if ((err as { code?: number }).code !== 409 || attempt >= 20) throw err;
      }
    }
    await waitFor('b to step down', async () => (b.isLeader ? null : true));
    await waitFor('b to take the Lease back from the ghost', async () => (b.isLeader ? true : null));
    const after = await leases.readNamespacedLease({ name: 'pgx-operator', namespace: 'default' });
    expect(after.spec?.holderIdentity).to.equal('replica-b');
  });
});
