// One template build per spec generation per pod, whatever the Template's status writes do. A slow
// build (pg_sleep in its script) while someone else keeps changing the Template (a label: a new
// resourceVersion each time, so every status write the operator computed from an older read is refused
// with 409) was rebuilt with replace: true on every conflict retry, because the pass decided from a
// status that did not show its own refused write. The runtime's template generation counts the builds.

import { expect } from 'chai';
import type { Operator } from '../../src/operator/operator.js';
import { MERGE_PATCH } from '../../src/operator/kube.js';
import type { TestRuntime } from '../helpers/runtime.js';
import { apiOf, apply, condition, makeRuntime, NS, PGX, read, settle, startCluster, stopCluster, startOperator, startRuntimes, waitFor, waitForCondition, type Cluster } from './harness.js';

const SCHEMA = 'CREATE TABLE items (id int PRIMARY KEY);';

describe('operator: one template build per spec generation per pod', function () {
  this.timeout(180_000);
  let c: Cluster;
  let runtimes: TestRuntime[] = [];
  let op: Operator;

  before(async function () {
    c = await startCluster();
    runtimes = await startRuntimes(2);
    await makeRuntime(c, 'main', runtimes);
    op = await startOperator(c);
    await waitFor('leadership', async () => (op.isLeader ? true : null));
  });

  after(async function () {
    await op?.stop();
    await Promise.all(runtimes.map((r) => r.stop()));
    await stopCluster(c);
  });

  const generations = async (): Promise<number[]> =>
    Promise.all(runtimes.map(async (rt) => (await apiOf(rt).listTemplates()).find((t) => t.name === 'app')?.generation ?? -1));

  it('does not rebuild when its status writes conflict with changes made meanwhile', async function () {
    await apply(c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: 'main' }, source: { sql: SCHEMA } } });
    await waitForCondition(c, 'templates', 'app', 'Ready', 'Sealed');
    const before = await generations();

    // A slow build of generation 2, while the Template changes under it every 100 ms.
    await c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'templates', name: 'app', body: { spec: { source: { sql: `${SCHEMA} SELECT pg_sleep(1);` } } } }, MERGE_PATCH);
    let touches = 0;
    let conflicts = 0;
    const statusConflicts = () => c.api.requests.filter((r) => r.resource === 'templates/status' && r.code === 409).length;
    const conflictsBefore = statusConflicts();
    const deadline = performance.now() + 6_000;
    while (performance.now() < deadline) {
      await c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'templates', name: 'app', body: { metadata: { labels: { touched: String(++touches) } } } }, MERGE_PATCH);
      await new Promise((r) => setTimeout(r, 100));
    }
    conflicts = statusConflicts() - conflictsBefore;
    const ready = await waitFor('app Sealed at generation 2 on both pods', async () => {
      const t = await read(c, 'templates', 'app');
      const pods = (t?.status as { pods?: { observedGeneration?: number; phase: string }[] } | undefined)?.pods ?? [];
      return condition(t, 'Ready')?.reason === 'Sealed' && pods.length === 2 && pods.every((p) => p.observedGeneration === 2) ? t : null;
    });
    await settle(op, () => op.metrics.reconcileCount('template'));
    // The test produced what it is about: status writes refused while the build ran.
    expect(conflicts, 'status writes refused with 409').to.be.at.least(1);
    const after = await generations();
    expect(after.map((g, i) => g - before[i]!), `runtime template generations ${before} -> ${after}`).to.deep.equal([1, 1]);
    // And the status shows the build that is there.
    const pods = (ready.status as { pods: { pod: string; templateGeneration: number }[] }).pods;
    expect(pods.map((p) => p.templateGeneration)).to.deep.equal(after);
  });
});
