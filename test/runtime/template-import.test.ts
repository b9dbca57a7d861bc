// Templates from a real source database: Debian's PostgreSQL 15 server holds "production" data with
// personal details; the runtime dumps it with its own pg_dump, restores it, masks it, checks the
// masking rules, seals it. Through the HTTP API (a job with progress) and the CLI.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { PassThrough } from 'node:stream';
import { ApiClient, ApiClientError } from '../../src/api/client.js';
import type { ImportJobBody } from '../../src/api/contract.js';
import { createLogger } from '../../src/log.js';
import { runCommand, waitFor } from '../helpers/commands.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { sourceUnavailable, startSourcePostgres, type SourcePostgres } from '../helpers/source-postgres.js';

const TOKEN = 'test-token-import-0123456789abcdef';
const SOURCE_PASSWORD = 'src-Pa55word-never-logged';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');

const SOURCE_SQL = `
CREATE TABLE users (id int PRIMARY KEY, email text NOT NULL UNIQUE, name text, phone text, notes text);
CREATE TABLE orders (id serial PRIMARY KEY, user_id int REFERENCES users, total numeric(10,2), placed_at timestamptz DEFAULT now());
CREATE INDEX orders_user ON orders (user_id);
CREATE VIEW big_spenders AS SELECT user_id, sum(total) AS spent FROM orders GROUP BY user_id HAVING sum(total) > 100;
INSERT INTO users SELECT g, 'person' || g || '@gmail.com', 'Person ' || g, '555-' || lpad(g::text, 4, '0'), 'lives at ' || g || ' Main St'
  FROM generate_series(1, 2000) g;
INSERT INTO orders (user_id, total) SELECT 1 + g % 2000, (g % 97) * 1.5 FROM generate_series(1, 10000) g;
`;

const MASK = `
-- pgx:forbid users.email ~ '@(?!example\\.invalid$)'
-- pgx:forbid *.* ~ '[0-9]{3}-[0-9]{4}'
UPDATE users SET email = 'user' || id || '@example.invalid', name = 'User ' || id, phone = NULL, notes = NULL;
`;

