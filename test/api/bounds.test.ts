// Numbers a client sends, against a real runtime over real HTTP and the real CLI: every numeric field
// is bounded (400, 22023, the range in the hint), nothing a client stores can make a later read fail,
// and a stored value beyond the bounds (an older runtime's row, or one written by hand) is clamped at
// load instead of failing the start or GET /v1/databases.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { BOUNDS } from '../../src/api/contract.js';
import { PATHS, pathFor } from '../../src/api/paths.js';
import { directConnection, runCommand } from '../helpers/commands.js';
import { freshDataDir, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'bounds-test-token-0123456789';
const ROOT = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

interface Answer {
  status: number;
  body: Record<string, unknown>;
}

describe('api: numeric inputs are bounded, and reads survive absurd stored values', function () {
  this.timeout(120_000);
  let rt: TestRuntime;
  let dataDir: string;
  let base: string;

  async function call(method: string, urlPath: string, body?: unknown): Promise<Answer> {
    const res = await fetch(`${base}${urlPath}`, {
      method,
      headers: { authorization: `Bearer ${TOKEN}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    const text = await res.text();
    return { status: res.status, body: text.length > 0 ? (JSON.parse(text) as Record<string, unknown>) : {} };
  }

  async function start(): Promise<void> {
    rt = await startTestRuntime({ dataDir, apiPort: 0, apiToken: TOKEN, poolSize: 0 });
    base = `http://127.0.0.1:${rt.runtime.api!.port}`;
  }

  /** GET /v1/databases and GET of each one answer 200: no stored value breaks a read. */
  async function readsWork(): Promise<Record<string, unknown>[]> {
    const list = await call('GET', PATHS.databases);
    expect(list.status, JSON.stringify(list.body)).to.equal(200);
    const items = list.body.items as Record<string, unknown>[];
    for (const d of items) expect((await call('GET', pathFor(PATHS.database, { name: d.name as string }))).status).to.equal(200);
    return items;
  }

  before(async function () {
    dataDir = await freshDataDir();
    await start();
    const admin = new pg.Client(rt.connection('postgres'));
    await admin.connect();
    await admin.query('CREATE DATABASE tpl_b');
    await admin.end();
    expect((await call('POST', pathFor(PATHS.templateSeal, { name: 'tpl_b' }))).status).to.equal(200);
  });

  after(async function () {
    await rt?.stop();
    if (dataDir) fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
  });

  it('refuses out-of-range numbers with 400 / 22023 and the range in the hint; GET keeps working', async function () {
    const made = await call('POST', PATHS.databases, { template: 'tpl_b', name: 'tdb_tpl_b__target' });
    expect(made.status, JSON.stringify(made.body)).to.equal(201);
    const db = 'tdb_tpl_b__target';
    const cases: [string, string, unknown, string, string][] = [
      ['POST', PATHS.databases, { template: 'tpl_b', ttl_seconds: 1e308 }, 'ttl_seconds', BOUNDS.ttlSeconds.text],
      ['POST', PATHS.databases, { template: 'tpl_b', ttl_seconds: 8.64e12 }, 'ttl_seconds', BOUNDS.ttlSeconds.text],
      ['POST', PATHS.databases, { template: 'tpl_b', ttl_seconds: 0 }, 'ttl_seconds', BOUNDS.ttlSeconds.text],
      ['POST', PATHS.databases, { template: 'tpl_b', connection_limit: 1e12 }, 'connection_limit', BOUNDS.connectionLimit.text],
      ['POST', PATHS.databases, { template: 'tpl_b', connection_limit: 2.5 }, 'connection_limit', BOUNDS.connectionLimit.text],
      ['POST', PATHS.databases, { template: 'tpl_b', memory_limit_mb: 9007199254740991 }, 'memory_limit_mb', BOUNDS.memoryLimitMb.text],
      ['POST', PATHS.databases, { template: 'tpl_b', credential: { connection_limit: 3e9 } }, 'credential.connection_limit', BOUNDS.credentialConnectionLimit.text],
      ['PUT', pathFor(PATHS.databaseTtl, { name: db }), { ttl_seconds: 8.64e12 }, 'ttl_seconds', BOUNDS.ttlSeconds.text],
      ['PUT', pathFor(PATHS.databaseTtl, { name: db }), { ttl_seconds: 1e308 }, 'ttl_seconds', BOUNDS.ttlSeconds.text],
      ['PUT', pathFor(PATHS.databaseTtl, { name: db }), { ttl_seconds: 'soon' }, 'ttl_seconds', BOUNDS.ttlSeconds.text],
      ['PUT', pathFor(PATHS.databaseConnectionLimit, { name: db }), { connection_limit: 3e9 }, 'connection_limit', BOUNDS.connectionLimit.text],
      ['PUT', pathFor(PATHS.databaseMemoryLimit, { name: db }), { memory_limit_mb: 1e15 }, 'memory_limit_mb', BOUNDS.memoryLimitMb.text],
      ['PUT', pathFor(PATHS.databaseMemoryLimit, { name: db }), { memory_limit_mb: 0 }, 'memory_limit_mb', BOUNDS.memoryLimitMb.text],
      ['POST', pathFor(PATHS.databaseCredentials, { name: db }), { connection_limit: 3e9 }, 'connection_limit', BOUNDS.credentialConnectionLimit.text],
      ['POST', pathFor(PATHS.databaseCredentials, { name: db }), { connection_limit: -2 }, 'connection_limit', BOUNDS.credentialConnectionLimit.text],
    ];
    const before = (await readsWork()).length;
    for (const [method, urlPath, body, field, range] of cases) {
      const what = `${method} ${urlPath} ${JSON.stringify(body)}`;
      const res = await call(method, urlPath, body);
      expect(res.status, `${what}: ${JSON.stringify(res.body)}`).to.equal(400);
      expect(res.body, what).to.include({ code: 'INVALID_PARAMETER', sqlstate: '22023' });
      expect(res.body.message, what).to.include(field);
      expect(res.body.hint, what).to.include(`${field} takes ${range}`);
      // Nothing was created or changed that a later read would choke on.
      expect((await readsWork()).length, what).to.equal(before);
    }
    const target = await call('GET', pathFor(PATHS.database, { name: db }));
    expect(target.body).to.include({ expires_at: null, connection_limit: null, memory_limit_mb: null });
  });

  it('takes the largest values in range, and reads them back', async function () {
    const res = await call('POST', PATHS.databases, {
      template: 'tpl_b',
      name: 'tdb_tpl_b__largest',
      ttl_seconds: BOUNDS.ttlSeconds.max,
      connection_limit: BOUNDS.connectionLimit.max,
      memory_limit_mb: BOUNDS.memoryLimitMb.max,
      credential: { connection_limit: BOUNDS.credentialConnectionLimit.max },
    });
    expect(res.status, JSON.stringify(res.body)).to.equal(201);
    expect(res.body).to.include({ connection_limit: BOUNDS.connectionLimit.max, memory_limit_mb: BOUNDS.memoryLimitMb.max });
    expect(Date.parse(res.body.expires_at as string)).to.be.greaterThan(Date.parse('2030-01-01'));
    const items = await readsWork();
    expect(items.find((d) => d.name === 'tdb_tpl_b__largest')).to.include({ expires_at: res.body.expires_at });
    expect((await call('DELETE', pathFor(PATHS.database, { name: 'tdb_tpl_b__largest' }))).status).to.equal(204);
  });

  it('pgx db create --ttl refuses a TTL beyond the range, and nothing breaks the list', async function () {
    const env: NodeJS.ProcessEnv = { ...process.env, PGX_URL: base, PGX_API_TOKEN: TOKEN };
    const pgx = (args: string[]) => runCommand(process.execPath, [path.join(ROOT, 'bin/pgx.js'), ...args], { cwd: ROOT, env, timeoutMs: 60_000 });
    for (const ttl of ['100000000000d', '8640000000000', '3651d']) {
      const r = await pgx(['db', 'create', 'tpl_b', '--ttl', ttl]);
      expect(r.code, `--ttl ${ttl}: ${r.stdout}${r.stderr}`).to.not.equal(0);
      expect(r.stderr, `--ttl ${ttl}`).to.include(BOUNDS.ttlSeconds.text);
    }
    for (const [flag, value] of [['--connection-limit', '100001'], ['--memory-limit', '99999999999']]) {
      const r = await pgx(['db', 'create', 'tpl_b', flag!, value!]);
      expect(r.code, `${flag} ${value}`).to.not.equal(0);
      expect(r.stderr, `${flag} ${value}`).to.match(/expected a whole number/);
    }
    const list = await pgx(['db', 'list', '--json']);
    expect(list.code, list.stderr).to.equal(0);
    const ok = await pgx(['db', 'create', 'tpl_b', '--ttl', '3650d', '--json']);
    expect(ok.code, ok.stderr).to.equal(0);
    expect((JSON.parse(ok.stdout) as { expires_at: string }).expires_at).to.match(/^20\d\d-/);
  });

  it('a stored value beyond the bounds (older runtime, or by hand) is clamped at load; start and GET work', async function () {
    for (const name of ['tdb_tpl_b__far', 'tdb_tpl_b__infinite']) {
      expect((await call('POST', PATHS.databases, { template: 'tpl_b', name, pinned: true })).status).to.equal(201);
    }
    // Past what JavaScript's Date holds (year 275760) but inside PostgreSQL's timestamptz (294276).
    const control = new pg.Client(directConnection(rt, 'pgx_control'));
    await control.connect();
    try {
      await control.query(
        "UPDATE databases SET expires_at = '280000-01-01 00:00:00+00', connection_limit = 2000000000, memory_limit_mb = -5 WHERE name = 'tdb_tpl_b__far'",
      );
      await control.query("UPDATE databases SET expires_at = 'infinity', last_session_end = 'infinity', connection_limit = 0 WHERE name = 'tdb_tpl_b__infinite'");
    } finally {
      await control.end();
    }
    await rt.stop();
    await start();
    const items = await readsWork();
    const far = items.find((d) => d.name === 'tdb_tpl_b__far')!;
    const infinite = items.find((d) => d.name === 'tdb_tpl_b__infinite')!;
    expect(far, 'tdb_tpl_b__far is listed').to.not.equal(undefined);
    expect(far).to.include({ expires_at: '9999-12-31T23:59:59.999Z', connection_limit: BOUNDS.connectionLimit.max, memory_limit_mb: BOUNDS.memoryLimitMb.min });
    expect(infinite).to.include({ expires_at: '9999-12-31T23:59:59.999Z', last_session_end: '9999-12-31T23:59:59.999Z', connection_limit: BOUNDS.connectionLimit.min });
    // Still there: an expiry clamped to 9999 is not due.
    const direct = new pg.Client(directConnection(rt, 'postgres'));
    await direct.connect();
    try {
      const { rows } = await direct.query("SELECT datname FROM pg_database WHERE datname IN ('tdb_tpl_b__far', 'tdb_tpl_b__infinite') ORDER BY 1");
      expect(rows.map((r: { datname: string }) => r.datname)).to.deep.equal(['tdb_tpl_b__far', 'tdb_tpl_b__infinite']);
    } finally {
      await direct.end();
    }
  });
});
