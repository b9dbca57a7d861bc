// The HTTP API end to end: a real runtime with the API on a random port, real HTTP (fetch), and
// node-postgres connecting to the URLs it hands out.

import { expect } from 'chai';
import pg from 'pg';
import { PATHS, pathFor } from '../../src/api/paths.js';
import { CONFIG_DEFAULTS } from '../../src/cli/config.js';
import { PINNED_STATUS_KEYS, keyPaths } from '../helpers/status-keys.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-0123456789abcdef';


interface Answer {
  status: number;
  body: Record<string, unknown>;
  text: string;
}

describe('api: HTTP control API', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let base: string;

  async function call(method: string, path: string, opts: { body?: unknown; raw?: string; token?: string | null; key?: string } = {}): Promise<Answer> {
    const headers: Record<string, string> = {};
    const token = opts.token === undefined ? TOKEN : opts.token;
    if (token !== null) headers.authorization = `Bearer ${token}`;
    if (opts.key) headers['idempotency-key'] = opts.key;
    let body: string | undefined = opts.raw;
    if (opts.body !== undefined) body = JSON.stringify(opts.body);
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`${base}${path}`, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    let parsed: Record<string, unknown> = {};
    if ((res.headers.get('content-type') ?? '').startsWith('application/json') && text.length > 0) parsed = JSON.parse(text) as Record<string, unknown>;
    return { status: res.status, body: parsed, text };
  }

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 1 });
    expect(rt.runtime.api?.port).to.be.a('number').and.greaterThan(0);
    base = `http://127.0.0.1:${rt.runtime.api!.port}`;
    const admin = new pg.Client(rt.connection('postgres'));
    await admin.connect();
    await admin.query('CREATE DATABASE tpl_app');
    await admin.end();
    const tpl = new pg.Client(rt.connection('tpl_app'));
    await tpl.connect();
    await tpl.query("CREATE TABLE items (id int PRIMARY KEY, label text); INSERT INTO items VALUES (1, 'one'), (2, 'two')");
    await tpl.end();
  });

  after(async function () {
    await rt?.stop();
  });

  it('answers /healthz and /readyz without a token', async function () {
    const health = await call('GET', PATHS.healthz, { token: null });
    expect(health.status).to.equal(200);
    const ready = await call('GET', PATHS.readyz, { token: null });
    expect(ready.status).to.equal(200);
    expect(ready.body).to.deep.equal({ ready: true, postgres: true, engine: true });
  });

  it('requires the bearer token elsewhere (401 without it or with a wrong one)', async function () {
    for (const token of [null, 'wrong-token-0123456789abcdef']) {
      const res = await call('GET', PATHS.status, { token });
      expect(res.status).to.equal(401);
      expect(res.body).to.include({ code: 'INVALID_AUTHORIZATION', sqlstate: '28000' });
      expect(res.text).to.not.include(TOKEN);
    }
    expect((await call('GET', PATHS.metrics, { token: null })).status).to.equal(401);
  });

  it('seals and lists templates', async function () {
    const sealed = await call('POST', pathFor(PATHS.templateSeal, { name: 'tpl_app' }));
    expect(sealed.status).to.equal(200);
    expect(sealed.body).to.include({ name: 'tpl_app', sealed: true });
    const list = await call('GET', PATHS.templates);
    expect((list.body.items as { name: string }[]).map((t) => t.name)).to.include('tpl_app');
  });

  it('creates a database from the template; its URL connects and shows the template rows', async function () {
    const res = await call('POST', PATHS.databases, { body: { template: 'tpl_app' } });
    expect(res.status).to.equal(201);
    // The database as GET answers it, and how it was made.
    expect(Object.keys(res.body).sort()).to.deep.equal([
      'connection_limit', 'created_at', 'expires_at', 'in_use', 'last_session_end', 'memory_limit_mb', 'mint_ms', 'name', 'owner', 'pinned', 'source', 'template', 'url',
    ]);
    expect(res.body.name).to.match(/^tdb_tpl_app__[0-9a-f]+$/);
    expect(res.body.source).to.be.oneOf(['warm', 'cold']);
    const { rows } = await queryOnce(res.body.url as string, 'SELECT id, label FROM items ORDER BY id');
    expect(rows).to.deep.equal([
      { id: 1, label: 'one' },
      { id: 2, label: 'two' },
    ]);
    const got = await call('GET', pathFor(PATHS.database, { name: res.body.name as string }));
    expect(got.status).to.equal(200);
    expect(got.body).to.include({ name: res.body.name, template: 'tpl_app', owner: 'postgres', pinned: false });
    const list = await call('GET', PATHS.databases);
    expect((list.body.items as { name: string }[]).map((d) => d.name)).to.include(res.body.name);
  });

  it('creates with a given name, TTL and pin; a second create of the name is 409 (42P04)', async function () {
    const body = { template: 'tpl_app', name: 'tdb_tpl_app__named', ttl_seconds: 600, pinned: true };
    const res = await call('POST', PATHS.databases, { body });
    expect(res.status).to.equal(201);
    expect(res.body.name).to.equal('tdb_tpl_app__named');
    expect(res.body.pinned).to.equal(true);
    expect(res.body.expires_at).to.be.a('string');
    const got = await call('GET', pathFor(PATHS.database, { name: 'tdb_tpl_app__named' }));
    expect(got.body.pinned).to.equal(true);
    expect(got.body.expires_at).to.be.a('string');
    const again = await call('POST', PATHS.databases, { body });
    expect(again.status).to.equal(409);
    expect(again.body.sqlstate).to.equal('42P04');
  });

  it('replays a create with the same request id and body; another body is 409', async function () {
    const first = await call('POST', PATHS.databases, { body: { template: 'tpl_app' }, key: 'req-1' });
    expect(first.status).to.equal(201);
    const second = await call('POST', PATHS.databases, { body: { template: 'tpl_app' }, key: 'req-1' });
    expect(second.status).to.equal(201);
    expect(second.body).to.deep.equal(first.body);
    const other = await call('POST', PATHS.databases, { body: { template: 'tpl_app', pinned: true }, key: 'req-1' });
    expect(other.status).to.equal(409);
    expect(other.body.message).to.match(/req-1/);
    // request_id in the body is the same id.
    const viaBody = await call('POST', PATHS.databases, { body: { template: 'tpl_app', request_id: 'req-2' } });
    const viaBody2 = await call('POST', PATHS.databases, { body: { template: 'tpl_app', request_id: 'req-2' } });
    expect(viaBody2.body).to.deep.equal(viaBody.body);
  });

  it('refuses bad bodies with 400, naming the field', async function () {
    const cases: [unknown, string, RegExp][] = [
      [{}, '22023', /template/],
      [{ template: 42 }, '22023', /template/],
      [{ template: 'tpl_app', ttl_seconds: -1 }, '22023', /ttl_seconds/],
      [{ template: 'tpl_app', pinned: 'yes' }, '22023', /pinned/],
      [{ template: 'tpl_app', colour: 'red' }, '22023', /colour/],
      [{ template: 'tpl_app', name: 'Bad-Name' }, '22023', /name/],
      [{ template: 'tpl_app', name: 'tdb_other__x' }, '22023', /name/],
    ];
    for (const [body, sqlstate, field] of cases) {
      const res = await call('POST', PATHS.databases, { body });
      expect(res.status, JSON.stringify(body)).to.equal(400);
      expect(res.body.sqlstate, JSON.stringify(body)).to.equal(sqlstate);
      expect(res.body.message, JSON.stringify(body)).to.match(field);
      expect(res.body).to.have.all.keys('code', 'sqlstate', 'message', 'hint');
    }
    const notJson = await call('POST', PATHS.databases, { raw: '{"template":' });
    expect(notJson.status).to.equal(400);
    expect(notJson.body.sqlstate).to.equal('08P01');
    const ttl = await call('PUT', pathFor(PATHS.databaseTtl, { name: 'tdb_tpl_app__named' }), { body: { ttl: 5 } });
    expect(ttl.status).to.equal(400);
    expect(ttl.body.message).to.match(/ttl_seconds/);
  });

  it('answers an unknown template with 404 and 3D000 (UNKNOWN_TEMPLATE: not a database that is missing)', async function () {
    const res = await call('POST', PATHS.databases, { body: { template: 'no_such_tpl' } });
    expect(res.status).to.equal(404);
    expect(res.body).to.include({ code: 'UNKNOWN_TEMPLATE', sqlstate: '3D000', message: 'there is no template "no_such_tpl"' });
    const missing = await call('GET', pathFor(PATHS.database, { name: 'tdb_tpl_app__nothere' }));
    expect(missing.status).to.equal(404);
  });

  it('pins, unpins and sets the TTL of a database', async function () {
    const { body } = await call('POST', PATHS.databases, { body: { template: 'tpl_app' } });
    const path = (p: typeof PATHS.databasePin | typeof PATHS.databaseUnpin | typeof PATHS.databaseTtl): string => pathFor(p, { name: body.name as string });
    expect((await call('POST', path(PATHS.databasePin))).body.pinned).to.equal(true);
    expect(rt.runtime.databases.database(body.name as string)?.pinned).to.equal(true);
    expect((await call('POST', path(PATHS.databaseUnpin))).body.pinned).to.equal(false);
    expect(rt.runtime.databases.database(body.name as string)?.pinned).to.equal(false);
    const ttl = await call('PUT', path(PATHS.databaseTtl), { body: { ttl_seconds: 3600 } });
    expect(ttl.status).to.equal(200);
    expect(ttl.body.expires_at).to.be.a('string');
    expect(rt.runtime.databases.database(body.name as string)?.expiresAt).to.be.a('number');
    const cleared = await call('PUT', path(PATHS.databaseTtl), { body: { ttl_seconds: null } });
    expect(cleared.body.expires_at).to.equal(null);
    expect(rt.runtime.databases.database(body.name as string)?.expiresAt).to.equal(null);
  });

  it('deletes idempotently: twice is 204 both times', async function () {
    const { body } = await call('POST', PATHS.databases, { body: { template: 'tpl_app' } });
    const path = pathFor(PATHS.database, { name: body.name as string });
    expect((await call('DELETE', path)).status).to.equal(204);
    expect((await call('DELETE', path)).status).to.equal(204);
    expect((await call('GET', path)).status).to.equal(404);
    expect(rt.runtime.databases.database(body.name as string)).to.equal(null);
  });

  it('serves the status document with pinned keys', async function () {
    const res = await call('GET', PATHS.status);
    expect(res.status).to.equal(200);
    expect(keyPaths(res.body).sort()).to.deep.equal([...PINNED_STATUS_KEYS].sort());
  });

  it('exposes the metrics', async function () {
    const res = await call('GET', PATHS.metrics);
    expect(res.status).to.equal(200);
    for (const name of [
      'pgx_sessions',
      'pgx_databases{kind="ephemeral"}',
      'pgx_databases{kind="trash"}',
      'pgx_pool_ready{template="tpl_app"}',
      'pgx_pool_size{template="tpl_app"}',
      // The bounds of the target: --pool-size 1 here, --pool-max its default.
      'pgx_pool_size_min 1\n',
      `pgx_pool_size_max ${CONFIG_DEFAULTS.poolMax}\n`,
      'pgx_mints_total{source="cold"}',
      'pgx_mints_total{source="warm"}',
      'pgx_mint_failures_total',
      'pgx_mint_latency_ms{stat="p99"}',
      'pgx_janitor_drops_total',
      'pgx_engine_clients',
      'pgx_engine_backends{state="total"}',
      'pgx_api_requests_total',
      'pgx_memory_pss_mb',
      'pgx_memory_rss_mb',
      'pgx_mint_duration_seconds_bucket{le="0.005",source="warm"}',
      'pgx_disk_free_mb',
      'pgx_disk_total_mb',
      'pgx_disk_min_free_mb',
      'pgx_disk_state{state="ok"} 1',
      'pgx_disk_reserve_mb',
    ]) {
      expect(res.text, name).to.include(name);
    }
    // pgx_pool_size is the target now, which bursts move: its help says so, not "(setting)".
    expect(/^# HELP pgx_pool_size (.*)$/m.exec(res.text)?.[1]).to.include('Warm spares wanted now').and.not.include('(setting)');
    // A fresh data directory: the histogram has seen every mint the counters count.
    const value = (series: string): number => Number(new RegExp(`^${series.replace(/[{}]/g, '\\$&')} (\\S+)$`, 'm').exec(res.text)?.[1]);
    // Both sources are there from the start (cold at 0 if every mint so far found a spare).
    for (const source of ['warm', 'cold']) {
      const minted = value(`pgx_mints_total{source="${source}"}`);
      expect(minted, source).to.be.at.least(source === 'warm' ? 1 : 0);
      expect(value(`pgx_mint_duration_seconds_count{source="${source}"}`), source).to.equal(minted);
    }
  });

  it('answers unknown paths with 404 and wrong methods with 405, as JSON errors', async function () {
    expect((await call('GET', '/v1/nothing')).status).to.equal(404);
    const wrong = await call('PATCH', PATHS.databases);
    expect(wrong.status).to.equal(405);
    expect(wrong.body).to.have.all.keys('code', 'sqlstate', 'message', 'hint');
  });

  it('unseals a template', async function () {
    const res = await call('POST', pathFor(PATHS.templateUnseal, { name: 'tpl_app' }));
    expect(res.status).to.equal(200);
    expect(res.body.sealed).to.equal(false);
    const create = await call('POST', PATHS.databases, { body: { template: 'tpl_app' } });
    expect(create.status).to.equal(404);
  });
});

describe('api: exposure', function () {
  this.timeout(60_000);

  it('refuses to listen on a non-loopback host without a token', async function () {
    let err: unknown;
    try {
      const rt = await startTestRuntime({ apiPort: 0, apiHost: '0.0.0.0' });
      await rt.stop();
    } catch (e) {
      err = e;
    }
    expect(err).to.be.instanceOf(Error);
    expect((err as Error).message).to.match(/without a token/);
  });

  it('runs without a token on loopback', async function () {
    const rt = await startTestRuntime({ apiPort: 0 });
    try {
      const res = await fetch(`http://127.0.0.1:${rt.runtime.api!.port}${PATHS.status}`);
      expect(res.status).to.equal(200);
    } finally {
      await rt.stop();
    }
  });
});