describe('runtime: templates imported from a source database', function () {
  this.timeout(120_000);
  let source: SourcePostgres;
  let rt: TestRuntime;
  let api: ApiClient;
  /** The runtime's log, as written. */
  const logged: string[] = [];

  async function finished(job: ImportJobBody, seen: string[] = []): Promise<ImportJobBody> {
    return api.waitForImport(job.id, (j) => seen.push(j.phase), 100);
  }

  before(async function () {
    const why = sourceUnavailable();
    if (why !== null) {
      // Pending, never a pass: CI installs postgresql-15.
      console.log(`    (${why})`);
      this.skip();
    }
    source = await startSourcePostgres(SOURCE_PASSWORD);
    await waitFor('the source to answer', () => queryOnce(source.url('postgres'), 'SELECT 1').then(() => true, () => false), 30_000);
    await queryOnce(source.url('postgres'), 'CREATE DATABASE shop');
    await queryOnce(source.url('shop'), SOURCE_SQL);
    const stream = new PassThrough();
    stream.on('data', (chunk: Buffer) => logged.push(chunk.toString('utf8')));
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0 }, createLogger({ format: 'json', level: 'info', stream }));
    api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
  });

  after(async function () {
    await rt?.stop();
    await source?.stop();
  });

  it('dumps, restores, masks, checks and seals; the minted copy has the data, masked', async function () {
    const started = await api.importTemplate({ name: 'tpl_shop', source_url: source.url('shop'), mask: MASK });
    expect(started.source).to.not.include(SOURCE_PASSWORD);
    const phases: string[] = [];
    const job = await finished(started, phases);
    expect(job.error, JSON.stringify(job.error)).to.equal(null);
    expect(job.phase).to.equal('done');
    expect(job.tables_total).to.equal(2);
    expect(job.tables_done).to.equal(2);
    expect(job.bytes).to.be.greaterThan(10_000);
    expect(job.result).to.include({ name: 'tpl_shop', sealed: true });
    // Phases only move forward.
    const order = ['queued', 'dumping', 'restoring', 'masking', 'checking', 'sealing', 'done'];
    const indexes = phases.map((p) => order.indexOf(p));
    expect(indexes).to.deep.equal([...indexes].sort((a, b) => a - b));

    const db = 'tdb_tpl_shop__t1';
    const { rows } = await queryOnce(rt.connection(db), `SELECT (SELECT count(*)::int FROM users) AS users, (SELECT count(*)::int FROM orders) AS orders,
      (SELECT count(*)::int FROM users WHERE email NOT LIKE '%@example.invalid' OR phone IS NOT NULL OR notes IS NOT NULL) AS unmasked,
      (SELECT count(*)::int FROM big_spenders) > 0 AS view_works`);
    expect(rows).to.deep.equal([{ users: 2000, orders: 10000, unmasked: 0, view_works: true }]);
    // Indexes and constraints came along.
    const idx = await queryOnce(rt.connection(db), "SELECT indexname FROM pg_indexes WHERE tablename = 'orders' ORDER BY 1");
    expect(idx.rows.map((r: { indexname: string }) => r.indexname)).to.deep.equal(['orders_pkey', 'orders_user']);
    const fk = await queryOnce(rt.connection(db), 'INSERT INTO orders (user_id, total) VALUES (999999, 1)').catch((e: { code?: string }) => e);
    expect((fk as { code?: string }).code).to.equal('23503');
  });

  it('a mask that misses data fails the import with 23514 naming the columns, and leaves nothing', async function () {
    const weak = `-- pgx:forbid users.email ~ '@(?!example\\.invalid$)'\n-- pgx:forbid *.* ~ '[0-9]{3}-[0-9]{4}'\nUPDATE users SET email = 'user' || id || '@example.invalid';`;
    const before = (await queryOnce(rt.connection('postgres'), 'SELECT count(*)::int AS n FROM pg_database')).rows[0];
    const job = await finished(await api.importTemplate({ name: 'tpl_leaky', source_url: source.url('shop'), mask: weak }));
    expect(job.phase).to.equal('failed');
    expect(job.error).to.include({ sqlstate: '23514' });
    expect(job.error!.message).to.equal('masking left data that a rule forbids: public.users.phone (2000 rows)');
    expect((await api.listTemplates()).map((t) => t.name)).to.not.include('tpl_leaky');
    await waitFor('the scratch database to go', async () => (await queryOnce(rt.connection('postgres'), 'SELECT count(*)::int AS n FROM pg_database')).rows[0].n === before.n);
  });

  it('a wrong password fails with pg_dump\'s reason and never shows the password', async function () {
    const wrong = source.url('shop', 'postgres', 'not-the-password');
    const job = await finished(await api.importTemplate({ name: 'tpl_nope', source_url: wrong }));
    expect(job.phase).to.equal('failed');
    expect(job.error!.message).to.match(/^pg_dump of postgresql:\/\/postgres@127\.0\.0\.1:\d+\/shop failed: .*password authentication failed/);
    expect(JSON.stringify(job)).to.not.include('not-the-password');
  });

  it('a password given as ?password=: pg_dump gets it in PGPASSWORD; the job, its log lines and its error show ***', async function () {
    const url = `postgresql://postgres@127.0.0.1:${source.port}/shop?password=${SOURCE_PASSWORD}&connect_timeout=10`;
    const started = await api.importTemplate({ name: 'tpl_query_pw', source_url: url });
    expect(started.source).to.equal(`postgresql://postgres@127.0.0.1:${source.port}/shop?password=***&connect_timeout=10`);
    const job = await finished(started);
    expect(job.error, JSON.stringify(job.error)).to.equal(null);
    expect(job.tables_total).to.equal(2);
    // The review's case: a source that is not there, so that pg_dump's failure is quoted too.
    const gone = await api.importTemplate({ name: 'tpl_imp', source_url: 'postgresql://someuser@127.0.0.1:1/srcdb?password=TopSecretPw123' });
    expect(gone.source).to.equal('postgresql://someuser@127.0.0.1:1/srcdb?password=***');
    const failed = await finished(gone);
    expect(failed.error!.message).to.match(/^pg_dump of postgresql:\/\/someuser@127\.0\.0\.1:1\/srcdb\?password=\*\*\* failed: .*Connection refused/);
    const lines = logged.join('').split('\n').filter((l) => l.includes(`"import":"${gone.id}"`));
    expect(lines.map((l) => (JSON.parse(l) as { message: string }).message)).to.include.members(['import-started', 'import-failed']);
    expect(JSON.stringify(failed) + logged.join('')).to.not.include('TopSecretPw123').and.to.not.include(SOURCE_PASSWORD);
  });

  it('a source that cannot be reached fails fast with the reason', async function () {
    const job = await finished(await api.importTemplate({ name: 'tpl_gone', source_url: 'postgresql://postgres:pw@127.0.0.1:1/shop' }));
    expect(job.phase).to.equal('failed');
    expect(job.error!.message).to.match(/^pg_dump of postgresql:\/\/postgres@127\.0\.0\.1:1\/shop failed: .*Connection refused/);
    expect(job.error!.hint).to.include('Check the source URL');
  });

  it('refuses bad requests before starting a job', async function () {
    const cases: [Parameters<ApiClient['importTemplate']>[0], RegExp][] = [
      [{ name: 'tpl_x', source_url: 'not a url' }, /not a URL/],
      [{ name: 'tpl_x', source_url: 'mysql://h/db' }, /scheme is mysql:/],
      // libpq takes it only from the URL, which would be on pg_dump's command line.
      [{ name: 'tpl_x', source_url: 'postgresql://u@h/db?sslpassword=KeyPhrase-123' }, /^the source: sslpassword in the URL would reach pg_dump's command line/],
      [{ name: 'tpl_x', source_url: source.url('shop'), mask: "-- pgx:forbid users.email matches 'x'" }, /line 1: not a rule/],
    ];
    for (const [body, message] of cases) {
      const err = await api.importTemplate(body).catch((e: unknown) => e as ApiClientError);
      expect(err, body.source_url).to.be.instanceOf(ApiClientError);
      expect((err as ApiClientError).status).to.equal(400);
      expect((err as ApiClientError).message).to.match(message);
      expect(JSON.stringify(err)).to.not.include('KeyPhrase-123');
    }
    const missing = await api.importJob('0000000000000000').catch((e: unknown) => e as ApiClientError);
    expect((missing as ApiClientError).status).to.equal(404);
  });

  it('pgx template import: progress on standard error, the result on standard output', async function () {
    const maskFile = path.join(rt.dataDir, '..', 'mask.sql');
    fs.writeFileSync(maskFile, MASK);
    const env = { ...process.env, PGX_URL: `http://127.0.0.1:${rt.runtime.api!.port}`, PGX_API_TOKEN: TOKEN };
    const r = await runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), 'template', 'import', 'tpl_cli', '--from', source.url('shop'), '--mask', maskFile], { cwd: root, env, timeoutMs: 90_000 });
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout).to.match(/^imported template tpl_cli from postgresql:\/\/postgres@127\.0\.0\.1:\d+\/shop and sealed it\n$/);
    // One line per change seen while polling: which phases show depends on their speed, not the form.
    const lines = r.stderr.trim().split('\n');
    expect(lines.length).to.be.at.least(1);
    for (const line of lines) expect(line).to.match(/^(queued|dumping postgresql:\/\/\S+: [\d.]+ MB|restoring: \d+\/\d+ tables \([\d.]+ MB dump\)|masking|checking|sealing|done)$/);
    expect(r.stderr + r.stdout).to.not.include(SOURCE_PASSWORD);
    const { rows } = await queryOnce(rt.connection('tdb_tpl_cli__1'), 'SELECT count(*)::int AS n FROM users');
    expect(rows).to.deep.equal([{ n: 2000 }]);
  });
});
