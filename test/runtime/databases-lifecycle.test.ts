// The facade owns its connections and timers: after stop() nothing of it stays open (every worker,
// pool, janitor and metadata connection closed, every timer cleared), and stop() is idempotent.

import { expect } from 'chai';
import { waitFor } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { createTemplateDatabase, FAST, startHarness, stopBuiltInDatabases } from './databases-harness.js';

/** Handles the facade could leak: Unix sockets to PostgreSQL and timers. */
async function handles(): Promise<Record<string, number>> {
  await new Promise((r) => setImmediate(r));
  const counts: Record<string, number> = { PipeWrap: 0, Timeout: 0 };
  for (const kind of process.getActiveResourcesInfo()) if (kind in counts) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

describe('runtime: disposable databases lifecycle', function () {
  this.timeout(120_000);
  let rt: TestRuntime;

  before(async function () {
    rt = await startTestRuntime();
    await stopBuiltInDatabases(rt);
  });

  after(async function () {
    await rt?.stop();
  });

  it('leaves nothing open after stop()', async function () {
    const before = await handles();
    const h = await startHarness({ rt, settings: { ...FAST, poolSize: 1 } });
    await createTemplateDatabase(h, 'tpl_app');
    await h.dbs.operations.seal('tpl_app', 'postgres');
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__a' });
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__b' });
    await waitFor('the janitor to drop both', async () => (await h.dbs.operations.status()).databases.ephemeral === 0);
    await h.admin.close();
    await h.stopDatabases();
    await h.dbs.stop();
    // A closed socket's handle goes on the next turns of the event loop.
    await waitFor('handles to be released', async () => JSON.stringify(await handles()) === JSON.stringify(before), 5000).catch(() => undefined);
    expect(await handles()).to.deep.equal(before);
  });

  it('refuses to mint once stopped, and still passes other names through', async function () {
    const h = await startHarness({ rt, settings: { poolSize: 0 } });
    await h.admin.close();
    await h.stopDatabases();
    const err = await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__late' }).then(
      () => null,
      (e: Error & { sqlstate?: string }) => e,
    );
    expect(err?.sqlstate).to.equal('57P03');
    await h.dbs.router.route({ user: 'postgres', database: 'postgres' });
  });
});
