// POST /v1/templates: a template from a SQL script, through the real HTTP API of a real runtime; the
// ApiClient (what the CLI and the operator use) makes the calls.

import { expect } from 'chai';
import pg from 'pg';
import { ApiClient } from '../../src/api/client.js';
import { queryOnce } from '../helpers/pg-once.js';
import { apiFailure } from '../helpers/api-failure.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-build-0123456789abcdef';

describe('api: templates built from a SQL script', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let api: ApiClient;

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0 });
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await queryOnce(rt.connection('postgres'), "CREATE ROLE app_owner LOGIN; CREATE ROLE nologin_role NOLOGIN");
  });

  after(async function () {
    await rt?.stop();
  });

  async function databases(): Promise<string[]> {
    const { rows } = await queryOnce(rt.connection('postgres'), 'SELECT datname FROM pg_database ORDER BY datname');
    return rows.map((r: { datname: string }) => r.datname);
  }

  it('builds, seals and mints from the script, the script running as the owner role', async function () {
    const t = await api.buildTemplate({
      name: 'tpl_script',
      owner: 'app_owner',
      sql: "CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'one'), (2, 'two'); CREATE TABLE who AS SELECT current_user AS name;",
    });
    expect(t).to.include({ name: 'tpl_script', sealed: true, generation: 1 });
    const { rows } = await queryOnce(rt.connection('tdb_tpl_script__a1'), 'SELECT (SELECT count(*) FROM items)::int AS n, (SELECT name FROM who) AS who');
    expect(rows).to.deep.equal([{ n: 2, who: 'app_owner' }]);
    const { rows: owner } = await queryOnce(rt.connection('postgres'), "SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = 'tpl_script'");
    expect(owner).to.deep.equal([{ owner: 'app_owner' }]);
  });

  it('a script cannot escalate beyond its owner role (no superuser statements)', async function () {
    const err = await apiFailure(api.buildTemplate({ name: 'tpl_escalate', owner: 'app_owner', sql: 'ALTER ROLE app_owner SUPERUSER' }));
    expect(err.status).to.equal(422);
    expect(err.sqlstate).to.equal('42501');
    expect(err.message).to.match(/^the script for template "tpl_escalate" failed at line 1: permission denied/);
    expect(await databases()).to.not.include('tpl_escalate');
    const { rows: su } = await queryOnce(rt.connection('postgres'), "SELECT rolsuper FROM pg_roles WHERE rolname = 'app_owner'");
    expect(su).to.deep.equal([{ rolsuper: false }]);
  });

  it('a failing script leaves nothing behind and keeps its SQLSTATE', async function () {
    const before = await databases();
    const err = await apiFailure(api.buildTemplate({ name: 'tpl_broken', sql: 'CREATE TABLE a (id int); SELECT * FROM no_such_table' }));
    expect(err.status).to.equal(422);
    expect(err.sqlstate).to.equal('42P01');
    expect(err.message).to.include('relation "no_such_table" does not exist');
    expect(await databases()).to.deep.equal(before);
    expect((await api.listTemplates()).map((t) => t.name)).to.not.include('tpl_broken');
  });

  it('an existing name is 42P04 unless replace is set; replace rebuilds and bumps the generation', async function () {
    const dup = await apiFailure(api.buildTemplate({ name: 'tpl_script', sql: 'SELECT 1' }));
    expect(dup.status).to.equal(409);
    expect(dup.sqlstate).to.equal('42P04');
    const t = await api.buildTemplate({ name: 'tpl_script', owner: 'app_owner', sql: 'CREATE TABLE items (id int); INSERT INTO items SELECT generate_series(1, 5)', replace: true });
    expect(t).to.include({ name: 'tpl_script', sealed: true, generation: 2 });
    const { rows } = await queryOnce(rt.connection('tdb_tpl_script__b1'), 'SELECT count(*)::int AS n FROM items');
    expect(rows).to.deep.equal([{ n: 5 }]);
    // What was minted before the rebuild is its own copy and keeps the old content.
    const { rows: old } = await queryOnce(rt.connection('tdb_tpl_script__a1'), 'SELECT count(*)::int AS n FROM items');
    expect(old).to.deep.equal([{ n: 2 }]);
  });

  it('a failed replace leaves the old template sealed and in use', async function () {
    await apiFailure(api.buildTemplate({ name: 'tpl_script', sql: 'SELECT 1/0', replace: true }));
    const t = (await api.listTemplates()).find((x) => x.name === 'tpl_script');
    expect(t).to.include({ sealed: true, generation: 2 });
    const { rows } = await queryOnce(rt.connection('tdb_tpl_script__c1'), 'SELECT count(*)::int AS n FROM items');
    expect(rows).to.deep.equal([{ n: 5 }]);
  });

  it('seal: false leaves it an ordinary database to change and seal later', async function () {
    const t = await api.buildTemplate({ name: 'tpl_later', sql: 'CREATE TABLE t (x int)', seal: false });
    expect(t).to.include({ name: 'tpl_later', sealed: false });
    const client = new pg.Client(rt.connection('tpl_later'));
    await client.connect();
    await client.query('INSERT INTO t VALUES (7)');
    await client.end();
    expect(await api.seal('tpl_later')).to.include({ sealed: true, generation: 1 });
    expect((await queryOnce(rt.connection('tdb_tpl_later__x'), 'SELECT x FROM t')).rows).to.deep.equal([{ x: 7 }]);
  });

  it('refuses bad names, owners and bodies with clear errors', async function () {
    const cases: [Parameters<ApiClient['buildTemplate']>[0], number, string, RegExp][] = [
      [{ name: 'Tpl-Bad', sql: 'SELECT 1' }, 400, '22023', /only lower-case ASCII letters/],
      [{ name: 'tdb_x', sql: 'SELECT 1' }, 400, '22023', /cannot start with the mint prefix/],
      [{ name: 'template1', sql: 'SELECT 1' }, 400, '22023', /PGX and PostgreSQL rely on it/],
      [{ name: 'pgx_control', sql: 'SELECT 1' }, 404, '3D000', /does not exist/],
      [{ name: 'tpl_owner', owner: 'no_such_role', sql: 'SELECT 1' }, 400, '22023', /role "no_such_role" does not exist/],
      [{ name: 'tpl_owner', owner: 'nologin_role', sql: 'SELECT 1' }, 400, '22023', /cannot log in/],
      [{ name: 'tpl_owner', sql: '' }, 400, '22023', /sql/],
    ];
    for (const [body, status, sqlstate, message] of cases) {
      const err = await apiFailure(api.buildTemplate(body));
      expect(err.status, body.name).to.equal(status);
      expect(err.sqlstate, body.name).to.equal(sqlstate);
      expect(err.message, body.name).to.match(message);
    }
    const extra = await fetch(`http://127.0.0.1:${rt.runtime.api!.port}/v1/templates`, {
      method: 'POST',
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'tpl_x', sql: 'SELECT 1', drop_everything: true }),
    });
    expect(extra.status).to.equal(400);
    expect(await databases()).to.not.include.members(['tpl_owner', 'tpl_x']);
  });

  it('takes scripts larger than the small-body limit (a 1 MiB script)', async function () {
    const values = Array.from({ length: 20_000 }, (_, i) => `(${i}, '${'x'.repeat(40)}')`).join(',\n');
    const sql = `CREATE TABLE big (id int, pad text); INSERT INTO big VALUES ${values};`;
    expect(Buffer.byteLength(sql)).to.be.greaterThan(512 * 1024);
    await api.buildTemplate({ name: 'tpl_big', sql });
    expect((await queryOnce(rt.connection('tdb_tpl_big__1'), 'SELECT count(*)::int AS n FROM big')).rows).to.deep.equal([{ n: 20_000 }]);
  });
});
