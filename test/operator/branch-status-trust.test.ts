// A Branch's status is not trusted: whoever may write branches/status (a namespace admin role with
// resources ["*"] includes the subresource) could name another Branch's database there. The operator
// acts only on the database it derives for the Branch (its Template and uid) on a pod of its Runtime:
// a forged status gets Ready False StatusTampered, no credential is made for the database it names, and
// deleting the Branch drops nothing (a Warning Event says why).

import { expect } from 'chai';
import { MERGE_PATCH } from '../../src/operator/kube.js';
import { apiOf, apply, condition, makePod, NS, PGX, read, remove, statusOf, useOperator, waitFor, waitForCondition, waitForEvents, waitForGone } from './harness.js';

interface BranchStatus {
  phase?: string;
  pod?: string;
  database?: string;
}

const branch = (name: string) => ({ apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name }, spec: { templateRef: { name: 'app' } } });

describe('operator: a Branch status naming a database or pod that is not its own', function () {
  this.timeout(180_000);
  const setup = useOperator();

  before(async function () {
    await apply(setup.c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'app' }, spec: { runtimeRef: { name: 'main' }, source: { sql: 'CREATE TABLE t (x int);' } } });
    await waitForCondition(setup.c, 'templates', 'app', 'Ready', 'Sealed');
  });

  /** What someone with write access to branches/status does: a merge patch of the subresource. */
  const forge = (name: string, status: BranchStatus) =>
    setup.c.custom.patchNamespacedCustomObjectStatus({ ...PGX, namespace: NS, plural: 'branches', name, body: { status } }, MERGE_PATCH);
  const secretOf = (name: string) => setup.c.core.readNamespacedSecret({ name, namespace: NS }).catch(() => null);

  it("neither makes a credential for, nor drops, another Branch's database named in its status", async function () {
    await apply(setup.c, 'branches', branch('victim'));
    const victim = statusOf<BranchStatus>(await waitForCondition(setup.c, 'branches', 'victim', 'Ready', 'DatabaseReady'));
    await apply(setup.c, 'branches', branch('attacker'));
    const own = statusOf<BranchStatus>(await waitForCondition(setup.c, 'branches', 'attacker', 'Ready', 'DatabaseReady'));

    // The victim's database in the attacker's status, and the attacker's Secret gone: a Secret made
    // again now would carry a credential for the database the status names.
    await forge('attacker', { database: victim.database! });
    await setup.c.core.deleteNamespacedSecret({ name: 'attacker-db', namespace: NS });
    const refused = await waitFor('the forged status refused, or a Secret made for it', async () => {
      const o = await read(setup.c, 'branches', 'attacker');
      return condition(o, 'Ready')?.reason === 'StatusTampered' || (await secretOf('attacker-db')) !== null ? o : null;
    });
    expect(condition(refused, 'Ready')?.reason).to.equal('StatusTampered');
    expect(condition(refused, 'Ready')?.message).to.contain(`status.database is ${victim.database}, but this Branch's database is ${own.database}`);
    expect(statusOf<BranchStatus>(refused).phase).to.equal('Failed');
    // Resyncs (every second here) come and go, and none makes the Secret, so none made a credential.
    await new Promise((r) => setTimeout(r, 3_000));
    await setup.op.idle();
    expect(await secretOf('attacker-db')).to.equal(null);

    // Deleting the attacker's Branch drops nothing: the victim keeps its database, and is still Ready.
    await remove(setup.c, 'branches', 'attacker');
    await waitForGone(setup.c, 'branches', 'attacker');
    await waitForEvents(setup.c, 'attacker', ['StatusTampered']);
    expect((await apiOf(setup.runtimes[0]!).getDatabase(victim.database!)).name).to.equal(victim.database);
    expect(condition(await read(setup.c, 'branches', 'victim'), 'Ready')?.reason).to.equal('DatabaseReady');
    // The attacker's own database, which its status no longer named, was left too (dropped here by hand).
    await apiOf(setup.runtimes[0]!).dropDatabase(own.database!);
    await remove(setup.c, 'branches', 'victim');
    await waitForGone(setup.c, 'branches', 'victim');
  });

  it("trusts a database named under the Runtime's earlier engine.prefix: a prefix change is no tampering", async function () {
    await apply(setup.c, 'branches', branch('before-prefix'));
    const s = statusOf<BranchStatus>(await waitForCondition(setup.c, 'branches', 'before-prefix', 'Ready', 'DatabaseReady'));
    await setup.c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', name: 'main', body: { spec: { engine: { prefix: 'pr_' } } } }, MERGE_PATCH);
    try {
      await waitFor('the operator to see the new prefix', async () => ((await read(setup.c, 'runtimes', 'main'))?.spec as { engine?: { prefix?: string } }).engine?.prefix === 'pr_');
      // A pass over the Branch (its Secret gone: the pass makes it again, for its own database).
      await setup.c.core.deleteNamespacedSecret({ name: 'before-prefix-db', namespace: NS });
      await waitFor('the Secret made again', () => secretOf('before-prefix-db'));
      const o = await read(setup.c, 'branches', 'before-prefix');
      expect(condition(o, 'Ready')?.reason).to.equal('DatabaseReady');
      expect(statusOf<BranchStatus>(o).database).to.equal(s.database);
    } finally {
      await setup.c.custom.patchNamespacedCustomObject({ ...PGX, namespace: NS, plural: 'runtimes', name: 'main', body: { spec: { engine: { prefix: 'tdb_' } } } }, MERGE_PATCH);
    }
    await remove(setup.c, 'branches', 'before-prefix');
    await waitForGone(setup.c, 'branches', 'before-prefix');
  });

  it("does not let a forged status hold a Template's deletion", async function () {
    // A Branch of a Template not made yet waits; its status then claims a database on main-0.
    await apply(setup.c, 'branches', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Branch', metadata: { name: 'pinner' }, spec: { templateRef: { name: 'later' } } });
    await waitFor('the Branch to wait for its Template', async () => statusOf<BranchStatus>(await read(setup.c, 'branches', 'pinner')).phase);
    await forge('pinner', { pod: 'main-0', database: 'tdb_later__000000000000' });
    await apply(setup.c, 'templates', { apiVersion: 'pgx.dev/v1alpha1', kind: 'Template', metadata: { name: 'later' }, spec: { runtimeRef: { name: 'main' }, source: { sql: 'CREATE TABLE t (x int);' } } });
    await waitForCondition(setup.c, 'templates', 'later', 'Ready', 'Sealed');
    await remove(setup.c, 'templates', 'later');
    await waitForGone(setup.c, 'templates', 'later');
    await remove(setup.c, 'branches', 'pinner');
    await waitForGone(setup.c, 'branches', 'pinner');
  });

  it("acts on no pod but its Runtime's: a pod of another Runtime in status is refused", async function () {
    await apply(setup.c, 'branches', branch('moved'));
    const s = statusOf<BranchStatus>(await waitForCondition(setup.c, 'branches', 'moved', 'Ready', 'DatabaseReady'));
    // A pod named like one of main's, labelled for another Runtime (reaching the same test runtime).
    await makePod(setup.c, 'other', 'main-9', setup.runtimes[0]!);
    await forge('moved', { pod: 'main-9' });
    const refused = await waitForCondition(setup.c, 'branches', 'moved', 'Ready', 'StatusTampered');
    expect(condition(refused, 'Ready')?.message).to.contain("status.pod main-9 is not a pod of the Branch's Runtime main");
    await remove(setup.c, 'branches', 'moved');
    await waitForGone(setup.c, 'branches', 'moved');
    await waitForEvents(setup.c, 'moved', ['StatusTampered']);
    // Released without a drop: its database on main-0 is still there (dropped here by hand).
    expect((await apiOf(setup.runtimes[0]!).getDatabase(s.database!)).name).to.equal(s.database);
    await apiOf(setup.runtimes[0]!).dropDatabase(s.database!);
    await setup.c.core.deleteNamespacedPod({ name: 'main-9', namespace: NS });
  });
});
