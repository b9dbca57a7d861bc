// Lifetimes through the surfaces a user touches: the README's `pgx db create tpl --ttl 1h` lives past
// the grace period with nobody connected, and a name PGX dropped answers psql with 3D000 saying when
// and why instead of quietly minting an empty database under the URL the user was handed.

import { expect } from 'chai';
import path from 'node:path';
import pg from 'pg';
import { runCommand, waitFor, type CommandResult } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'lifetimes-test-token-0123';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const GRACE_SECONDS = 1;

describe('cli: lifetimes (a TTL is the lifetime; a dropped address answers why)', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let apiUrl: string;

  function pgx(args: string[]): Promise<CommandResult> {
    return runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...args], {
      cwd: root,
      env: { ...process.env, PGX_URL: apiUrl, PGX_API_TOKEN: TOKEN },
      timeoutMs: 30_000,
    });
  }

  function psql(url: string, sql: string): Promise<CommandResult> {
    return runCommand('psql', ['-X', '-At', '-v', 'ON_ERROR_STOP=1', url, '-c', sql], { env: { ...process.env, PGCONNECT_TIMEOUT: '10' }, timeoutMs: 30_000 });
  }

  async function created(args: string[]): Promise<{ name: string; url: string }> {
    const r = await pgx(['db', 'create', 'tpl', ...args, '--json']);
    expect(r.code, r.stderr).to.equal(0);
    return JSON.parse(r.stdout) as { name: string; url: string };
  }

  async function listed(name: string): Promise<boolean> {
    const r = await pgx(['db', 'list', '--json']);
    return (JSON.parse(r.stdout) as { items: { name: string }[] }).items.some((d) => d.name === name);
  }

  before(async () => {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, grace: GRACE_SECONDS });
    apiUrl = `http://127.0.0.1:${rt.runtime.api!.port}`;
    const admin = new pg.Client(rt.connection('postgres'));
    await admin.connect();
    await admin.query('CREATE DATABASE tpl');
    await admin.end();
    const tpl = new pg.Client(rt.connection('tpl'));
    await tpl.connect();
    await tpl.query('CREATE TABLE users (id bigserial PRIMARY KEY, email text UNIQUE)');
    await tpl.end();
    expect((await pgx(['template', 'seal', 'tpl'])).code).to.equal(0);
  });

  after(async () => {
    await rt?.stop();
  });

  it('db create --ttl 1h outlives --grace with no session; its row is still there', async () => {
    const db = await created(['--ttl', '1h']);
    expect((await psql(db.url, "INSERT INTO users (email) VALUES ('a@example.com')")).code).to.equal(0);
    // Several janitor passes past the grace period after the last session.
    await new Promise((r) => setTimeout(r, (GRACE_SECONDS + 2) * 1000));
    expect(await listed(db.name)).to.equal(true);
    const r = await psql(db.url, 'SELECT email FROM users');
    expect(r.stdout.trim()).to.equal('a@example.com');
    expect((await pgx(['db', 'drop', db.name])).code).to.equal(0);
    // The URL it handed out now says what happened, and mints nothing.
    const gone = await psql(db.url, 'SELECT 1');
    expect(gone.code).to.equal(2);
    expect(gone.stderr).to.match(new RegExp(`FATAL: {2}database "${db.name}" was dropped at \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d UTC \\(dropped by role "postgres"\\)`));
    expect(await listed(db.name)).to.equal(false);
    const get = await pgx(['db', 'get', db.name]);
    expect(get.code).to.equal(1);
    expect(get.stderr).to.include(`database "${db.name}" was dropped at `);
  });

  it('db create --ttl 2 is dropped at its TTL; psql then hears that its ttl expired', async () => {
    const db = await created(['--ttl', '2']);
    await waitFor('the drop at the TTL', async () => !(await listed(db.name)), 15_000);
    const gone = await psql(db.url, 'SELECT 1');
    expect(gone.code).to.equal(2);
    expect(gone.stderr).to.include(`database "${db.name}" was dropped at `);
    expect(gone.stderr).to.include('(its ttl expired)');
  });

  it('db create without --ttl, never connected to: dropped after --grace, and the URL says so', async () => {
    const db = await created([]);
    await waitFor('the drop after grace', async () => !(await listed(db.name)), 15_000);
    const gone = await psql(db.url, 'SELECT 1');
    expect(gone.stderr).to.include(`(no session for --grace ${GRACE_SECONDS} s)`);
  });
});
