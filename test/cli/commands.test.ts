// The `pgx status|template|db` commands end to end: a real runtime with its HTTP API in this process,
// and the real CLI (`node bin/pgx.js`) as a child process talking to it, as a person or a script would.

import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { freePort, runCommand, type CommandResult } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'cli-test-token-0123456789';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

describe('cli: pgx status, template and db against a runtime', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let apiUrl: string;

  /** `node bin/pgx.js ...args` with the runtime's API in the environment (overridable). */
  function pgx(args: string[], env: Record<string, string | undefined> = {}): Promise<CommandResult> {
    const base: NodeJS.ProcessEnv = { ...process.env, PGX_URL: apiUrl, PGX_API_TOKEN: TOKEN, ...env };
    for (const [k, v] of Object.entries(base)) if (v === undefined) delete base[k];
    return runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...args], { cwd: root, env: base, timeoutMs: 60_000 });
  }

  function ok(r: CommandResult): CommandResult {
    expect(r.code, `exit code; stderr: ${r.stderr}`).to.equal(0);
    return r;
  }

  async function query<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
    const client = new pg.Client({ connectionString: url });
    await client.connect();
    try {
      return (await client.query<T>(sql)).rows;
    } finally {
      await client.end();
    }
  }

  before(async () => {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN });
    apiUrl = `http://127.0.0.1:${rt.runtime.api!.port}`;
    const admin = new pg.Client(rt.connection('postgres'));
    await admin.connect();
    await admin.query('CREATE DATABASE tpl');
    await admin.end();
    const tpl = new pg.Client(rt.connection('tpl'));
    await tpl.connect();
    await tpl.query("CREATE TABLE users (id bigserial PRIMARY KEY, email text UNIQUE); INSERT INTO users (email) VALUES ('a@example.com')");
    await tpl.end();
  });

  after(async () => {
    await rt?.stop();
  });

  let created: { name: string; url: string; template: string; source: string };

  it('pgx template seal and list', async () => {
    const seal = ok(await pgx(['template', 'seal', 'tpl']));
    expect(seal.stdout).to.match(/^sealed template tpl \(generation \d+\)/);
    const list = ok(await pgx(['template', 'list']));
    expect(list.stdout).to.match(/^NAME\s+SEALED/);
    expect(list.stdout).to.match(/\ntpl\s+yes\s/);
    const json = JSON.parse(ok(await pgx(['template', 'list', '--json'])).stdout) as { items: { name: string; sealed: boolean }[] };
    expect(json.items.find((t) => t.name === 'tpl')?.sealed).to.equal(true);
  });

  it('pgx template create NAME --file: built from the script, sealed, minted from', async () => {
    const file = path.join(rt.dataDir, '..', 'schema.sql');
    writeFileSync(file, "CREATE TABLE notes (id int PRIMARY KEY, body text); INSERT INTO notes VALUES (1, 'from a script');");
    const r = ok(await pgx(['template', 'create', 'tpl_file', '--file', file]));
    expect(r.stdout).to.equal('built template tpl_file and sealed it (generation 1)\n');
    const rows = await query<{ body: string }>(`postgresql://postgres@${rt.host}:${rt.port}/tdb_tpl_file__cli`, 'SELECT body FROM notes');
    expect(rows).to.deep.equal([{ body: 'from a script' }]);
    const broken = await pgx(['template', 'create', 'tpl_file2', '--file', path.join(rt.dataDir, 'no-such.sql')]);
    expect(broken.code).to.equal(1);
    expect(broken.stderr).to.include('no-such.sql');
    // --unprivileged: the script runs as the template's own role, not postgres.
    writeFileSync(file, 'CREATE TABLE who AS SELECT current_user AS name');
    ok(await pgx(['template', 'create', 'tpl_own_cli', '--file', file, '--unprivileged']));
    expect(await query<{ name: string }>(`postgresql://postgres@${rt.host}:${rt.port}/tdb_tpl_own_cli__cli`, 'SELECT name FROM who')).to.deep.equal([{ name: 'tpl_own_cli' }]);
    ok(await pgx(['template', 'drop', 'tpl_own_cli', '--force']));
    const usage = await pgx(['template', 'create', 'tpl_file3']);
    expect(usage.code).to.equal(2);
    expect(usage.stderr).to.include('missing --file FILE');
  });

  it('pgx db create --ttl 1h --json: the URL connects to a copy of the template', async () => {
    const r = ok(await pgx(['db', 'create', 'tpl', '--ttl', '1h', '--json']));
    created = JSON.parse(r.stdout) as typeof created;
    expect(created.template).to.equal('tpl');
    expect(created.name).to.match(/^tdb_tpl__/);
    expect(created.url).to.match(/^postgresql:\/\//);
    const rows = await query<{ email: string }>(created.url, 'SELECT email FROM users');
    expect(rows.map((row) => row.email)).to.deep.equal(['a@example.com']);
    const got = JSON.parse(ok(await pgx(['db', 'get', created.name, '--json'])).stdout) as { expires_at: string | null };
    expect(got.expires_at).to.be.a('string');
  });

  it('pgx db revoke NAME --all: every credential of the database', async () => {
    const d = JSON.parse(ok(await pgx(['db', 'create', 'tpl', '--json'])).stdout) as { name: string };
    for (let i = 0; i < 2; i++) ok(await pgx(['db', 'credential', d.name]));
    expect(ok(await pgx(['db', 'revoke', d.name, '--all'])).stdout).to.equal(`revoked 2 credentials on ${d.name}\n`);
    expect(JSON.parse(ok(await pgx(['db', 'revoke', d.name, '--all', '--json'])).stdout)).to.deep.equal({ name: d.name, revoked: 0 });
    expect((await pgx(['db', 'get', d.name, '--all'])).code).to.equal(2);
    ok(await pgx(['db', 'drop', d.name]));
  });

  it('pgx db create --ttl 1h30m: the grammar a Branch takes (5400 s)', async () => {
    const d = JSON.parse(ok(await pgx(['db', 'create', 'tpl', '--ttl', '1h30m', '--json'])).stdout) as { name: string; created_at: string; expires_at: string };
    expect((Date.parse(d.expires_at) - Date.parse(d.created_at)) / 1000).to.be.within(5399, 5401);
    ok(await pgx(['db', 'drop', d.name]));
  });

    it('pgx db create without --json prints the connection URL only', async () => {
    const r = ok(await pgx(['db', 'create', 'tpl', '--name', 'tdb_tpl__named', '--pin']));
    expect(r.stdout.trim()).to.match(/^postgresql:\/\/\S+\/tdb_tpl__named$/);
    ok(await pgx(['db', 'drop', 'tdb_tpl__named']));
  });

  it('pgx db list shows it', async () => {
    const r = ok(await pgx(['db', 'list']));
    expect(r.stdout).to.match(/^NAME\s+TEMPLATE\s+OWNER/);
    expect(r.stdout).to.include(created.name);
    const json = JSON.parse(ok(await pgx(['db', 'list', '--json'])).stdout) as { items: { name: string }[] };
    expect(json.items.map((d) => d.name)).to.include(created.name);
  });

  it('pgx db pin and unpin', async () => {
    expect(ok(await pgx(['db', 'pin', created.name])).stdout).to.equal(`pinned ${created.name}\n`);
    const pinned = JSON.parse(ok(await pgx(['db', 'get', created.name, '--json'])).stdout) as { pinned: boolean };
    expect(pinned.pinned).to.equal(true);
    const unpinned = JSON.parse(ok(await pgx(['db', 'unpin', created.name, '--json'])).stdout) as { pinned: boolean };
    expect(unpinned.pinned).to.equal(false);
  });

  it('pgx status: the key lines, and --json with the status keys', async () => {
    const human = ok(await pgx(['status'])).stdout;
    for (const label of ['runtime', 'memory', 'sessions', 'databases', 'pool tpl', 'mints', 'janitor']) {
      expect(human, label).to.match(new RegExp(`^${label}\\s`, 'm'));
    }
    expect(human).to.match(/^runtime\s+pid \d+, up \S+, pgx \S+/m);
    expect(human).to.match(/^memory\s+PSS [\d.]+ MB/m);
    expect(human).to.match(/^databases\s+\d+ total, \d+ ephemeral, \d+ spares, \d+ pinned, 2 templates/m);
    expect(human).to.match(/^pool tpl\s+\d+\/\d+ ready/m);
    expect(human).to.match(/^mints\s+\d+ warm, \d+ cold, \d+ failures; latency mean [\d.]+ ms, p99 [\d.]+ ms/m);
    expect(human).to.match(/^janitor\s+\d+ drops?, last run /m);
    expect(human).to.match(/^disk\s+[\d.]+ MB free of [\d.]+ MB \(keeps [\d.]+ MB\), ok; reserve [\d.]+ MB/m);
    // Counts only: disk use by kind reads every database's size, so it waits for --disk.
    expect(human).to.match(/^disk use\s+not measured \(pgx status --disk/m);
    const json = JSON.parse(ok(await pgx(['status', '--json'])).stdout) as Record<string, unknown>;
    expect(json).to.include.keys('runtime', 'memory', 'sessions', 'databases', 'pool', 'mints', 'janitor');
    expect(json.pool).to.have.property('tpl');
  });

  it('pgx doctor: every check answered, the runtime found at the URL, exit 0', async () => {
    const r = ok(await pgx(['doctor', '--json', '--data-dir', rt.dataDir]));
    const report = JSON.parse(r.stdout) as { ok: boolean; checks: { name: string; verdict: string; detail: string }[] };
    expect(report.ok).to.equal(true);
    expect(report.checks.map((c) => c.name)).to.deep.equal(['node', 'postgres', 'storage', 'memory', 'psql', 'import', 'runtime']);
    const by = Object.fromEntries(report.checks.map((c) => [c.name, c]));
    // Which sources import here: through pg_dump up to its major, newer ones through the logical copy.
    expect(by.import!.detail).to.match(/^(sources up to PostgreSQL \d+ through pg_dump \d+ \(\S+\)(; PostgreSQL \d+-18 through the logical copy .*postgresql-client-18 .*)?|no pg_dump found: sources on PostgreSQL 12-18 through the logical copy .*)$/);
    expect(by.postgres!.detail).to.match(/^PostgreSQL 18\.\d+ in /);
    expect(by.runtime!.verdict).to.equal('ok');
    expect(by.runtime!.detail).to.include(`pid ${process.pid}`);
    expect(by.storage!.detail).to.include(rt.dataDir);
    const human = ok(await pgx(['doctor', '--data-dir', rt.dataDir])).stdout;
    expect(human).to.match(/^ok {4}node {6}Node\.js /m);
    const badBin = await pgx(['doctor', '--pg-bin', '/nonexistent']);
    expect(badBin.code).to.equal(1);
    expect(badBin.stdout).to.match(/^fail {2}postgres .*--pg-bin \/nonexistent: no executable postgres there/m);
  });

  it('pgx db drop: gone from the list', async () => {
    expect(ok(await pgx(['db', 'drop', created.name])).stdout).to.equal(`dropped ${created.name}\n`);
    const json = JSON.parse(ok(await pgx(['db', 'list', '--json'])).stdout) as { items: { name: string }[] };
    expect(json.items.map((d) => d.name)).to.not.include(created.name);
  });

  it('an unknown template: exit 1 with the message and hint', async () => {
    const r = await pgx(['db', 'create', 'nosuch']);
    expect(r.code).to.equal(1);
    expect(r.stdout).to.equal('');
    expect(r.stderr).to.include('pgx: there is no template "nosuch"');
    expect(r.stderr).to.match(/^hint: pgx template list shows the templates; pgx template seal nosuch makes one/m);
  });

  it('a wrong token: exit 1 naming the token', async () => {
    const r = await pgx(['db', 'list'], { PGX_API_TOKEN: 'wrong-token-0123456789' });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/^pgx: .*token/m);
    const flag = await pgx(['status', '--token', 'another-wrong-token-0123'], { PGX_API_TOKEN: undefined });
    expect(flag.code).to.equal(1);
    expect(flag.stderr).to.include('token');
  });

  it('no runtime at the URL: exit 1 with the hint to start one or pass --url', async () => {
    const port = await freePort();
    const r = await pgx(['status'], { PGX_URL: `http://127.0.0.1:${port}` });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include(`cannot reach the PGX API at http://127.0.0.1:${port}`);
    expect(r.stderr).to.match(/^hint: .*pgx start --api-port.*--url/m);
    const viaFlag = await pgx(['db', 'list', '--url', `http://127.0.0.1:${port}`]);
    expect(viaFlag.code).to.equal(1);
  });

  it('bad usage: exit 2 with the error and one line pointing to the command\'s --help', async () => {
    for (const args of [['db'], ['db', 'create'], ['db', 'frobnicate'], ['db', 'list', '--bogus'], ['template', 'seal'], ['status', 'extra'], ['db', 'create', 'tpl', '--ttl', 'soon'], ['db', 'list', '--pin'], ['nosuchcommand'], ['url'], ['env', 'a', 'b'], ['psql', '--bogus'], ['mcp', 'extra'], ['doctor', '--bogus'], ['check', '--bogus'], ['check']]) {
      const r = await pgx(args);
      expect(r.code, args.join(' ')).to.equal(2);
      expect(r.stderr, args.join(' ')).to.match(/^pgx: /);
      const lines = r.stderr.trimEnd().split('\n');
      expect(lines, args.join(' ')).to.have.length(2);
      const command = args[0] === 'nosuchcommand' ? 'pgx' : `pgx ${args[0]}`;
      expect(lines[1], args.join(' ')).to.equal(`Run '${command} --help' for usage.`);
    }
  });

  it('--help on every command: exit 0', async () => {
    for (const args of [['--help'], ['status', '--help'], ['template', '--help'], ['db', '--help'], ['db', 'create', '--help'], ['doctor', '--help']]) {
      const r = ok(await pgx(args));
      expect(r.stdout, args.join(' ')).to.include('Usage: pgx');
    }
  });
});
