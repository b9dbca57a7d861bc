// A warm pool grown past --pool-size that the disk holds back says why, in the status document
// (`held`) and in `pgx status`, on a real small filesystem: where files are copied, extra spares stay
// under a tenth of the free space ('disk-share'); under --min-free-disk every refill stops ('disk-low').
// Without the reason a pool read "1/3 ready" for good, as if its refills were stuck.

import { expect } from 'chai';
import path from 'node:path';
import { systemClock } from '../../src/clock.js';
import { ApiMetrics } from '../../src/api/metrics.js';
import { formatStatus } from '../../src/cli/status.js';
import type { StatusBody } from '../../src/api/contract.js';
import { silentLogger } from '../../src/log.js';
import { DiskGuard } from '../../src/runtime/postgres/disk-guard.js';
import { waitFor } from '../helpers/commands.js';
import { fill, tmpfsForSuite } from '../helpers/tmpfs.js';
import { createTemplateDatabase, startHarness, type Harness } from './databases-harness.js';

describe('runtime: a warm pool held below its size by the disk', function () {
  this.timeout(120_000);
  let h: Harness | undefined;
  let guard: DiskGuard | undefined;

  after(async function () {
    await h?.stop();
    await guard?.stop();
  });
  // 40 MB: a tenth of what is free is less than one spare (an empty database is about 7.5 MB).
  const mounted = tmpfsForSuite('pgx-pool-held-', '40m');

  it("says 'disk-share' while extra spares would take over a tenth of the free space, and 'disk-low' under --min-free-disk", async function () {
    // The guard watches the tmpfs; the spares are on the runtime's own disk. What the pool reads is
    // the guard's free space, which is all this test needs to be real.
    guard = new DiskGuard({
      dataDir: mounted(),
      minFree: { mb: 16 },
      intervalMs: 50,
      connect: () => Promise.reject(new Error('not used: the CHECKPOINT on a low disk is not this test')),
      cancelStatements: () => 0,
      postgresUp: () => true,
      clock: systemClock,
      logger: silentLogger,
    });
    await guard.start();
    h = await startHarness({
      settings: { graceSeconds: 3600, poolSize: 1, poolMax: 4 },
      storage: { filesystem: 'tmpfs', clone: false, detail: 'files are copied (this test)' },
      disk: guard,
    });
    const harness = h;
    const pool = async (): Promise<StatusBody['pool'][string]> => (await harness.dbs.operations.status()).pool['tpl_app']!;
    // GET /metrics as the API renders it, from the same status document.
    const metrics = new ApiMetrics({ size: 1, max: 4 });
    const scrape = async (): Promise<string> => metrics.render((await harness.dbs.operations.status()) as StatusBody, harness.rt.runtime.engine.stats());
    await createTemplateDatabase(h, 'tpl_app');
    await h.dbs.operations.seal('tpl_app', 'postgres');
    await waitFor('the first spare', async () => (await pool()).ready === 1, 60_000);
    expect((await pool()).held, 'a full pool is held by nothing').to.equal(null);
    expect(await scrape()).to.not.match(/^pgx_pool_held\{/m);

    // Two mints back to back: the second finds the refill behind the first still copying, and the
    // pool grows to two (pool-burst.test.ts); the second spare does not fit.
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__first' });
    await h.dbs.router.route({ user: 'postgres', database: 'tdb_tpl_app__second' });
    expect((await pool()).size, 'grown past --pool-size').to.equal(2);
    await waitFor('the pool refilled to --pool-size and held there', async () => {
      const p = await pool();
      return p.ready === 1 && p.held === 'disk-share';
    }, 60_000);
    const status = (await h.dbs.operations.status()) as StatusBody;
    expect(formatStatus(status)).to.match(/^pool tpl_app\s+1\/\d ready, .*; held here: one more spare would take over a tenth of the free disk \(files are copied, not cloned\)$/m);
    expect(await scrape()).to.include('pgx_pool_held{template="tpl_app",reason="disk-share"} 1');

    fill(path.join(mounted(), 'ballast'));
    await waitFor('the disk guard to see the disk low', async () => !guard!.hasRoom(), 10_000);
    expect((await pool()).held).to.equal('disk-low');
    expect(await scrape()).to.include('pgx_pool_held{template="tpl_app",reason="disk-low"} 1').and.not.include('reason="disk-share"');
    expect(formatStatus((await h.dbs.operations.status()) as StatusBody)).to.match(/^pool tpl_app\s+1\/\d ready, .*; refills stopped: the disk is low \(free space, below\)$/m);
  });
});
