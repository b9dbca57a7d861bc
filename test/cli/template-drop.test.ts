// Templates and snapshots can be deleted, from every surface: `pgx template drop` (refused with 55006
// while databases minted from it are alive, unless --force; those keep their data), SELECT
// pgx_drop_template(name [, force]) (a snapshot's name is then free again), DELETE /v1/templates/{name};
// and a template unsealed and dropped by hand is gone from the list after a restart.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { ApiClient } from '../../src/api/client.js';
import { runCommand, type CommandResult } from '../helpers/commands.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'template-drop-token-0123456789';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

describe('cli: templates and snapshots are deleted like anything else', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let api: ApiClient;

  function pgx(args: string[]): Promise<CommandResult> {
    return runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...args], {
      cwd: root,
      env: { ...process.env, PGX_URL: `http://127.0.0.1:${rt.runtime.api!.port}`, PGX_API_TOKEN: TOKEN },
      timeoutMs: 60_000,
    });
  }

  const sql = (database: string, text: string): Promise<{ rows: Record<string, unknown>[] }> => queryOnce(rt.connection(database), text);
  const listed = async (): Promise<string[]> => (await api.listTemplates()).map((t) => t.name);

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 1 });
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_gone', sql: "CREATE TABLE t (v text); INSERT INTO t VALUES ('from the template')" });
  });

  after(async function () {
    await rt?.stop();
  });

  it('pgx template drop refuses while a minted database is alive (55006), and --force drops it; the copy keeps its data', async function () {
    await sql('tdb_tpl_gone__kept', "INSERT INTO t VALUES ('mine')");
    const refused = await pgx(['template', 'drop', 'tpl_gone']);
    expect(refused.code).to.equal(1);
    expect(refused.stderr).to.include('pgx: cannot drop template "tpl_gone": 1 database minted from it is alive');
    expect(refused.stderr).to.match(/hint: .*pgx template drop tpl_gone --force/);
    expect(await listed()).to.include('tpl_gone');

    const forced = await pgx(['template', 'drop', 'tpl_gone', '--force']);
    expect(forced.code, forced.stderr).to.equal(0);
    expect(forced.stdout).to.equal('dropped template tpl_gone\n');
    expect(await listed()).to.not.include('tpl_gone');
    expect((await sql('postgres', "SELECT count(*)::int AS n FROM pg_database WHERE datname = 'tpl_gone'")).rows).to.deep.equal([{ n: 0 }]);
    expect((await sql('tdb_tpl_gone__kept', 'SELECT v FROM t ORDER BY v')).rows).to.deep.equal([{ v: 'from the template' }, { v: 'mine' }]);
    // Nothing mints from it any more.
    const err = await sql('tdb_tpl_gone__new', 'SELECT 1').then(() => null, (e: Error & { code?: string }) => e);
    expect(err?.code).to.equal('3D000');
  });

  it('SELECT pgx_drop_template drops a snapshot, and its name can be used again', async function () {
    await api.buildTemplate({ name: 'tpl_snap', sql: 'CREATE TABLE s (n int)' });
    await sql('tdb_tpl_snap__db', 'INSERT INTO s VALUES (1)');
    await sql('postgres', "SELECT pgx_snapshot_database('tdb_tpl_snap__db', 'db_before')");
    expect(await listed()).to.include('db_before');
    const { rows } = await sql('postgres', "SELECT pgx_drop_template('db_before') AS dropped");
    expect(rows).to.deep.equal([{ dropped: 'db_before' }]);
    expect(await listed()).to.not.include('db_before');
    await sql('postgres', "SELECT pgx_snapshot_database('tdb_tpl_snap__db', 'db_before')");
    expect(await listed()).to.include('db_before');
  });

  it('DELETE /v1/templates/{name}: 404 for an unknown name, 400 for a bad force, 204 when dropped', async function () {
    const base = `http://127.0.0.1:${rt.runtime.api!.port}/v1/templates`;
    const headers = { authorization: `Bearer ${TOKEN}` };
    expect((await fetch(`${base}/tpl_nope`, { method: 'DELETE', headers })).status).to.equal(404);
    expect((await fetch(`${base}/db_before?force=maybe`, { method: 'DELETE', headers })).status).to.equal(400);
    expect((await fetch(`${base}/db_before`, { method: 'DELETE', headers })).status).to.equal(204);
    expect(await listed()).to.not.include('db_before');
  });

  it('a template unsealed and dropped by hand is not listed after a restart', async function () {
    await api.buildTemplate({ name: 'tpl_byhand', sql: 'SELECT 1' });
    await api.unseal('tpl_byhand');
    await sql('postgres', 'DROP DATABASE tpl_byhand');
    const { dataDir } = rt;
    await rt.runtime.stop();
    fs.rmSync(rt.socketDir, { recursive: true, force: true });
    const again = await startTestRuntime({ dataDir, apiPort: 0, apiToken: TOKEN });
    try {
      const names = (await new ApiClient({ url: `http://127.0.0.1:${again.runtime.api!.port}`, token: TOKEN }).listTemplates()).map((t) => t.name);
      expect(names).to.not.include('tpl_byhand');
    } finally {
      await again.stop();
      fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
    }
    rt = undefined as unknown as TestRuntime;
  });
});
