// A tenant (a per-database credential made by the control API: a login role, never superuser) tries
// the usual ways out of its database. Each fails with PostgreSQL's own 42501, the runtime's log has a
// line for it, and the extension allow-list (--allow-extensions) holds: an allowed extension installs,
// a trusted one not on the list does not (and leaves nothing behind), and the tenant cannot remove
// the guard.

import { expect } from 'chai';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { ApiClient } from '../../src/api/client.js';
import { createLogger } from '../../src/log.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-escapes-0123456789abcdef';

describe('runtime: a tenant cannot escape its database', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  /** A per-database credential of the control API. */
  let tenant: pg.Client;
  /** A role with CREATEDB (not superuser) that minted its database by connecting: it owns it. */
  let owner: pg.Client;
  const logged: string[] = [];
  const stream = new PassThrough();
  stream.on('data', (chunk: Buffer) => logged.push(chunk.toString('utf8')));

  async function refused(sql: string, as: pg.Client = tenant): Promise<{ code?: string; message: string; hint?: string }> {
    const err = await as.query(sql).then(
      () => null,
      (e: unknown) => e as { code?: string; message: string; hint?: string },
    );
    expect(err, `${sql} should be refused`).to.not.equal(null);
    return err!;
  }

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, allowExtensions: ['pgcrypto', 'plpgsql'] }, createLogger({ format: 'json', level: 'info', stream }));
    const api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_esc', sql: 'CREATE TABLE t (x int)' });
    await api.createDatabase({ template: 'tpl_esc', name: 'tdb_tpl_esc__a' });
    const credential = await api.createCredential('tdb_tpl_esc__a');
    tenant = new pg.Client({ ...rt.connection('tdb_tpl_esc__a', credential.user), password: credential.password });
    await tenant.connect();
    expect((await tenant.query('SELECT rolsuper FROM pg_roles WHERE rolname = current_user')).rows).to.deep.equal([{ rolsuper: false }]);
    const admin = new pg.Client(rt.connection('postgres'));
    await admin.connect();
    await admin.query('CREATE ROLE app LOGIN CREATEDB');
    await admin.end();
    owner = new pg.Client(rt.connection('tdb_tpl_esc__mine', 'app'));
    await owner.connect();
    expect((await owner.query('SELECT pg_get_userbyid(datdba) AS owner FROM pg_database WHERE datname = current_database()')).rows).to.deep.equal([{ owner: 'app' }]);
  });

  after(async function () {
    await tenant?.end().catch(() => undefined);
    await owner?.end().catch(() => undefined);
    await rt?.stop();
  });

  const ESCAPES: Array<[string, string, RegExp]> = [
    ['COPY ... TO PROGRAM', "COPY (SELECT 1) TO PROGRAM 'id'", /^permission denied to COPY to or from an external program$/],
    ['COPY ... FROM a server file', "COPY t FROM '/etc/passwd'", /^permission denied to COPY from a file$/],
    ['ALTER SYSTEM', "ALTER SYSTEM SET work_mem = '1GB'", /^permission denied to set parameter "work_mem"$/],
    ['pg_read_file', "SELECT pg_read_file('/etc/passwd')", /^permission denied for function pg_read_file$/],
    ['pg_ls_dir', "SELECT pg_ls_dir('/')", /^permission denied for function pg_ls_dir$/],
    ['an untrusted language (plperlu)', 'CREATE EXTENSION plperlu', /^permission denied to create extension "plperlu"$/],
    ['an untrusted language (plpython3u)', 'CREATE EXTENSION plpython3u', /^permission denied to create extension "plpython3u"$/],
    ['a C function', "CREATE FUNCTION evil() RETURNS int LANGUAGE c AS 'libc', 'getpid'", /^permission denied for language c$/],
    ['dblink (to reach the private socket)', 'CREATE EXTENSION dblink', /^permission denied to create extension "dblink"$/],
    ['postgres_fdw', 'CREATE EXTENSION postgres_fdw', /^permission denied to create extension "postgres_fdw"$/],
    ['file_fdw', 'CREATE EXTENSION file_fdw', /^permission denied to create extension "file_fdw"$/],
    ['turning triggers off', 'SET session_replication_role = replica', /^permission denied to set parameter "session_replication_role"$/],
    ['dropping the allow-list', 'DROP EVENT TRIGGER pgx_extension_allow_list', /^must be owner of event trigger pgx_extension_allow_list$/],
    ["dropping the allow-list's schema", 'DROP SCHEMA pgx_guard CASCADE', /^must be owner of schema pgx_guard$/],
    ["creating in the allow-list's schema", 'CREATE TABLE pgx_guard.mine (x int)', /^permission denied for schema pgx_guard$/],
    ['becoming superuser', 'ALTER ROLE current_user SUPERUSER', /^permission denied to alter role$/],
    // A trigger runs as whoever writes the table: on the template's own table, as the app's superuser.
    ["a trigger on the template owner's table", 'CREATE TRIGGER trap BEFORE INSERT ON t FOR EACH ROW EXECUTE FUNCTION pg_catalog.suppress_redundant_updates_trigger()', /^permission denied for table t$/],
    ["maintenance of the owner's table (its index expressions run)", 'REINDEX TABLE t', /^permission denied for table t$/],
  ];

  for (const [what, sql, message] of ESCAPES) {
    it(`${what}: 42501`, async function () {
      const err = await refused(sql);
      expect(err.code, `${err.message}`).to.equal('42501');
      expect(err.message).to.match(message);
      // The session goes on.
      expect((await tenant.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    });
  }

  it("the database's owner: a trusted extension not on the allow-list (hstore) is 42501 naming the list, and leaves nothing behind", async function () {
    const err = await refused('CREATE EXTENSION hstore', owner);
    expect(err.code).to.equal('42501');
    expect(err.message).to.equal('permission denied to create extension "hstore"');
    expect(err.hint).to.equal('This PGX runtime lets tenants create only: pgcrypto, plpgsql (--allow-extensions).');
    expect((await owner.query("SELECT count(*)::int AS n FROM pg_extension WHERE extname = 'hstore'")).rows).to.deep.equal([{ n: 0 }]);
    expect((await owner.query("SELECT to_regtype('hstore') IS NULL AS gone")).rows).to.deep.equal([{ gone: true }]);
    // Nor can the owner take the guard away.
    expect((await refused('DROP EVENT TRIGGER pgx_extension_allow_list', owner)).code).to.equal('42501');
    expect((await refused('DROP FUNCTION pgx_guard.extension_allowed() CASCADE', owner)).code).to.equal('42501');
  });

  it("the database's owner: an extension on the allow-list installs and works", async function () {
    await owner.query('CREATE EXTENSION pgcrypto');
    const { rows } = await owner.query("SELECT encode(digest('abc', 'sha256'), 'hex') AS h");
    expect(rows[0].h).to.equal('ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad');
  });

  it("each refusal reaches the runtime's log", function () {
    const lines = logged.join('').split('\n').filter((l) => l.includes('"postgres"') && l.includes('permission denied'));
    for (const needle of ['external program', 'parameter \\"work_mem\\"', 'function pg_read_file', 'extension \\"dblink\\"', 'extension \\"hstore\\"']) {
      expect(lines.some((l) => l.includes(needle)), `a log line for ${needle}`).to.equal(true);
    }
  });
});
