// --auth scram from the README's steps alone, with a real `pgx start` process: the admin password is
// generated into the data directory (0600) and named in the ready line, as is the API token the runtime
// made; a tenant declared in the config mints by connecting with its password and no CREATEDB, and
// cannot CREATE DATABASE itself; a restart keeps both secrets; a config that would make the admin a
// tenant stops the start with what to do.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { freePort, runCommand, type CommandResult } from '../helpers/commands.js';
import { freshDataDir } from '../helpers/runtime.js';
import { failedStart, startRuntimeProcess, type RuntimeProcess } from '../helpers/runtime-process.js';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

describe('cli: --auth scram as the README says', function () {
  this.timeout(120_000);
  let work: string;
  let dataDir: string;
  let args: string[];
  let port: number;
  let apiPort: number;
  let runtime: RuntimeProcess | undefined;

  function psql(user: string, password: string, database: string, sql: string): Promise<CommandResult> {
    return runCommand('psql', ['-X', '-At', '-v', 'ON_ERROR_STOP=1', `postgresql://${user}@127.0.0.1:${port}/${database}`, '-c', sql], {
      env: { ...process.env, PGPASSWORD: password, PGCONNECT_TIMEOUT: '10' },
      timeoutMs: 30_000,
    });
  }

  function pgx(cli: string[], token: string): Promise<CommandResult> {
    return runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...cli], {
      cwd: root,
      env: { ...process.env, PGX_URL: `http://127.0.0.1:${apiPort}`, PGX_API_TOKEN: token },
      timeoutMs: 60_000,
    });
  }

  const secret = (file: string): string => fs.readFileSync(path.join(dataDir, file), 'utf8').trim();

  before(async function () {
    dataDir = await freshDataDir();
    work = path.dirname(dataDir);
    const socketDir = path.join(work, 'sock');
    fs.mkdirSync(socketDir);
    fs.chmodSync(socketDir, 0o755);
    fs.writeFileSync(path.join(work, 'pgx.json'), JSON.stringify({ users: [{ name: 'app', password: 's3cret' }] }));
    fs.writeFileSync(path.join(work, 'schema.sql'), 'CREATE TABLE users (id bigserial PRIMARY KEY, email text UNIQUE);\n');
    port = await freePort();
    apiPort = await freePort();
    args = ['--data-dir', dataDir, '--auth', 'scram', '--config', path.join(work, 'pgx.json'), '--port', String(port), '--socket-dir', socketDir, '--api-port', String(apiPort), '--pool-size', '1'];
    runtime = await startRuntimeProcess(args);
  });

  after(async function () {
    await runtime?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('names where the admin password and the API token are; both files are 0600', function () {
    expect(runtime!.readyLine).to.include(`auth scram, admin password in ${path.join(dataDir, 'pgx-admin.password')}`);
    expect(runtime!.readyLine).to.include(`(token in ${path.join(dataDir, 'pgx-api.token')})`);
    for (const file of ['pgx-admin.password', 'pgx-api.token']) {
      expect(fs.statSync(path.join(dataDir, file)).mode & 0o777, file).to.equal(0o600);
      expect(secret(file), file).to.have.length.at.least(16);
    }
  });

  it('the admin logs in with that password, and not without it', async function () {
    expect((await psql('postgres', secret('pgx-admin.password'), 'postgres', 'SELECT current_user')).stdout.trim()).to.equal('postgres');
    const wrong = await psql('postgres', 'not-the-password', 'postgres', 'SELECT 1');
    expect(wrong.code).to.equal(2);
    expect(wrong.stderr).to.include('password authentication failed for user "postgres"');
  });

  it('a tenant from the config mints by connecting, owns its database, and cannot CREATE DATABASE', async function () {
    const built = await pgx(['template', 'create', 'tpl_app', '--file', path.join(work, 'schema.sql'), '--owner', 'app'], secret('pgx-api.token'));
    expect(built.code, built.stderr).to.equal(0);
    const minted = await psql('app', 's3cret', 'tdb_tpl_app__pr1', 'CREATE TABLE notes (id int); SELECT count(*) FROM users');
    expect(minted.code, minted.stderr).to.equal(0);
    expect(minted.stdout.trim().split('\n').pop()).to.equal('0');
    const owner = await psql('postgres', secret('pgx-admin.password'), 'postgres', "SELECT pg_get_userbyid(datdba) FROM pg_database WHERE datname = 'tdb_tpl_app__pr1'");
    expect(owner.stdout.trim()).to.equal('app');
    const create = await psql('app', 's3cret', 'tdb_tpl_app__pr1', 'CREATE DATABASE mine');
    expect(create.code).to.equal(1);
    expect(create.stderr).to.include('permission denied to create database');
  });

  it('keeps the admin password and the API token across a restart', async function () {
    const [password, token] = [secret('pgx-admin.password'), secret('pgx-api.token')];
    await runtime!.stop();
    runtime = await startRuntimeProcess(args);
    expect([secret('pgx-admin.password'), secret('pgx-api.token')]).to.deep.equal([password, token]);
    expect((await psql('postgres', password, 'postgres', 'SELECT 1')).code).to.equal(0);
    expect((await pgx(['db', 'list'], token)).code).to.equal(0);
  });

  it('PGX_ADMIN_PASSWORD sets the admin password instead of the file', async function () {
    await runtime!.stop();
    runtime = await startRuntimeProcess(args, { PGX_ADMIN_PASSWORD: 'from-the-environment' });
    expect(runtime.readyLine).to.include('admin password from PGX_ADMIN_PASSWORD');
    expect((await psql('postgres', 'from-the-environment', 'postgres', 'SELECT 1')).code).to.equal(0);
  });

  it('a config that makes the admin a tenant stops the start with a hint', async function () {
    await runtime!.stop();
    runtime = undefined;
    const bad = path.join(work, 'bad.json');
    fs.writeFileSync(bad, JSON.stringify({ users: [{ name: 'postgres', password: 'x-password', superuser: false }] }));
    const r = await failedStart(['--data-dir', dataDir, '--auth', 'scram', '--config', bad, '--port', String(port)]);
    expect(r.code).to.equal(1);
    expect(r.stderr).to.include('users: "postgres" is the runtime\'s admin, always a superuser');
    expect(r.stderr).to.match(/hint: .*give the tenant a name of its own/);
  });
});
