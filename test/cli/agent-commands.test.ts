// The agent's loop through the CLI, as a person or a script drives it: pgx db create, pgx url,
// pgx env, pgx psql (the real psql, with stdio handed through), pgx db snapshot, break it, pgx db
// restore, the data back, pgx db drop. The real `node bin/pgx.js` against a real runtime.

import { expect } from 'chai';
import path from 'node:path';
import { ApiClient } from '../../src/api/client.js';
import { runCommand, type CommandResult } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'cli-agent-token-0123456789abcdef';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

describe('cli: pgx url, env and psql in an agent loop', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let apiUrl: string;

  function pgx(args: string[], env: Record<string, string | undefined> = {}): Promise<CommandResult> {
    const base: NodeJS.ProcessEnv = { ...process.env, PGX_URL: apiUrl, PGX_API_TOKEN: TOKEN, PSQLRC: '/dev/null', PGCONNECT_TIMEOUT: '10', ...env };
    for (const [k, v] of Object.entries(base)) if (v === undefined) delete base[k];
    return runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...args], { cwd: root, env: base, timeoutMs: 60_000 });
  }

  function ok(r: CommandResult): CommandResult {
    expect(r.code, `exit code; stderr: ${r.stderr}`).to.equal(0);
    return r;
  }

  before(async () => {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 1 });
    apiUrl = `http://127.0.0.1:${rt.runtime.api!.port}`;
    await new ApiClient({ url: apiUrl, token: TOKEN }).buildTemplate({ name: 'tpl_cli', sql: "CREATE TABLE users (id int PRIMARY KEY, email text); INSERT INTO users VALUES (1, 'a@example.com'), (2, 'b@example.com')" });
  });

  after(async () => {
    await rt?.stop();
  });

  it('create, url, env, psql, snapshot, break, restore, drop', async () => {
    const created = JSON.parse(ok(await pgx(['db', 'create', 'tpl_cli', '--ttl', '6h', '--json'])).stdout) as { name: string; url: string };
    const name = created.name;

    expect(ok(await pgx(['url', name])).stdout).to.equal(`${created.url}\n`);
    expect(JSON.parse(ok(await pgx(['url', name, '--json'])).stdout)).to.deep.equal({ name, url: created.url });

    const env = ok(await pgx(['env', name])).stdout;
    const u = new URL(created.url);
    expect(env).to.equal(
      [`export DATABASE_URL=${created.url}`, `export PGHOST=${u.hostname}`, `export PGPORT=${u.port}`, `export PGUSER=${u.username}`, `export PGDATABASE=${name}`, ''].join('\n'),
    );
    const envJson = JSON.parse(ok(await pgx(['env', name, '--json'])).stdout) as Record<string, string>;
    expect(envJson).to.deep.equal({ DATABASE_URL: created.url, PGHOST: u.hostname, PGPORT: u.port, PGUSER: u.username, PGDATABASE: name });
    // What `eval "$(pgx env NAME)"` gives a shell: psql itself (not pgx psql) reaches the database.
    const viaEnv = await runCommand('sh', ['-c', `eval "$1" && psql -X -At -c 'SELECT count(*) FROM users'`, 'sh', env], { env: { ...process.env, PGCONNECT_TIMEOUT: '10' } });
    expect(viaEnv.stdout, viaEnv.stderr).to.equal('2\n');

    expect(ok(await pgx(['psql', name, '-c', 'SELECT 1'])).stdout).to.match(/^ \?column\? \n-+\n +1\n\(1 row\)\n/);
    expect(ok(await pgx(['psql', name, '--', '-At', '-c', 'SELECT email FROM users ORDER BY id'])).stdout).to.equal('a@example.com\nb@example.com\n');

    expect(ok(await pgx(['db', 'snapshot', name, 'cli_before'])).stdout).to.equal(`snapshot cli_before of ${name} taken\n`);
    ok(await pgx(['psql', name, '-c', 'DROP TABLE users']));
    const broken = await pgx(['psql', name, '-At', '-c', 'SELECT count(*) FROM users']);
    expect(broken.code).to.equal(1); // psql's own exit code for a failed statement, passed through
    expect(broken.stderr).to.include('relation "users" does not exist');

    expect(ok(await pgx(['db', 'restore', name, 'cli_before'])).stdout).to.equal(`restored ${name} to snapshot cli_before\n`);
    expect(ok(await pgx(['psql', name, '-At', '-c', 'SELECT count(*) FROM users'])).stdout).to.equal('2\n');

    expect(ok(await pgx(['db', 'drop', name])).stdout).to.equal(`dropped ${name}\n`);
    for (const command of ['url', 'env', 'psql']) {
      const gone = await pgx([command, name]);
      expect(gone.code, command).to.equal(1);
      // Created through the API, so its name answers with when and why it went (a tombstone).
      expect(gone.stderr, command).to.match(new RegExp(`pgx: database "${name}" was dropped at .* \\(dropped by role "postgres"\\)`));
      expect(gone.stderr, command).to.match(/^hint: /m);
    }
  });

  it('psql missing: exit 1 with the hint to install it', async () => {
    const created = JSON.parse(ok(await pgx(['db', 'create', 'tpl_cli', '--json'])).stdout) as { name: string };
    const r = await pgx(['psql', created.name, '-c', 'SELECT 1'], { PGX_PSQL: '/nonexistent/psql' });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include('pgx: /nonexistent/psql not found');
    expect(r.stderr).to.match(/^hint: Install the PostgreSQL client/m);
    ok(await pgx(['db', 'drop', created.name]));
  });

  it('bad usage: exit 2 with the error and a pointer to the command\'s --help; --help: exit 0', async () => {
    for (const args of [['url'], ['url', 'a', 'b'], ['env'], ['env', '--bogus', 'x'], ['psql'], ['psql', '--json', 'x'], ['mcp', 'extra'], ['mcp', '--json'], ['mcp', '--host', '127.0.0.1'], ['mcp', '--http', 'eighty']]) {
      const r = await pgx(args);
      expect(r.code, args.join(' ')).to.equal(2);
      expect(r.stderr, args.join(' ')).to.match(/^pgx: /);
      expect(r.stderr.trimEnd().split('\n')[1], args.join(' ')).to.equal(`Run 'pgx ${args[0]} --help' for usage.`);
    }
    for (const args of [['url', '--help'], ['env', '--help'], ['psql', '--help'], ['mcp', '--help']]) {
      expect(ok(await pgx(args)).stdout, args.join(' ')).to.include(`Usage: pgx ${args[0]}`);
    }
    const help = ok(await pgx(['--help'])).stdout;
    for (const command of ['url', 'env', 'psql', 'mcp']) expect(help).to.match(new RegExp(`^  ${command}\\s`, 'm'));
  });
});
