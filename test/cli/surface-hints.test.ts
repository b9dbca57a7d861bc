// Each surface words its hints in its own terms, chosen by the error's code: the CLI names `pgx`
// commands and flags, the HTTP API routes and body fields, the MCP server tools and arguments. One
// runtime, one unsealed template, one database with a session open, asked the same things through the
// CLI (a child process), HTTP (fetch) and MCP (`pgx mcp` over stdio, the SDK's client).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { expect } from 'chai';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import type { StatusBody } from '../../src/api/contract.js';
import { PATHS, pathFor } from '../../src/api/paths.js';
import { formatStatus } from '../../src/cli/status.js';
import { runCommand, type CommandResult } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { callTool } from '../mcp/harness.js';

const TOKEN = 'hints-test-token-0123456789';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const PGX_BIN = path.join(root, 'bin/pgx.js');

/** Words that belong to another surface than the CLI. */
const NOT_CLI = /\/v1\/|\bPOST\b|\bDELETE\b|\bGET\b|"replace"|"force"|replace: true|force: true|SELECT pgx_|a third argument/;

describe('surfaces: hints in each surface\'s own terms', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let apiUrl: string;
  let mcp: Client;
  let session: pg.Client;
  let db: string;

  function pgx(args: string[]): Promise<CommandResult> {
    const env: NodeJS.ProcessEnv = { ...process.env, PGX_URL: apiUrl, PGX_API_TOKEN: TOKEN };
    return runCommand(process.execPath, [PGX_BIN, ...args], { cwd: root, env, timeoutMs: 60_000 });
  }

  async function http(method: string, route: string, body?: unknown): Promise<{ status: number; body: { code: string; sqlstate: string; message: string; hint: string | null } }> {
    const res = await fetch(apiUrl + route, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json' },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as never };
  }

  /** `pgx ...` failing with exit 1: its `pgx:` line and `hint:` line. */
  async function cliError(args: string[]): Promise<{ message: string; hint: string }> {
    const r = await pgx(args);
    expect(r.code, `${args.join(' ')}: ${r.stdout}${r.stderr}`).to.equal(1);
    expect(r.stderr, args.join(' ')).to.not.match(NOT_CLI);
    return { message: /^pgx: (.*)$/m.exec(r.stderr)?.[1] ?? '', hint: /^hint: (.*)$/m.exec(r.stderr)?.[1] ?? '' };
  }

  before(async () => {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN });
    apiUrl = `http://127.0.0.1:${rt.runtime.api!.port}`;
    const admin = new pg.Client(rt.connection('postgres'));
    await admin.connect();
    await admin.query('CREATE DATABASE tpl_raw');
    await admin.end();
    // Sealed once and unsealed for changes: the template the issue met.
    expect((await pgx(['template', 'seal', 'tpl_raw'])).code).to.equal(0);
    expect((await pgx(['template', 'unseal', 'tpl_raw'])).code).to.equal(0);
    const file = path.join(rt.dataDir, '..', 'hints.sql');
    writeFileSync(file, 'CREATE TABLE t (id int)');
    const built = await pgx(['template', 'create', 'tpl_ok', '--file', file]);
    expect(built.code, built.stderr).to.equal(0);
    db = (await pgx(['db', 'create', 'tpl_ok', '--name', 'tdb_tpl_ok__hints'])).stdout.trim().replace(/^.*\//, '');
    expect(db).to.equal('tdb_tpl_ok__hints');
    session = new pg.Client(rt.connection(db));
    await session.connect();
    const transport = new StdioClientTransport({
      command: process.execPath,
      args: [PGX_BIN, 'mcp'],
      env: { ...(process.env as Record<string, string>), PGX_URL: apiUrl, PGX_API_TOKEN: TOKEN },
      cwd: root,
      stderr: 'pipe',
    });
    mcp = new Client({ name: 'pgx-hints-test', version: '1.0.0' });
    await mcp.connect(transport);
  });

  after(async () => {
    await mcp?.close();
    await session?.end().catch(() => undefined);
    await rt?.stop();
  });

  describe('an unsealed template', () => {
    it('CLI: the template is not sealed, seal it with pgx template seal', async () => {
      const e = await cliError(['db', 'create', 'tpl_raw']);
      expect(e.message).to.equal('template "tpl_raw" is not sealed');
      expect(e.hint).to.equal('Seal it: pgx template seal tpl_raw');
    });

    it('HTTP: TEMPLATE_NOT_SEALED, 404 and 3D000 as before, the seal route in the hint', async () => {
      const r = await http('POST', PATHS.databases, { template: 'tpl_raw' });
      expect(r.status).to.equal(404);
      expect(r.body).to.include({ code: 'TEMPLATE_NOT_SEALED', sqlstate: '3D000', message: 'template "tpl_raw" is not sealed', hint: 'Seal it: POST /v1/templates/tpl_raw/seal.' });
    });

    it('MCP: the tool error names list_templates, not a route', async () => {
      const a = await callTool(mcp, 'create_database', { template: 'tpl_raw' });
      expect(a.isError).to.equal(true);
      expect(a.text).to.match(/^error TEMPLATE_NOT_SEALED \(3D000\): template "tpl_raw" is not sealed\n(detail: .*\n)?hint: .*list_templates/);
      expect(a.text).to.not.include('/v1/');
    });

    it('SQL: connecting to a name minted from it answers 3D000 with the seal function, not a route', async () => {
      const c = new pg.Client(rt.connection('tdb_tpl_raw__x'));
      const err = (await c.connect().then(
        () => null,
        (e: unknown) => e,
      )) as { code?: string; hint?: string } | null;
      await c.end().catch(() => undefined);
      expect(err?.code).to.equal('3D000');
      expect(err?.hint).to.include("pgx_seal_template('tpl_raw')");
      expect(err?.hint).to.not.include('/v1/');
    });
  });

  it('a template that does not exist: UNKNOWN_TEMPLATE, with each surface\'s way to list and build one', async () => {
    const e = await cliError(['db', 'create', 'tpl_none']);
    expect(e.message).to.equal('there is no template "tpl_none"');
    expect(e.hint).to.equal('pgx template list shows the templates; pgx template seal tpl_none makes one of a database, pgx template create tpl_none --file schema.sql builds one.');
    const r = await http('POST', PATHS.databases, { template: 'tpl_none' });
    expect(r.body).to.include({ code: 'UNKNOWN_TEMPLATE', sqlstate: '3D000' });
    expect(r.body.hint).to.include('GET /v1/templates');
    const a = await callTool(mcp, 'create_database', { template: 'tpl_none' });
    expect(a.text).to.match(/^error UNKNOWN_TEMPLATE \(3D000\): there is no template "tpl_none"\nhint: .*list_templates/);
  });

  it('a template name taken: --replace on the CLI, "replace": true over HTTP', async () => {
    const file = path.join(rt.dataDir, '..', 'hints.sql');
    const e = await cliError(['template', 'create', 'tpl_ok', '--file', file]);
    expect(e.hint).to.equal('Pass --replace to rebuild it, or pick another name.');
    const r = await http('POST', PATHS.templates, { name: 'tpl_ok', sql: 'SELECT 1' });
    expect(r.status).to.equal(409);
    expect(r.body.hint).to.equal('Send "replace": true to rebuild it, or another "name".');
  });


  it('a --file or --mask the CLI cannot read, or an empty script: named with its flag, not an errno or a body field', async () => {
    const dir = path.join(rt.dataDir, '..');
    const empty = path.join(dir, 'empty.sql');
    writeFileSync(empty, '');
    for (const [args, message] of [
      [['template', 'create', 'tpl_x', '--file', path.join(dir, 'nope.sql')], `cannot read --file ${path.join(dir, 'nope.sql')}: no such file`],
      [['template', 'create', 'tpl_x', '--file', dir], `cannot read --file ${dir}: it is a directory`],
      [['template', 'create', 'tpl_x', '--file', empty], `--file ${empty} is empty`],
      [['template', 'import', 'tpl_x', '--from', 'postgresql://u@127.0.0.1:1/db', '--mask', path.join(dir, 'nope.sql')], `cannot read --mask ${path.join(dir, 'nope.sql')}: no such file`],
    ] as const) {
      const e = await cliError([...args]);
      expect(e.message, args.join(' ')).to.equal(message);
      expect(e.hint, args.join(' ')).to.not.equal('');
    }
    const listed = (await http('GET', PATHS.templates)).body as unknown as { items: { name: string }[] };
    expect(listed.items.map((t) => t.name)).to.not.include('tpl_x');
  });
  it('a snapshot while a session is open: --force, "force": true, force: true', async () => {
    const e = await cliError(['db', 'snapshot', db, 'snap_hints']);
    expect(e.hint).to.equal('Close its sessions, or pass --force to end them (they get 57P01).');
    const r = await http('POST', pathFor(PATHS.databaseSnapshots, { name: db }), { name: 'snap_hints' });
    expect(r.status).to.equal(409);
    expect(r.body.hint).to.equal('Close its sessions, or send "force": true to end them (they get 57P01).');
    const a = await callTool(mcp, 'snapshot_database', { database: db, snapshot: 'snap_hints' });
    expect(a.text).to.match(/^error OBJECT_IN_USE \(55006\): .*\n(detail: .*\n)?hint: .*force: true/);
  });

  it('a template with live copies: pgx template drop NAME --force on the CLI, ?force=true over HTTP', async () => {
    const e = await cliError(['template', 'drop', 'tpl_ok']);
    expect(e.hint).to.include('pgx template drop tpl_ok --force');
    const r = await http('DELETE', pathFor(PATHS.template, { name: 'tpl_ok' }));
    expect(r.status).to.equal(409);
    expect(r.body.hint).to.include('DELETE /v1/templates/tpl_ok?force=true');
    expect(r.body.hint).to.not.include('pgx template');
  });

  it('an unknown database: pgx db list on the CLI, GET /v1/databases over HTTP, list_databases over MCP', async () => {
    for (const args of [['db', 'get', 'tdb_tpl_ok__nobody'], ['db', 'pin', 'tdb_tpl_ok__nobody'], ['url', 'tdb_tpl_ok__nobody'], ['db', 'ttl', 'tdb_tpl_ok__nobody', '1h']]) {
      const e = await cliError(args);
      expect(e.hint, args.join(' ')).to.match(/^pgx db list shows the live databases/);
    }
    const r = await http('GET', pathFor(PATHS.database, { name: 'tdb_tpl_ok__nobody' }));
    expect(r.status).to.equal(404);
    expect(r.body.hint).to.match(/^GET \/v1\/databases lists/);
    const a = await callTool(mcp, 'database_status', { database: 'tdb_tpl_ok__nobody' });
    expect(a.text).to.match(/^error UNKNOWN_DATABASE \(3D000\): .*\nhint: list_databases/);
  });

  /** psql's stderr for `sql` on `database`, failing; and the SQLSTATE (node-postgres, the same call). */
  async function psqlError(database: string, sql: string): Promise<{ stderr: string; code: string | undefined }> {
    const r = await runCommand('psql', ['-X', '-At', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose', '-c', sql], { env: rt.env(database), timeoutMs: 30_000 });
    expect(r.code, r.stdout).to.not.equal(0);
    const c = new pg.Client(rt.connection(database));
    const err = (await c.connect().then(() => c.query(sql)).then(() => null, (e: unknown) => e)) as { code?: string } | null;
    await c.end().catch(() => undefined);
    return { stderr: r.stderr, code: err?.code };
  }

  /** Words of the CLI or HTTP that a psql user must not be told. */
  const NOT_SQL = /\/v1\/|\bpgx (db|template) |force: true|replace: true|--force|--replace/;

  it('psql to a sealed template: PostgreSQL\'s 55000 and message, and a hint naming what to connect to instead', async () => {
    const e = await psqlError('tpl_ok', 'SELECT 1');
    expect(e.code).to.equal('55000');
    expect(e.stderr).to.include('database "tpl_ok" is not currently accepting connections');
    expect(e.stderr).to.match(/HINT:\s+Connect to a database minted from it \(tdb_tpl_ok__<token>/);
    expect(e.stderr).to.not.match(NOT_SQL);
  });

  it('a name PGX dropped: DATABASE_DROPPED, each surface saying how to make it again', async () => {
    const name = 'tdb_tpl_ok__gone';
    expect((await pgx(['db', 'create', 'tpl_ok', '--name', name])).code).to.equal(0);
    expect((await pgx(['db', 'drop', name])).code).to.equal(0);
    const e = await cliError(['db', 'get', name]);
    expect(e.message).to.match(/^database "tdb_tpl_ok__gone" was dropped at /);
    expect(e.hint).to.include(`pgx db create TEMPLATE --name ${name} makes it again`);
    const r = await http('GET', pathFor(PATHS.database, { name }));
    expect(r.status).to.equal(404);
    expect(r.body).to.include({ code: 'DATABASE_DROPPED', sqlstate: '3D000' });
    expect(r.body.hint).to.include('POST /v1/databases with "name" makes it again');
    const a = await callTool(mcp, 'database_status', { database: name });
    expect(a.text).to.match(/^error DATABASE_DROPPED \(3D000\): .*\nhint: .*create_database with this name/);
    const q = await psqlError(name, 'SELECT 1');
    expect(q.code).to.equal('3D000');
    expect(q.stderr).to.match(/HINT:\s+PGX keeps a dropped name .*connect to a new name/);
    expect(q.stderr).to.not.match(NOT_SQL);
  });

  it('a template drop of an ordinary database: NOT_A_TEMPLATE, with pgx db drop on the CLI and DROP DATABASE in SQL', async () => {
    const admin = new pg.Client(rt.connection('postgres'));
    await admin.connect();
    await admin.query('CREATE DATABASE plain_hints');
    await admin.end();
    const e = await cliError(['template', 'drop', 'plain_hints']);
    expect(e.message).to.equal('database "plain_hints" is not a template PGX knows');
    expect(e.hint).to.include('pgx db drop plain_hints');
    const r = await http('DELETE', pathFor(PATHS.template, { name: 'plain_hints' }));
    expect(r.body).to.include({ code: 'NOT_A_TEMPLATE', sqlstate: '22023' });
    expect(r.body.hint).to.include('DELETE /v1/databases/plain_hints');
    const q = await psqlError('postgres', "SELECT pgx_drop_template('plain_hints')");
    expect(q.stderr).to.match(/HINT:\s+Drop an ordinary database with DROP DATABASE "?plain_hints/);
    expect(q.stderr).to.not.match(NOT_SQL);
  });

  it('SQL callers are told the SQL call that forces: a snapshot with a session open, a template with live copies', async () => {
    const snap = await psqlError('postgres', `SELECT pgx_snapshot_database('${db}', 'snap_sql')`);
    expect(snap.code).to.equal('55006');
    expect(snap.stderr).to.include(`HINT:  Close them, or end them (they get 57P01): SELECT pgx_snapshot_database('${db}', 'snap_sql', true).`);
    expect(snap.stderr).to.not.match(NOT_SQL);
    const drop = await psqlError('postgres', "SELECT pgx_drop_template('tpl_ok')");
    expect(drop.code).to.equal('55006');
    expect(drop.stderr).to.include("SELECT pgx_drop_template('tpl_ok', true)");
    expect(drop.stderr).to.not.match(NOT_SQL);
  });

  it('a wrong token on the CLI says --token or PGX_API_TOKEN, not an HTTP header', async () => {
    const r = await runCommand(process.execPath, [PGX_BIN, 'db', 'list'], { cwd: root, env: { ...process.env, PGX_URL: apiUrl, PGX_API_TOKEN: 'wrong-token-0123456789' }, timeoutMs: 60_000 });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/^hint: Pass --token TOKEN or set PGX_API_TOKEN/m);
    expect(r.stderr).to.not.include('Authorization');
  });

  it('pgx status: counts and nouns agree, the trash backlog shown while there is one', async () => {
    const r = await pgx(['status']);
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/^sessions\s+1 session open on 1 database$/m);
    const status = JSON.parse((await pgx(['status', '--json'])).stdout) as StatusBody;
    const two = formatStatus({ ...status, sessions: { ...status.sessions, total: 2, databases: 2 }, janitor: { ...status.janitor, drops: 1 } });
    expect(two).to.match(/^sessions\s+2 sessions open on 2 databases$/m);
    expect(two).to.match(/^janitor\s+1 drop, /m);
    // The trash backlog shows only while there is one, at the end of the databases line.
    expect(r.stdout).to.match(/^databases\s+\d+ total, .* templates?$/m);
    const dropping = formatStatus({ ...status, databases: { ...status.databases, trash: 3 } });
    expect(dropping).to.match(/^databases\s+\d+ total, .*; 3 dropping \(DROP DATABASE in the background\)$/m);
  });
});
