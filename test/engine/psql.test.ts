// psql (the real PostgreSQL 15 client from Debian) through the engine, against a real PostgreSQL 18:
// simple and multi-statement queries, \copy of a million rows both ways, errors and notices with their
// SQLSTATE and detail, and scripts whose output must be byte-identical to psql's output when it talks
// to PostgreSQL directly on its private socket.

import { expect } from 'chai';
import { spawn } from 'node:child_process';
import fs from 'node:fs';
import path from 'node:path';
import { directEnv, runCommand, waitFor, type CommandResult } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

/** psql without ~/.psqlrc, stopping nothing on error unless the script says so. */
const PSQL_BASE = ['-X', '--no-password'];

describe('engine: psql through the engine', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let work: string;

  before(async function () {
    rt = await startTestRuntime();
    work = scratchDir('pgx-psql-');
  });

  after(async function () {
    await rt?.stop();
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  const psql = (args: string[], env?: NodeJS.ProcessEnv): Promise<CommandResult> =>
    runCommand('psql', [...PSQL_BASE, ...args], { env: env ?? rt.env(), timeoutMs: 50_000 });

  /** Runs psql, expecting success, and returns stdout. */
  async function psqlOk(args: string[], env?: NodeJS.ProcessEnv): Promise<string> {
    const r = await psql(args, env);
    expect(r.code, `psql ${args.join(' ')} failed:\n${r.stderr}`).to.equal(0);
    return r.stdout;
  }

  /** Runs the same script through the engine and directly; returns both results. */
  async function bothWays(name: string, script: string, extra: string[] = []): Promise<{ engine: CommandResult; direct: CommandResult }> {
    const file = path.join(work, `${name}.sql`);
    fs.writeFileSync(file, script);
    // Run from the work directory so psql names the script the same way ("psql:name.sql:3: ERROR").
    const run = (env: NodeJS.ProcessEnv): Promise<CommandResult> =>
      runCommand('psql', [...PSQL_BASE, ...extra, '-f', `${name}.sql`], { env, cwd: work, timeoutMs: 50_000 });
    const engine = await run(rt.env());
    const direct = await run(directEnv(rt));
    return { engine, direct };
  }

  function expectIdentical(r: { engine: CommandResult; direct: CommandResult }): void {
    expect(r.engine.stdout, 'stdout through the engine vs direct').to.equal(r.direct.stdout);
    expect(r.engine.stderr, 'stderr through the engine vs direct').to.equal(r.direct.stderr);
    expect(r.engine.code, 'exit code through the engine vs direct').to.equal(r.direct.code);
  }

  it('answers a simple query over TCP', async function () {
    expect(await psqlOk(['-At', '-c', 'SELECT 1 + 1'])).to.equal('2\n');
    expect(await psqlOk(['-At', '-c', "SELECT current_database(), current_user, 'héllo ☃'"])).to.equal('postgres|postgres|héllo ☃\n');
  });

  it("answers over the engine's Unix socket", async function () {
    const env = { ...rt.env(), PGHOST: rt.socketDir, PGPORT: String(rt.port) };
    expect(await psqlOk(['-At', '-c', 'SELECT 40 + 2'], env)).to.equal('42\n');
  });

  it('prints every result of a multi-statement query string', async function () {
    expect(await psqlOk(['-At', '-c', 'SELECT 1; SELECT 2'])).to.equal('1\n2\n');
    const engine = await psqlOk(['-c', "SELECT 1 AS a; SELECT 'two' AS b, 3 AS c; VALUES (4), (5)"]);
    const direct = await psqlOk(['-c', "SELECT 1 AS a; SELECT 'two' AS b, 3 AS c; VALUES (4), (5)"], directEnv(rt));
    expect(engine).to.equal(direct);
    expect(engine).to.contain(' a \n---\n 1\n(1 row)');
    expect(engine).to.contain(' two | 3\n(1 row)');
    expect(engine).to.contain('(2 rows)');
  });

  it('\\copy moves 1,000,000 rows out and back in, intact', async function () {
    const file = path.join(work, 'million.tsv');
    await psqlOk([
      '-q',
      '-c', 'DROP TABLE IF EXISTS copy_src, copy_dst',
      '-c', "CREATE TABLE copy_src AS SELECT g AS id, 'row ' || g || repeat('x', g % 17) AS txt FROM generate_series(1, 1000000) g",
      '-c', 'CREATE TABLE copy_dst (id int, txt text)',
    ]);
    const out = await psqlOk(['-c', `\\copy copy_src TO '${file}'`]);
    expect(out.trim()).to.equal('COPY 1000000');
    const lines = fs.readFileSync(file, 'utf8').split('\n');
    expect(lines.length).to.equal(1_000_001); // a trailing newline after the last row
    const back = await psqlOk(['-c', `\\copy copy_dst FROM '${file}'`]);
    expect(back.trim()).to.equal('COPY 1000000');

    const summary = (table: string): string =>
      `SELECT count(*), sum(id), md5(string_agg(id || ':' || txt, ',' ORDER BY id) FILTER (WHERE id % 997 = 0)) FROM ${table}`;
    const src = await psqlOk(['-At', '-c', summary('copy_src')]);
    const dst = await psqlOk(['-At', '-c', summary('copy_dst')]);
    expect(src.split('|')[0]).to.equal('1000000');
    expect(src.split('|')[1]).to.equal('500000500000');
    expect(dst).to.equal(src);
    // And every row, not just a sample: an order-independent checksum over all of them.
    const all = (table: string): string => `SELECT sum(hashtext(id || ':' || txt)::bigint) FROM ${table}`;
    expect(await psqlOk(['-At', '-c', all('copy_dst')])).to.equal(await psqlOk(['-At', '-c', all('copy_src')]));
    await psqlOk(['-q', '-c', 'DROP TABLE copy_src, copy_dst']);
  });

  it('\\copy from stdin and to stdout inside a script', async function () {
    const script = [
      'CREATE TEMP TABLE inline (id int, t text);',
      'COPY inline FROM stdin;',
      '1\tone',
      '2\ttwo\\twith tab',
      '3\t\\N',
      '\\.',
      "\\copy (SELECT id, coalesce(t, 'NULL') FROM inline ORDER BY id) TO stdout WITH (FORMAT csv)",
      '',
    ].join('\n');
    const res = await runCommand('psql', [...PSQL_BASE, '-q', '-v', 'ON_ERROR_STOP=1'], { env: rt.env(), input: script });
    expect(res.code, res.stderr).to.equal(0);
    expect(res.stdout).to.equal('1,one\n2,two\twith tab\n3,NULL\n');
  });

  it('shows errors and notices with SQLSTATE, detail and hint, exactly as PostgreSQL does', async function () {
    const script = String.raw`\set VERBOSITY verbose
DROP TABLE IF EXISTS psql_errs;
CREATE TABLE psql_errs (id integer PRIMARY KEY, v text NOT NULL);
INSERT INTO psql_errs VALUES (1, 'a');
INSERT INTO psql_errs VALUES (1, 'b');
INSERT INTO psql_errs VALUES (2, NULL);
DO $$ BEGIN RAISE NOTICE 'hello %', 42 USING DETAIL = 'a detail', HINT = 'a hint'; END $$;
DO $$ BEGIN RAISE WARNING 'careful' USING ERRCODE = '01000'; END $$;
DO $$ BEGIN RAISE EXCEPTION 'custom failure' USING ERRCODE = 'P0099', DETAIL = 'why', HINT = 'what to do'; END $$;
SELECT 1 / 0;
SELECT nosuchcolumn FROM psql_errs;
SELECT * FROM no_such_table;
\echo :LAST_ERROR_SQLSTATE :LAST_ERROR_MESSAGE
\set VERBOSITY default
INSERT INTO psql_errs VALUES (1, 'c');
\errverbose
\set VERBOSITY terse
SELECT 1 / 0;
SELECT * FROM psql_errs ORDER BY id;
DROP TABLE psql_errs;
`;
    const r = await bothWays('errors', script);
    expectIdentical(r);
    const err = r.engine.stderr;
    expect(err).to.contain('ERROR:  23505: duplicate key value violates unique constraint "psql_errs_pkey"');
    expect(err).to.contain('DETAIL:  Key (id)=(1) already exists.');
    expect(err).to.contain('ERROR:  23502: null value in column "v" of relation "psql_errs" violates not-null constraint');
    expect(err).to.contain('NOTICE:  00000: hello 42\nDETAIL:  a detail\nHINT:  a hint');
    expect(err).to.contain('WARNING:  01000: careful');
    expect(err).to.contain('ERROR:  P0099: custom failure\nDETAIL:  why\nHINT:  what to do');
    expect(err).to.contain('ERROR:  22012: division by zero');
    expect(err).to.contain('ERROR:  42703: column "nosuchcolumn" does not exist');
    expect(err).to.contain('ERROR:  42P01: relation "no_such_table" does not exist');
    expect(err).to.match(/LOCATION: {2}\w+, \w+\.c:\d+/);
    expect(r.engine.stdout).to.contain('42P01 relation "no_such_table" does not exist');
    // Errors reach psql as errors: with ON_ERROR_STOP the engine's psql stops and exits 3 like direct.
    const stop = await bothWays('stop', 'SELECT 1;\nSELECT 1 / 0;\nSELECT 2;\n', ['-v', 'ON_ERROR_STOP=1']);
    expectIdentical(stop);
    expect(stop.engine.code).to.equal(3);
    expect(stop.engine.stdout).not.to.contain('2\n(1 row)');
  });

  it('reports errors the same way when PGOPTIONS asks for verbose context', async function () {
    const env = (base: NodeJS.ProcessEnv): NodeJS.ProcessEnv => ({ ...base, PGOPTIONS: '-c client_min_messages=debug1' });
    const file = path.join(work, 'pgoptions.sql');
    fs.writeFileSync(file, "SHOW client_min_messages;\nDO $$ BEGIN RAISE DEBUG 'debug line'; RAISE NOTICE 'n'; END $$;\nSELECT 1 / 0;\n");
    const args = [...PSQL_BASE, '-v', 'VERBOSITY=verbose', '-f', 'pgoptions.sql'];
    const engine = await runCommand('psql', args, { env: env(rt.env()), cwd: work });
    const direct = await runCommand('psql', args, { env: env(directEnv(rt)), cwd: work });
    expect(engine.stdout).to.equal(direct.stdout);
    expect(engine.stderr).to.equal(direct.stderr);
    expect(engine.stdout).to.contain(' debug1\n');
    expect(engine.stderr).to.contain('DEBUG:  00000: debug line');
    expect(engine.stderr).to.contain('ERROR:  22012: division by zero');
  });

  it('Ctrl-C cancels a running statement (psql sends a CancelRequest through the engine)', async function () {
    const started = performance.now();
    const child = spawn('psql', [...PSQL_BASE, '-c', 'SELECT pg_sleep(10) AS psql_cancel_me'], { env: rt.env(), stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    child.stderr.on('data', (b: Buffer) => (stderr += b.toString()));
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    try {
      await waitFor('the statement to run', async () => {
        const r = await runCommand('psql', [...PSQL_BASE, '-At', '-c', "SELECT count(*) FROM pg_stat_activity WHERE state = 'active' AND query LIKE '%AS psql_cancel_me'"], {
          env: directEnv(rt),
        });
        return r.stdout === '1\n';
      });
      child.kill('SIGINT');
      const code = await exited;
      expect(stderr).to.contain('ERROR:  canceling statement due to user request');
      expect(code).to.equal(1);
      expect(performance.now() - started, 'cancel took too long').to.be.below(8000);
    } finally {
      if (child.exitCode === null) child.kill('SIGKILL');
    }
  });

  it('runs the transactional example from the seed exactly as PostgreSQL does', async function () {
    const script = `\\pset null '(null)'
BEGIN;
CREATE TEMP TABLE pgx_test (id integer PRIMARY KEY, value text);
INSERT INTO pgx_test VALUES (1, 'PGX works');
SAVEPOINT before_update;
UPDATE pgx_test SET value = 'changed' WHERE id = 1;
ROLLBACK TO SAVEPOINT before_update;
SELECT value FROM pgx_test WHERE id = 1;
ROLLBACK;
SELECT to_regclass('pg_temp.pgx_test');
`;
    const r = await bothWays('seed', script);
    expectIdentical(r);
    expect(r.engine.code).to.equal(0);
    expect(r.engine.stderr).to.equal('');
    expect(r.engine.stdout).to.equal(
      [
        'Null display is "(null)".',
        'BEGIN',
        'CREATE TABLE',
        'INSERT 0 1',
        'SAVEPOINT',
        'UPDATE 1',
        'ROLLBACK',
        '   value   ',
        '-----------',
        ' PGX works',
        '(1 row)',
        '',
        'ROLLBACK',
        ' to_regclass ',
        '-------------',
        ' (null)',
        '(1 row)',
        '',
        '',
      ].join('\n'),
    );
  });

  it('gives byte-identical output to direct PostgreSQL for a mixed script', async function () {
    const script = String.raw`\set ON_ERROR_ROLLBACK on
DROP TABLE IF EXISTS mix_items, mix_tags;
CREATE TABLE mix_items (id serial PRIMARY KEY, name text NOT NULL, price numeric(10,2), tags text[], meta jsonb, made timestamptz DEFAULT '2024-01-02 03:04:05+00');
CREATE TABLE mix_tags (item int REFERENCES mix_items, tag text);
CREATE INDEX ON mix_items (name);
INSERT INTO mix_items (name, price, tags, meta) VALUES
  ('widget', 9.99, '{a,b}', '{"k": 1}'), ('gadget', NULL, '{}', '[1,2,{"x":null}]'), ('ünïcödé ☃', 0.5, NULL, 'null');
INSERT INTO mix_tags SELECT id, unnest(tags) FROM mix_items;
\d mix_items
\d+ mix_tags
\dt mix_*
\di mix_items*
SELECT * FROM mix_items ORDER BY id;
\x on
SELECT * FROM mix_items WHERE id = 1;
\x off
SELECT name, count(t.tag) FROM mix_items i LEFT JOIN mix_tags t ON t.item = i.id GROUP BY name ORDER BY name;
BEGIN;
INSERT INTO mix_items (name) VALUES ('in tx');
SELECT nope;
SELECT count(*) FROM mix_items;
COMMIT;
PREPARE mix_q(int) AS SELECT name FROM mix_items WHERE id = $1;
EXECUTE mix_q(2);
DEALLOCATE mix_q;
BEGIN;
DECLARE mix_c CURSOR FOR SELECT g FROM generate_series(1, 10) g;
FETCH 3 FROM mix_c;
MOVE 4 IN mix_c;
FETCH ALL FROM mix_c;
CLOSE mix_c;
COMMIT;
SELECT 'x' AS a, 1 AS b \gset mix_
\echo :mix_a :mix_b
SELECT format('SELECT %s AS n', g) FROM generate_series(1, 3) g \gexec
SELECT g, g * 2 AS twice, repeat('z', g) AS zs FROM generate_series(1, 2000) g WHERE g % 250 = 0;
SELECT md5(string_agg(g::text, ',')) FROM generate_series(1, 100000) g;
SELECT length(repeat('abcdefgh', 250000)) AS one_mb, md5(repeat('abcdefgh', 250000));
SELECT 1 AS x, 2 AS y \crosstabview
COPY (SELECT id, name FROM mix_items ORDER BY id) TO STDOUT WITH (FORMAT csv, HEADER);
SELECT pg_notify('nobody_listens', 'payload');
SHOW server_version_num;
SHOW TimeZone;
SET DateStyle = 'SQL, DMY';
SELECT made FROM mix_items WHERE id = 1;
RESET DateStyle;
VALUES (1::float8 / 3), ('NaN'), ('-Infinity');
SELECT E'\\x00ff'::bytea, '\x'::bytea, 'line1
line2' AS multiline;
DROP TABLE mix_tags, mix_items;
`;
    const r = await bothWays('mixed', script);
    expectIdentical(r);
    expect(r.engine.code).to.equal(0);
    expect(r.engine.stdout).to.contain('Table "public.mix_items"');
    expect(r.engine.stdout).to.contain(' widget');
    expect(r.engine.stdout).to.contain('x 1');
    expect(r.engine.stderr).to.contain('ERROR:  column "nope" does not exist');
  });
});
