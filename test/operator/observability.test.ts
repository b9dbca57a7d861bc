// What a platform team watches the operator by: metric names without a doubled prefix, Events that
// recur aggregated into one (count and lastTimestamp, as the kubelet's recorder does), and owned
// objects watched, so a PodDisruptionBudget edited by hand is put back at once, not at a resync.

import { PolicyV1Api } from '@kubernetes/client-node';
import { expect } from 'chai';
import { systemClock } from '../../src/clock.js';
import { EventRecorder } from '../../src/operator/events.js';
import { makeKube, MERGE_PATCH, type CustomObject } from '../../src/operator/kube.js';
import { OperatorMetrics } from '../../src/operator/metrics.js';
import type { Operator } from '../../src/operator/operator.js';
import { testLogger } from '../helpers/runtime.js';
import { apply, NS, startCluster, stopCluster, startOperator, waitFor, type Cluster } from './harness.js';

describe('operator: metrics, Events and watched owned objects', function () {
  this.timeout(60_000);
  let c: Cluster;
  let op: Operator | undefined;

  before(async () => {
    c = await startCluster();
  });
  after(async () => {
    await op?.stop();
    await stopCluster(c);
  });

  it('names its process metrics pgx_operator_process_*, not pgx_operator_process_process_*', async () => {
    const text = await new OperatorMetrics({ defaultMetrics: true }).registry.metrics();
    const names = [...new Set(text.split('\n').filter((l) => l.startsWith('# TYPE ')).map((l) => l.split(' ')[2]!))];
    expect(names).to.include('pgx_operator_process_cpu_seconds_total');
    expect(names).to.include('pgx_operator_nodejs_eventloop_lag_seconds');
    expect(names.filter((n) => n.includes('process_process'))).to.deep.equal([]);
    expect(names.filter((n) => !n.startsWith('pgx_operator_'))).to.deep.equal([]);
  });

  it('aggregates an Event that recurs into one, counting it', async () => {
    const recorder = new EventRecorder(makeKube(c.kc), systemClock, testLogger(), 'test');
    const obj: CustomObject = { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: 'b', namespace: NS, uid: 'uid-b' } };
    for (let i = 0; i < 3; i++) await recorder.record(obj, 'Warning', 'TemplateNotOnPod', 'pod main-0 refused it');
    await recorder.record(obj, 'Warning', 'TemplateNotOnPod', 'pod main-1 refused it');
    const events = (await c.core.listNamespacedEvent({ namespace: NS, fieldSelector: 'involvedObject.name=b' })).items;
    expect(events.map((e) => [e.message, e.count]).sort()).to.deep.equal([
      ['pod main-0 refused it', 3],
      ['pod main-1 refused it', 1],
    ]);
  });

  it("puts back a Runtime's PodDisruptionBudget edited by hand, from the watch (resync off)", async () => {
    op = await startOperator(c, { resyncMs: 3_600_000 });
    await waitFor('leadership', async () => (op!.isLeader ? true : null));
    await apply(c, 'runtimes', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Runtime', metadata: { name: 'main' }, spec: { replicas: 2, image: 'ghcr.io/pgx/runtime:test' } });
    const policy = c.kc.makeApiClient(PolicyV1Api);
    await waitFor('the PodDisruptionBudget', () => policy.readNamespacedPodDisruptionBudget({ name: 'main', namespace: NS }).catch(() => null));
    await policy.patchNamespacedPodDisruptionBudget({ name: 'main', namespace: NS, body: { spec: { maxUnavailable: 2 } } }, MERGE_PATCH);
    const restored = await waitFor('maxUnavailable back to 1', async () => {
      const pdb = await policy.readNamespacedPodDisruptionBudget({ name: 'main', namespace: NS });
      return pdb.spec?.maxUnavailable === 1 ? pdb : null;
    }, 20_000);
    expect(restored.spec?.selector).to.deep.equal({ matchLabels: { 'pgx.dev/runtime': 'main' } });
  });
});
