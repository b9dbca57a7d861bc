// Walls around a template's build, for callers that pass the build on from someone they do not trust
// with the runtime (the operator, for whoever may create a Template): an `unprivileged` build never
// runs as a role with privileges, and an import never reads the runtime's own PostgreSQL. Through the
// real HTTP API of a real runtime.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { ApiClient } from '../../src/api/client.js';
import { queryOnce } from '../helpers/pg-once.js';
import { apiFailure } from '../helpers/api-failure.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

const TOKEN = 'test-token-walls-0123456789abcdef';

describe('api: template build walls', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let api: ApiClient;

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0 });
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await queryOnce(
      rt.connection('postgres'),
      `CREATE ROLE plain_owner LOGIN;
       CREATE ROLE program_runner LOGIN; GRANT pg_execute_server_program TO program_runner;
       CREATE ROLE inner_admin CREATEROLE; CREATE ROLE through_admin LOGIN IN ROLE inner_admin;
       CREATE ROLE tpl_taken LOGIN PASSWORD 'someone-elses'`,
    );
  });

  after(async function () {
    await rt?.stop();
  });

  async function role(name: string): Promise<Record<string, unknown> | undefined> {
    const { rows } = await queryOnce(rt.connection('postgres'), `SELECT rolsuper, rolcanlogin, rolpassword IS NULL AS no_password FROM pg_authid WHERE rolname = '${name}'`);
    return rows[0];
  }

  it('without an owner, an unprivileged build runs as a role of the template\'s own, which cannot log in afterwards', async function () {
    const t = await api.buildTemplate({
      name: 'tpl_own',
      unprivileged: true,
      // The script tries to keep a way in: a password for its own role.
      sql: "CREATE TABLE who AS SELECT current_user AS name, (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS super; ALTER ROLE tpl_own PASSWORD 'kept-for-later'",
    });
    expect(t).to.include({ name: 'tpl_own', sealed: true });
    const { rows } = await queryOnce(rt.connection('tdb_tpl_own__a'), 'SELECT name, super FROM who');
    expect(rows).to.deep.equal([{ name: 'tpl_own', super: false }]);
    expect(await role('tpl_own')).to.deep.equal({ rolsuper: false, rolcanlogin: false, no_password: true });
    // A rebuild reuses the role.
    expect(await api.buildTemplate({ name: 'tpl_own', unprivileged: true, replace: true, sql: 'CREATE TABLE t2 (x int)' })).to.include({ generation: 2 });
  });

  it('a script of an unprivileged build cannot run programs', async function () {
    const err = await apiFailure(api.buildTemplate({ name: 'tpl_shell', unprivileged: true, sql: "CREATE TABLE out (x text); COPY out FROM PROGRAM 'id'" }));
    expect(err.sqlstate).to.equal('42501');
    expect(err.message).to.match(/permission denied to COPY to or from an external program/);
    // The same script without the wall runs as postgres, and the program runs.
    const t = await api.buildTemplate({ name: 'tpl_shell', sql: "CREATE TABLE out (x text); COPY out FROM PROGRAM 'echo ran'" });
    expect(t.sealed).to.equal(true);
  });

  it('refuses a named owner with privileges, directly or through a role it is a member of', async function () {
    const cases: [string, RegExp][] = [
      ['postgres', /^role "postgres" has privileges that an unprivileged build may not run with/],
      ['program_runner', /^role "program_runner" has privileges \(through "pg_execute_server_program"\)/],
      ['through_admin', /^role "through_admin" has privileges \(through "inner_admin"\)/],
    ];
    for (const [owner, message] of cases) {
      const err = await apiFailure(api.buildTemplate({ name: 'tpl_priv', owner, unprivileged: true, sql: 'SELECT 1' }));
      expect(err.status, owner).to.equal(403);
      expect(err.sqlstate, owner).to.equal('42501');
      expect(err.message, owner).to.match(message);
    }
    expect(await api.buildTemplate({ name: 'tpl_priv', owner: 'plain_owner', unprivileged: true, sql: 'SELECT 1' })).to.include({ sealed: true });
  });

  it('does not take over a role of the template\'s name that PGX did not make, or one given a member', async function () {
    const taken = await apiFailure(api.buildTemplate({ name: 'tpl_taken', unprivileged: true, sql: 'SELECT 1' }));
    expect(taken.sqlstate).to.equal('42501');
    expect(taken.message).to.equal('role "tpl_taken" exists and cannot be template "tpl_taken"\'s own: it was not made by PGX for the template');
    expect(await role('tpl_taken')).to.deep.equal({ rolsuper: false, rolcanlogin: true, no_password: false });

    await api.buildTemplate({ name: 'tpl_joined', unprivileged: true, sql: 'SELECT 1' });
    await queryOnce(rt.connection('postgres'), 'GRANT tpl_joined TO plain_owner');
    const joined = await apiFailure(api.buildTemplate({ name: 'tpl_joined', unprivileged: true, replace: true, sql: 'SELECT 1' }));
    expect(joined.message).to.match(/cannot be template "tpl_joined"'s own: other roles are members of it/);
    expect(await role('tpl_joined')).to.include({ rolcanlogin: false });

    const reserved = await apiFailure(api.buildTemplate({ name: 'pg_tpl', unprivileged: true, sql: 'SELECT 1' }));
    expect([reserved.status, reserved.sqlstate, reserved.message]).to.deep.equal([400, '22023', 'template "pg_tpl" cannot have a role of its own: PostgreSQL reserves the role name "pg_tpl"']);
  });

  it('an unsealed template is closed to PUBLIC: only its owner and superusers connect', async function () {
    await api.buildTemplate({ name: 'tpl_open', owner: 'plain_owner', seal: false, sql: 'CREATE FUNCTION secret_logic() RETURNS int LANGUAGE sql AS $$ SELECT 42 $$' });
    const url = (user: string) => rt.connection('tpl_open', user);
    const stranger = await queryOnce(url('program_runner'), 'SELECT 1').then(() => 'connected', (e: { code?: string }) => e.code);
    expect(stranger).to.equal('42501');
    expect((await queryOnce(url('plain_owner'), 'SELECT secret_logic() AS v')).rows).to.deep.equal([{ v: 42 }]);
  });

  it("refuses an import from the runtime's own PostgreSQL, however its socket is named", async function () {
    const socket = rt.runtime.supervisor.socketDirectory;
    const dir = scratchDir('pgx-walls-');
    const link = path.join(dir, 'sock');
    fs.symlinkSync(socket, link);
    const sources = [
      `postgresql:///pgx_control?user=postgres&host=${socket}&port=5432`,
      `postgresql://postgres@${encodeURIComponent(socket)}:5432/pgx_control`,
      `postgresql:///pgx_control?user=postgres&host=/nowhere,${path.join(socket, '..', path.basename(socket))}&port=5432`,
      `postgresql:///pgx_control?user=postgres&host=${link}&port=5432`,
    ];
    try {
      for (const source_url of sources) {
        const err = await apiFailure(api.importTemplate({ name: 'tpl_stolen', source_url }));
        expect(err.status, source_url).to.equal(403);
        expect(err.sqlstate, source_url).to.equal('42501');
        expect(err.message, source_url).to.equal("the source is this runtime's own PostgreSQL");
      }
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
    const service = await apiFailure(api.importTemplate({ name: 'tpl_stolen', source_url: 'postgresql:///pgx_control?service=runtime' }));
    expect(service.message).to.match(/^the source names a pg_service.conf entry/);
  });
});
