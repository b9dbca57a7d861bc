// Templates and snapshots have a whole lifecycle, alike through psql, HTTP and the pgx CLI (MCP: see
// test/mcp/stdio.test.ts): a snapshot belongs to its database and goes when PGX drops it, unless kept;
// --snapshot-retention caps the unkept ones a database has (oldest go first); templates and snapshots
// are renamed (refused while databases minted from them are alive) and listed with their size on disk;
// pgx status --disk shows disk used by templates, snapshots and databases, and the free space.

import { expect } from 'chai';
import path from 'node:path';
import { ApiClient } from '../../src/api/client.js';
import type { TemplateBody } from '../../src/api/contract.js';
import { runCommand, waitFor, type CommandResult } from '../helpers/commands.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'template-lifecycle-token-0123456789';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

describe('cli: templates and snapshots have a whole lifecycle (psql, HTTP, pgx)', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let api: ApiClient;
  let apiUrl: string;

  function pgx(args: string[]): Promise<CommandResult> {
    return runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...args], { cwd: root, env: { ...process.env, PGX_URL: apiUrl, PGX_API_TOKEN: TOKEN }, timeoutMs: 60_000 });
  }

  /** psql -c `sql` on `database`: its output, or its error text. */
  function psql(database: string, sql: string): Promise<CommandResult> {
    return runCommand('psql', ['-X', '-At', '-v', 'ON_ERROR_STOP=1', '-c', sql], { env: rt.env(database), timeoutMs: 30_000 });
  }

  const listed = async (): Promise<Map<string, TemplateBody>> => new Map((await api.listTemplates()).map((t) => [t.name, t]));
  const inCluster = async (name: string): Promise<boolean> =>
    (await queryOnce(rt.connection('postgres'), `SELECT count(*)::int AS n FROM pg_database WHERE datname = '${name}'`)).rows[0]!.n === 1;

  async function http(method: string, route: string, body?: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(apiUrl + route, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, snapshotRetention: 2 });
    apiUrl = `http://127.0.0.1:${rt.runtime.api!.port}`;
    api = new ApiClient({ url: apiUrl, token: TOKEN });
    await api.buildTemplate({ name: 'tpl_life', sql: "CREATE TABLE t (v text); INSERT INTO t SELECT repeat('x', 100) FROM generate_series(1, 20000)" });
  });

  after(async function () {
    await rt?.stop();
  });

  it('psql: a snapshot goes with its database unless kept; a kept one is renamed, and refused a rename while minted from', async function () {
    const db = 'tdb_tpl_life__psql';
    expect((await psql(db, "INSERT INTO t VALUES ('mine')")).code).to.equal(0);
    expect((await psql('postgres', `SELECT pgx_snapshot_database('${db}', 'psql_one')`)).stdout.trim()).to.equal('psql_one');
    expect((await psql('postgres', `SELECT pgx_snapshot_database('${db}', 'psql_kept')`)).stdout.trim()).to.equal('psql_kept');
    expect((await psql('postgres', "SELECT pgx_keep_snapshot('psql_kept')")).stdout.trim()).to.equal('psql_kept');
    let t = await listed();
    expect(t.get('psql_one')).to.include({ snapshot_of: db, kept: false });
    expect(t.get('psql_kept')).to.include({ snapshot_of: db, kept: true });
    const notSnapshot = await psql('postgres', "SELECT pgx_keep_snapshot('tpl_life')");
    expect(notSnapshot.stderr).to.include('template "tpl_life" is not a snapshot');

    expect((await psql('postgres', "SELECT pgx_rename_template('psql_kept', 'psql_golden')")).stdout.trim()).to.equal('psql_golden');
    t = await listed();
    expect(t.has('psql_kept')).to.equal(false);
    expect(t.get('psql_golden')).to.include({ snapshot_of: db, kept: true, sealed: true });
    expect(await inCluster('psql_golden')).to.equal(true);
    expect(await inCluster('psql_kept')).to.equal(false);

    const sql = JSON.parse((await psql('postgres', 'SELECT pgx_list_templates()')).stdout) as { name: string; kept: boolean; snapshot_of: string | null; apparent_bytes: number }[];
    expect(sql.find((x) => x.name === 'psql_golden')).to.include({ kept: true, snapshot_of: db });
    expect(sql.find((x) => x.name === 'psql_one')!.apparent_bytes).to.be.greaterThan(1_000_000);
    expect((await psql('postgres', `SELECT pgx_drop_database('${db}')`)).code).to.equal(0);
    t = await listed();
    expect(t.has('psql_one'), 'the unkept snapshot went with its database').to.equal(false);
    expect(await inCluster('psql_one')).to.equal(false);
    expect(t.has('psql_golden'), 'the kept one stays').to.equal(true);

    // Minted from under its new name; while that copy lives, the name cannot change.
    expect((await psql('tdb_psql_golden__x', "SELECT count(*) FROM t WHERE v = 'mine'")).stdout.trim()).to.equal('1');
    const refused = await psql('postgres', "SELECT pgx_rename_template('psql_golden', 'psql_other')");
    expect(refused.code).to.not.equal(0);
    expect(refused.stderr).to.include('cannot rename template "psql_golden": 1 database minted from it is alive');
    expect(refused.stderr).to.match(/HINT: {2}Drop them first \(SELECT pgx_drop_database/);
    expect(refused.stderr).to.not.match(/\/v1\/|pgx template/);
    const taken = await psql('postgres', "SELECT pgx_rename_template('tpl_life', 'postgres')");
    expect(taken.stderr).to.match(/template name "postgres" is not usable/);
  });

  it('--snapshot-retention 2: a third unkept snapshot drops the oldest; kept ones are not counted nor dropped', async function () {
    const { name: db } = await api.createDatabase({ template: 'tpl_life', pinned: true });
    await api.snapshot(db, 'keep_r0', false, true);
    for (const s of ['ret_r1', 'ret_r2', 'ret_r3']) await api.snapshot(db, s);
    const t = await listed();
    expect([...t.keys()].filter((n) => n.startsWith('ret_') || n.startsWith('keep_')).sort()).to.deep.equal(['keep_r0', 'ret_r2', 'ret_r3']);
    expect(await inCluster('ret_r1')).to.equal(false);
    // Given back to its database, keep_r0 is its oldest unkept snapshot, one past the cap: it goes.
    expect((await psql('postgres', "SELECT pgx_keep_snapshot('keep_r0', false)")).code).to.equal(0);
    expect([...(await listed()).keys()].filter((n) => n.startsWith('ret_') || n.startsWith('keep_')).sort()).to.deep.equal(['ret_r2', 'ret_r3']);
    await api.snapshot(db, 'keep_r4', false, true);
    await api.dropDatabase(db);
    expect([...(await listed()).keys()].filter((n) => n.startsWith('ret_') || n.startsWith('keep_'))).to.deep.equal(['keep_r4']);
  });

  it('the janitor\'s drop at a TTL takes the database\'s snapshots too', async function () {
    const { name: db } = await api.createDatabase({ template: 'tpl_life', ttl_seconds: 3 });
    await api.snapshot(db, 'ttl_snap');
    expect((await listed()).has('ttl_snap')).to.equal(true);
    // The janitor's drop runs on its own time, and a template's record goes before its database does
    // (Templates.drop: nothing mints from it meanwhile), so wait for the listing, then the cluster.
    await waitFor('the TTL drop to take the snapshot', async () => !(await listed()).has('ttl_snap'), 30_000);
    await waitFor('the snapshot\'s database to be dropped', async () => !(await inCluster('ttl_snap')), 10_000);
  });

  it('HTTP: sizes in the list, keep in the snapshot body, rename, and disk_usage when asked', async function () {
    const { name: db } = await api.createDatabase({ template: 'tpl_life', pinned: true });
    const snap = await http('POST', `/v1/databases/${db}/snapshots`, { name: 'http_kept', keep: true });
    expect(snap.status).to.equal(201);
    expect(snap.body).to.include({ name: 'http_kept', kept: true, snapshot_of: db });
    const items = ((await http('GET', '/v1/templates')).body.items as TemplateBody[]);
    const tpl = items.find((x) => x.name === 'tpl_life')!;
    expect(tpl.kept).to.equal(true);
    expect(tpl.disk!.apparent_bytes).to.be.greaterThan(2_000_000);
    expect(tpl.disk!.allocated_bytes).to.be.greaterThan(0);
    const given = await http('POST', '/v1/templates/http_kept/keep', { keep: false });
    expect(given.body).to.include({ name: 'http_kept', kept: false });
    expect((await http('POST', '/v1/templates/http_kept/keep', {})).body).to.include({ kept: true });
    const notSnapshot = await http('POST', '/v1/templates/tpl_life/keep', {});
    expect(notSnapshot.body).to.include({ code: 'NOT_A_TEMPLATE', sqlstate: '22023' });
    expect(notSnapshot.body.hint).to.include('GET /v1/templates');
    const renamed = await http('POST', '/v1/templates/http_kept/rename', { name: 'http_gold' });
    expect(renamed.status).to.equal(200);
    expect(renamed.body).to.include({ name: 'http_gold', kept: true });
    const busy = await http('POST', '/v1/templates/tpl_life/rename', { name: 'tpl_life2' });
    expect(busy.status).to.equal(409);
    expect(busy.body).to.include({ code: 'OBJECT_IN_USE', sqlstate: '55006' });
    expect(busy.body.hint).to.include('DELETE /v1/databases/{name}');
    const taken = await http('POST', '/v1/templates/http_gold/rename', { name: 'tpl_life' });
    expect(taken.body).to.include({ code: 'DUPLICATE_DATABASE', sqlstate: '42P04' });
    const ordinary = await http('POST', '/v1/templates/postgres/rename', { name: 'x_y' });
    expect(ordinary.status).to.equal(400);
    const missing = await http('POST', '/v1/templates/no_such_tpl/rename', { name: 'x_y' });
    expect(missing.body).to.include({ code: 'UNKNOWN_DATABASE' });
    expect(missing.body.hint).to.include('GET /v1/templates');

    expect((await http('GET', '/v1/status')).body.disk_usage).to.equal(null);
    expect((await http('GET', '/v1/status?disk=maybe')).status).to.equal(400);
    const usage = (await http('GET', '/v1/status?disk=true')).body.disk_usage as Record<string, number>;
    expect(usage.templates_mb).to.be.greaterThan(1);
    expect(usage.snapshots_mb).to.be.greaterThan(1);
    expect(usage.databases_mb).to.be.greaterThan(1);
    expect(usage.free_mb).to.be.greaterThan(0);
    expect(usage.total_mb).to.be.at.least(usage.free_mb);
    await api.dropDatabase(db);
    expect((await listed()).has('http_gold')).to.equal(true);
  });

  it('pgx: template list with sizes, db snapshot --keep, template rename, db drop taking the snapshot, status with disk use', async function () {
    const db = 'tdb_tpl_life__cli';
    expect((await pgx(['db', 'create', 'tpl_life', '--name', db])).code).to.equal(0);
    const one = await pgx(['db', 'snapshot', db, 'cli_one']);
    expect(one.stdout).to.equal(`snapshot cli_one of ${db} taken\n`);
    const kept = await pgx(['db', 'snapshot', db, 'cli_kept', '--keep']);
    expect(kept.stdout).to.equal(`snapshot cli_kept of ${db} taken (kept past the database)\n`);
    expect((await pgx(['db', 'pin', db, '--keep'])).code).to.equal(2);

    const list = await pgx(['template', 'list']);
    expect(list.code, list.stderr).to.equal(0);
    expect(list.stdout).to.match(/^NAME\s+SEALED\s+SNAPSHOT OF\s+SIZE\s+SHARED\s+/);
    expect(list.stdout).to.match(new RegExp(`^cli_kept\\s+yes\\s+${db} \\(kept\\)\\s+\\d+\\.\\d MB\\s+`, 'm'));
    expect(list.stdout).to.match(new RegExp(`^cli_one\\s+yes\\s+${db}\\s+\\d+\\.\\d MB\\s+`, 'm'));

    const renamed = await pgx(['template', 'rename', 'cli_kept', 'cli_gold']);
    expect(renamed.stdout).to.equal('renamed template cli_kept to cli_gold\n');
    const busy = await pgx(['template', 'rename', 'tpl_life', 'tpl_other']);
    expect(busy.code).to.equal(1);
    expect(busy.stderr).to.match(/^hint: Drop the databases minted from it first \(pgx db list, pgx db drop NAME\)/m);

    expect((await pgx(['db', 'drop', db])).code).to.equal(0);
    const after = (await pgx(['template', 'list', '--json'])).stdout;
    const names = (JSON.parse(after) as { items: TemplateBody[] }).items.map((x) => x.name);
    expect(names).to.include('cli_gold');
    expect(names).to.not.include('cli_one');
    // Given back to its (gone) database, then kept again.
    expect((await pgx(['template', 'keep', 'cli_gold', '--release'])).stdout).to.equal(`snapshot cli_gold belongs to ${db} again\n`);
    expect((await pgx(['template', 'keep', 'cli_gold'])).stdout).to.equal(`snapshot cli_gold is kept past ${db}\n`);
    const notSnapshot = await pgx(['template', 'keep', 'tpl_life']);
    expect(notSnapshot.code).to.equal(1);
    expect(notSnapshot.stderr).to.match(/^hint: Only snapshots belong to a database; templates are always kept \(pgx template list/m);

    const status = await pgx(['status', '--disk']);
    expect(status.code, status.stderr).to.equal(0);
    expect(status.stdout).to.match(/^disk use\s+templates \d+(\.\d)? MB, snapshots \d+(\.\d)? MB, databases \d+(\.\d)? MB, spares \d+(\.\d)? MB, other \d+(\.\d)? MB/m);
    expect(status.stdout).to.match(/^filesystem\s+\d+(\.\d)? MB used, \d+(\.\d)? MB free of \d+(\.\d)? MB$/m);
  });
});
