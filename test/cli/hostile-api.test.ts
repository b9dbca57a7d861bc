// The CLI trusts no database URL the API answers with. The API is whatever listens at --url, by
// default 127.0.0.1:7432, which any local user can bind while no runtime does. A fake API here answers
// with a URL that is a psql option (--output=FILE, which truncates FILE): pgx psql must not run psql
// with it, and pgx url, env, db get, db list, db create and db credential must not print it. A real
// URL goes to psql as the value of --dbname, never as an argument of its own.

import { expect } from 'chai';
import fs from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { runCommand, type CommandResult } from '../helpers/commands.js';
import { scratchDir } from '../helpers/scratch.js';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

describe('cli: a database URL from the API is checked before psql or stdout get it', function () {
  this.timeout(60_000);
  let dir: string;
  let victim: string;
  let server: http.Server;
  let apiUrl: string;
  /** The url every answer of the fake API carries. */
  let served = '';

  function database(): Record<string, unknown> {
    return { name: 'db1', template: 'tpl', owner: 'postgres', created_at: '2026-01-01T00:00:00Z', last_session_end: null, in_use: false, pinned: false, expires_at: null, connection_limit: null, memory_limit_mb: null, url: served };
  }

  function pgx(args: string[], env: Record<string, string> = {}): Promise<CommandResult> {
    // Were psql to reach for a server, there is none at this socket directory.
    const base: NodeJS.ProcessEnv = { ...process.env, PGX_URL: apiUrl, PSQLRC: '/dev/null', PGHOST: path.join(dir, 'no-server'), PGCONNECT_TIMEOUT: '2', ...env };
    delete base.PGX_API_TOKEN;
    return runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...args], { cwd: root, env: base, timeoutMs: 30_000 });
  }

  before(async () => {
    dir = scratchDir('pgx-hostile-api-');
    victim = path.join(dir, 'victim.txt');
    server = http.createServer((req, res) => {
      const send = (body: unknown, status = 200): void => {
        res.writeHead(status, { 'content-type': 'application/json' }).end(JSON.stringify(body));
      };
      req.resume();
      req.on('end', () => {
        if (req.method === 'GET' && req.url === '/v1/databases/db1') send(database());
        else if (req.method === 'GET' && req.url?.startsWith('/v1/databases?')) send({ items: [database()], next: null });
        else if (req.method === 'POST' && req.url === '/v1/databases') send({ ...database(), credential: null }, 201);
        else if (req.method === 'POST' && req.url === '/v1/databases/db1/credentials') send({ user: 'u1', password: 'pw', url: served }, 201);
        else send({ code: 'UNKNOWN_DATABASE', sqlstate: '3D000', message: `no route ${req.method} ${req.url}`, hint: null }, 404);
      });
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    apiUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });

  after(async () => {
    await new Promise<void>((resolve) => server?.close(() => resolve()));
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  it('pgx psql refuses a url that is a psql option: psql does not run, the file it names is untouched', async () => {
    fs.writeFileSync(victim, 'precious\n');
    served = `--output=${victim}`;
    const r = await pgx(['psql', 'db1', '-c', 'SELECT 1']);
    expect(fs.readFileSync(victim, 'utf8')).to.equal('precious\n');
    expect(r.code, r.stderr).to.equal(1);
    expect(r.stderr).to.include(`pgx: the API at ${apiUrl} answered with a database URL that is not postgresql://`);
    expect(r.stderr).to.match(new RegExp(`^hint: The API at ${apiUrl.replace(/\./g, '\\.')} did not answer like a PGX runtime`, 'm'));
  });

  it('pgx url, env, db get, db list, db create and db credential refuse it too, printing nothing', async () => {
    for (const bad of [`--output=${victim}`, 'http://example.com/', 'postgresql://u@h:5432/db\n--output=x', 'postgresql://u@h:5432/d b']) {
      served = bad;
      for (const args of [['url', 'db1'], ['url', 'db1', '--json'], ['env', 'db1'], ['env', 'db1', '--json'], ['db', 'get', 'db1'], ['db', 'get', 'db1', '--json'], ['db', 'list'], ['db', 'list', '--limit', '5', '--json'], ['db', 'create', 'tpl'], ['db', 'create', 'tpl', '--json'], ['db', 'credential', 'db1']]) {
        const r = await pgx(args);
        const what = `${args.join(' ')} with ${JSON.stringify(bad)}`;
        expect(r.code, `${what}: ${r.stderr}`).to.equal(1);
        expect(r.stdout, what).to.equal('');
        expect(r.stderr, what).to.match(/did not answer like a PGX runtime/);
      }
    }
  });

  it('a postgresql:// url goes to psql as --dbname=URL, before the arguments given after NAME', async () => {
    served = 'postgresql://postgres@127.0.0.1:1/db1';
    const args = path.join(dir, 'psql-args');
    const fakePsql = path.join(dir, 'fake-psql');
    fs.writeFileSync(fakePsql, `#!/bin/sh\nprintf '%s\\n' "$@" > '${args}'\n`, { mode: 0o755 });
    const r = await pgx(['psql', 'db1', '-c', 'SELECT 1'], { PGX_PSQL: fakePsql });
    expect(r.code, r.stderr).to.equal(0);
    expect(fs.readFileSync(args, 'utf8')).to.equal(`--dbname=${served}\n-c\nSELECT 1\n`);
    for (const args of [['url', 'db1'], ['db', 'create', 'tpl'], ['db', 'credential', 'db1']]) {
      const ok = await pgx(args);
      expect(ok.code, ok.stderr).to.equal(0);
      expect(ok.stdout, args.join(' ')).to.equal(`${served}\n`);
    }
  });
});
