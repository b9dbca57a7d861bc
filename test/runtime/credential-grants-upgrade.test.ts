// A template sealed by an older PGX, when the credentials' group had ALL on the template's tables
// (TRIGGER and MAINTAIN with it), still seals no trap for the runtime that reads it: at start its
// record stops counting as carrying the group's grants, so a credential of a copy has them made inside
// its database again, which takes TRIGGER and MAINTAIN back (credentials.ts TABLE_RIGHTS). Without
// that, a credential could put a trigger on the template's table that runs as whoever writes it.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { ApiClient } from '../../src/api/client.js';
import { freshDataDir, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-grants-0123456789abcdef';

describe('runtime: templates sealed when credentials had ALL on their tables', function () {
  this.timeout(120_000);
  let rt: TestRuntime | undefined;
  let dataDir = '';

  const api = (r: TestRuntime): ApiClient => new ApiClient({ url: `http://127.0.0.1:${r.runtime.api!.port}`, token: TOKEN });

  /** On PostgreSQL's own socket: the engine hides pgx_control and refuses a sealed template's name. */
  async function direct(r: TestRuntime, database: string, sql: string): Promise<void> {
    const c = await r.runtime.supervisor.connect(database, 'postgres');
    await c.query(sql).finally(() => c.close());
  }

  after(async function () {
    await rt?.stop();
    if (dataDir) fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
  });

  it("a credential of a copy gets no TRIGGER on the template's table after the runtime restarts (42501)", async function () {
    dataDir = await freshDataDir();
    const first = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, dataDir });
    await api(first).buildTemplate({ name: 'tpl_old', sql: 'CREATE TABLE t (x int)' });
    // What an older PGX left: ALL granted inside the sealed template, its record without the new column's mark.
    await direct(first, 'postgres', 'ALTER DATABASE tpl_old ALLOW_CONNECTIONS true');
    await direct(first, 'tpl_old', 'GRANT ALL ON ALL TABLES IN SCHEMA public TO pgx_credentials');
    await direct(first, 'postgres', 'ALTER DATABASE tpl_old ALLOW_CONNECTIONS false');
    await direct(first, 'pgx_control', "UPDATE templates SET grants_without_trigger = NULL WHERE name = 'tpl_old'");
    await first.stop();

    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, dataDir });
    await api(rt).createDatabase({ template: 'tpl_old', name: 'tdb_tpl_old__a' });
    const credential = await api(rt).createCredential('tdb_tpl_old__a');
    const tenant = new pg.Client({ ...rt.connection('tdb_tpl_old__a', credential.user), password: credential.password });
    await tenant.connect();
    try {
      const err = await tenant.query('CREATE TRIGGER trap BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()').then(
        () => null,
        (e: unknown) => e as { code?: string; message: string },
      );
      expect(err?.code, err?.message).to.equal('42501');
      expect(err?.message).to.equal('permission denied for table t');
      // Reading and writing the template's table is what the credential is for.
      await tenant.query('INSERT INTO t VALUES (1)');
      expect((await tenant.query('SELECT count(*)::int AS n FROM t')).rows).to.deep.equal([{ n: 1 }]);
    } finally {
      await tenant.end();
    }
  });
});
