// Session caps per database: --max-sessions-per-db for every database, and a minted database's own
// connection_limit (HTTP API) over it. Beyond the cap a connect gets 53300 as PostgreSQL words it,
// sessions on the database and on its neighbours carry on, and a freed slot admits the next client.
// Tenants connect (a CREATEDB role minting by connecting, a credential of the API's databases): a
// superuser gets past a cap, as PostgreSQL lets it past datconnlimit (tenant-walls.test.ts).

import { expect } from 'chai';
import pg from 'pg';
import { ApiClient } from '../../src/api/client.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-limits-0123456789abcdef';

describe('runtime: session caps per database', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let api: ApiClient;
  const open: pg.Client[] = [];

  /** The role each database is connected to as: its credential, or the CREATEDB tenant that minted it. */
  const users = new Map<string, string>();
  const userOf = (database: string): string => users.get(database) ?? 'tenant';

  async function connect(database: string): Promise<pg.Client> {
    const client = new pg.Client(rt.connection(database, userOf(database)));
    await client.connect();
    open.push(client);
    return client;
  }

  async function refused(database: string): Promise<{ code?: string; message: string }> {
    const client = new pg.Client(rt.connection(database, userOf(database)));
    const err = await client.connect().then(
      () => null,
      (e: unknown) => e as { code?: string; message: string },
    );
    await client.end().catch(() => undefined);
    expect(err, `a connect to ${database} beyond its cap`).to.not.equal(null);
    return err!;
  }

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, maxSessionsPerDb: 2 });
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_cap', sql: 'CREATE TABLE t (x int)' });
    await queryOnce(rt.connection('postgres'), 'CREATE ROLE tenant LOGIN CREATEDB');
  });

  /** A database of the API with a credential to connect as (trust mode: no password needed). */
  async function created(opts: { connection_limit?: number; pinned?: boolean } = {}, on: ApiClient = api): Promise<{ name: string }> {
    const db = await on.createDatabase({ template: 'tpl_cap', ...opts });
    users.set(db.name, (await on.createCredential(db.name)).user);
    return db;
  }

  afterEach(async function () {
    await Promise.all(open.splice(0).map((c) => c.end().catch(() => undefined)));
  });

  after(async function () {
    await rt?.stop();
  });

  it('--max-sessions-per-db: the third session is 53300, others carry on, a freed slot admits the next', async function () {
    const a = await connect('tdb_tpl_cap__a');
    const b = await connect('tdb_tpl_cap__a');
    const err = await refused('tdb_tpl_cap__a');
    expect(err.code).to.equal('53300');
    expect(err.message).to.equal('too many connections for database "tdb_tpl_cap__a"');
    // The two admitted sessions are untouched, and a neighbour has its own cap.
    expect((await a.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    expect((await b.query('SELECT 2 AS two')).rows).to.deep.equal([{ two: 2 }]);
    await connect('tdb_tpl_cap__b');
    await connect('postgres');
    await a.end();
    const c = await connect('tdb_tpl_cap__a');
    expect((await c.query('SELECT 3 AS three')).rows).to.deep.equal([{ three: 3 }]);
  });

  it('a burst of connects never admits more than the cap', async function () {
    const attempts = await Promise.allSettled(
      Array.from({ length: 8 }, async () => {
        const client = new pg.Client(rt.connection('tdb_tpl_cap__burst', 'tenant'));
        open.push(client);
        await client.connect();
      }),
    );
    const admitted = attempts.filter((r) => r.status === 'fulfilled').length;
    const codes = attempts.flatMap((r) => (r.status === 'rejected' ? [(r.reason as { code?: string }).code] : []));
    expect(admitted).to.equal(2);
    expect(codes).to.deep.equal(Array(6).fill('53300'));
  });

  it("a database's own connection_limit overrides the runtime's, and can be set back", async function () {
    const db = await created({ connection_limit: 1 });
    expect((await api.getDatabase(db.name)).connection_limit).to.equal(1);
    await connect(db.name);
    expect((await refused(db.name)).code).to.equal('53300');
    await api.setConnectionLimit(db.name, 3);
    await connect(db.name);
    await connect(db.name);
    expect((await refused(db.name)).code).to.equal('53300');
    expect((await api.setConnectionLimit(db.name, null)).connection_limit).to.equal(null);
    // Back on the runtime's cap of 2, with 3 open: nobody is thrown out, nobody new gets in.
    expect((await refused(db.name)).code).to.equal('53300');
  });

  // Before the restart test, which stops this runtime.
  it('refuses a bad limit with 22023 and changes nothing', async function () {
    const created = await api.createDatabase({ template: 'tpl_cap' });
    for (const bad of [0, -1, 1.5]) {
      const err = await api.setConnectionLimit(created.name, bad).then(
        () => null,
        (e: unknown) => e as { sqlstate: string },
      );
      expect(err?.sqlstate, String(bad)).to.equal('22023');
    }
    expect((await api.getDatabase(created.name)).connection_limit).to.equal(null);
    expect((await queryOnce(rt.connection(created.name), 'SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
  });
  it('the limit survives a runtime restart (recorded in pgx_control)', async function () {
    const db = await created({ connection_limit: 1, pinned: true });
    // The runtime alone stops (the helper's stop() would delete the data directory); then the first
    // runtime's helper cleans up after the second.
    const first = rt;
    await first.runtime.stop();
    const second = await startTestRuntime({ dataDir: first.dataDir, apiPort: 0, apiToken: TOKEN, poolSize: 0, maxSessionsPerDb: 2 });
    try {
      const api2 = new ApiClient({ url: `http://127.0.0.1:${second.runtime.api!.port}`, token: TOKEN });
      expect((await api2.getDatabase(db.name)).connection_limit).to.equal(1);
      rt = second;
      await connect(db.name);
      expect((await refused(db.name)).code).to.equal('53300');
    } finally {
      await Promise.all(open.splice(0).map((c) => c.end().catch(() => undefined)));
      await second.stop();
      rt = first;
    }
  });

});
