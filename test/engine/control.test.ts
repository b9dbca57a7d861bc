// SQL control functions through the engine (src/engine/control.ts): recognition first, then psql,
// node-postgres, postgres.js, raw protocol pipelines and pgbench against a real PostgreSQL 18, with a
// test ControlFunctions port. What a client sees must be what it would see if the functions were real
// SQL functions returning text; for that, the same names exist as real functions in a database that
// is reached directly, and outputs are compared.

import { expect } from 'chai';
import fc from 'fast-check';
import pg from 'pg';
import net from 'node:net';
import fs from 'node:fs';
import { execFileSync } from 'node:child_process';
import { parse, serialize } from 'pg-protocol';
import type { BackendMessage } from 'pg-protocol/dist/messages.js';
import postgres from 'postgres';
import { PgxError } from '../../src/errors.js';
import { Engine } from '../../src/engine/listener.js';
import { mentionsControl, planQuery, raiseStatement, recognize } from '../../src/engine/control.js';
import { MAX_PARSED_TOKENS, parsedPlan, plainCall } from '../../src/engine/control-sql.js';
import { maskLiterals } from '../../src/engine/literals.js';
import type { Caller, ControlFunction, ControlFunctions } from '../../src/engine/ports.js';
import { directConnection, directEnv, runCommand, type CommandResult } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const STATUS = JSON.stringify({ databases: 3, templates: ['tpl'], note: "it's \\ fine ☃" });
const DENIED_HINT = 'Only the runtime owner may do this; connect as postgres.';

/** The port the engine calls: records calls, answers `<fn>:<args>`, and refuses the name "forbidden". */
class TestControl implements ControlFunctions {
  calls: { fn: ControlFunction; args: (string | null)[]; caller: Caller }[] = [];

  async call(fn: ControlFunction, args: (string | null)[], caller: Caller): Promise<string> {
    this.calls.push({ fn, args, caller });
    // Answer on a later turn, as the runtime does: the engine must hold the client meanwhile.
    await new Promise((resolve) => setTimeout(resolve, 2));
    if (args[0] === 'forbidden') {
      throw new PgxError('INSUFFICIENT_PRIVILEGE', `permission denied to ${fn} "forbidden"`, { hint: DENIED_HINT });
    }
    if (args[0] === 'slow') await new Promise((resolve) => setTimeout(resolve, 100));
    if (args[0] === 'weird') {
      throw new PgxError('INVALID_PARAMETER', "it's a \\ $pgx$ 'test' ☃", { detail: 'line\nbreak', hint: '$$' });
    }
    if (fn === 'runtime_status') return STATUS;
    return `${fn}:${args.map((a) => a ?? 'NULL').join(',')}`;
  }
}

// The same functions, as real PostgreSQL functions, for what a client would see from those.
const REAL_FUNCTIONS = `
CREATE FUNCTION pgx_runtime_status() RETURNS text LANGUAGE sql AS $f$ SELECT ${pgLiteral(STATUS)} $f$;
CREATE FUNCTION pgx_pin_database(name text) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
  IF name = 'forbidden' THEN
    RAISE EXCEPTION USING ERRCODE = '42501', MESSAGE = 'permission denied to pin_database "forbidden"', HINT = ${pgLiteral(DENIED_HINT)};
  END IF;
  RETURN 'pin_database:' || name;
END $f$;
CREATE FUNCTION pgrust_seal_template(name text) RETURNS text LANGUAGE sql AS $f$ SELECT 'seal_template:' || name $f$;
`;

function pgLiteral(s: string): string {
  return `'${s.replace(/'/g, "''")}'`;
}

describe('engine/control: recognising control calls', () => {
  const has = (s: string): boolean => {
    const b = Buffer.from(`xx${s}yy`);
    return mentionsControl(b, 2, b.length - 2);
  };

  it('prefilters on pgx_ or pgrust_ in any case, within the bounds given', () => {
    expect(has('SELECT pgx_runtime_status()')).to.equal(true);
    expect(has('select PGX_X')).to.equal(true);
    expect(has('select PgRuSt_seal')).to.equal(true);
    expect(has('pgx_')).to.equal(true);
    expect(has('SELECT 1')).to.equal(false);
    expect(has('SELECT pgx')).to.equal(false);
    expect(has('SELECT pg_x, rust_y, pgxx_z')).to.equal(false);
    // Bytes outside [start, end) do not count.
    const b = Buffer.from('pgx_ SELECT 1 pgrust_');
    expect(mentionsControl(b, 4, b.length - 1)).to.equal(false);
    expect(mentionsControl(b, 1, b.length)).to.equal(true);
  });

  it('takes exactly SELECT fn(args) [AS alias], any case, with an optional semicolon', () => {
    expect(recognize('SELECT pgx_runtime_status()', false)).to.deep.equal([{ fn: 'runtime_status', column: 'pgx_runtime_status', args: [] }]);
    expect(recognize("select PGX_Seal_Template('t') AS \"My\"\"Col\";", false)).to.deep.equal([
      { fn: 'seal_template', column: 'My"Col', args: [{ value: 't' }] },
    ]);
    expect(recognize("SELECT pgrust_pin_database('it''s') p", false)).to.deep.equal([
      { fn: 'pin_database', column: 'p', args: [{ value: "it's" }] },
    ]);
    expect(recognize("SELECT pgx_restore_database('db', NULL, true)", false)).to.deep.equal([
      { fn: 'restore_database', column: 'pgx_restore_database', args: [{ value: 'db' }, { value: null }, { value: 'true' }] },
    ]);
    expect(recognize('SELECT pgx_snapshot_database($2, $1)', true)).to.deep.equal([
      { fn: 'snapshot_database', column: 'pgx_snapshot_database', args: [{ param: 1 }, { param: 0 }] },
    ]);
    expect(recognize("SELECT pgx_seal_template('a'); SELECT pgx_unseal_template('b')", false)?.map((c) => c.fn)).to.deep.equal([
      'seal_template',
      'unseal_template',
    ]);
  });

  it('reads dollar-quoted and escape-string arguments as PostgreSQL does', () => {
    const one = (sql: string, allowParams = false): unknown => recognize(sql, allowParams)?.map((c) => c.args);
    expect(one('SELECT pgx_pin_database($$db$$)')).to.deep.equal([[{ value: 'db' }]]);
    expect(one("SELECT pgx_pin_database($tag$it's $$ ☃$tag$)")).to.deep.equal([[{ value: "it's $$ ☃" }]]);
    expect(one("SELECT pgx_pin_database(E'it\\'s')")).to.deep.equal([[{ value: "it's" }]]);
    expect(one("SELECT pgx_pin_database(e'a''b\\n\\t\\x41\\101\\u2603\\\\\\q')")).to.deep.equal([[{ value: "a'b\n\tAA☃\\q" }]]);
    expect(one("SELECT pgx_pin_database(E'\\303\\251')")).to.deep.equal([[{ value: 'é' }]]);
    expect(one("SELECT pgx_snapshot_database($$db$$, $1, E'true')", true)).to.deep.equal([[{ value: 'db' }, { param: 0 }, { value: 'true' }]]);
    // Quotes, comments and identifiers hide what looks like a literal; locations stay the original's.
    expect(one("-- $$ E'\nSELECT pgx_pin_database(/* $x$ */ $$a$$) AS \"E'x\"")).to.deep.equal([[{ value: 'a' }]]);
    expect(planQuery("SELECT $$x$$, E'y'; SELECT pgx_seal_template($$a$$); SELECT 2", false)).to.deep.include({ before: "SELECT $$x$$, E'y'; " });
    // PostgreSQL would refuse these literals itself: they stay unread, and PostgreSQL says why.
    for (const sql of ["SELECT pgx_pin_database(E'\\0')", "SELECT pgx_pin_database(E'\\377')", 'SELECT pgx_pin_database($$a)', "SELECT pgx_pin_database(E'\\u12')"]) {
      expect(recognize(sql, false), sql).to.equal(null);
    }
  });

  it('masks any text without changing its length, and reads back any value written as $$...$$ or E\'...\'', () => {
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 60 }), (sql) => {
        const { masked } = maskLiterals(sql);
        expect(masked.length).to.equal(sql.length);
      }),
      { numRuns: 500 },
    );
    fc.assert(
      fc.property(fc.string({ unit: 'grapheme', maxLength: 40 }).filter((v) => !v.includes('\0')), (v) => {
        const tag = v.includes('$$') || v.endsWith('$') ? '$q$' : '$$';
        if (v.includes(tag.slice(0, -1))) return;
        const escaped = `E'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
        for (const lit of [`${tag}${v}${tag}`, escaped]) {
          const sql = `SELECT pgx_pin_database(${lit})`;
          expect(recognize(sql, false)?.[0]?.args, sql).to.deep.equal([{ value: v }]);
        }
      }),
      { numRuns: 300 },
    );
  });

  it('reads a plain call without the parser exactly as the parser reads it', () => {
    // Near the plain shape and just off it: the fast reading must agree with the parser's wherever it
    // answers, and answer for the shapes clients send most.
    const space = fc.constantFrom(' ', '  ', '\t', '\n', '\r\n', '\f', '\v', '\u00a0', '');
    const name = fc.constantFrom('pgx_drop_database', 'PGX_Drop_Database', 'pgx_runtime_status', 'pgrust_pin_database', 'pgx_snapshot_database', 'pgx_unknown', '"pgx_drop_database"');
    const text = fc.array(fc.constantFrom('a', "'", "''", '\\', '$', ' ', '\n', '☃', ','), { maxLength: 6 }).map((parts) => parts.join(''));
    const arg = fc.oneof(fc.constantFrom('$1', '$2', '$0', '$01', 'NULL', 'true', "E'x'"), text.map((t) => `'${t}'`));
    const call = fc
      .tuple(space, fc.constantFrom('SELECT', 'select', 'SeLeCt'), space, name, space, fc.array(fc.tuple(arg, space), { maxLength: 4 }), space, fc.constantFrom('', ';', '; ', ' AS x', ';;', ' -- c'))
      .map(([s1, select, s2, fn, s3, args, s4, end]) => `${s1}${select}${s2}${fn}${s3}(${args.map(([a, sp]) => `${sp}${a}`).join(',')}${s4})${end}`);
    let plain = 0;
    fc.assert(
      fc.property(call, fc.boolean(), (sql, allowParams) => {
        const fast = plainCall(sql, allowParams);
        if (fast === null) return;
        plain++;
        expect({ calls: [fast] }, JSON.stringify(sql)).to.deep.equal(parsedPlan(sql, allowParams));
      }),
      { numRuns: 3000 },
    );
    expect(plain).to.be.greaterThan(30);
    expect(plainCall('SELECT pgx_drop_database($1)', true)).to.deep.equal({ fn: 'drop_database', column: 'pgx_drop_database', args: [{ param: 0 }] });
  });

  it('reads a long run of whitespace in one pass, whatever follows it', () => {
    // A pattern in which two runs of whitespace can meet tries every split of a run between them:
    // 200,000 spaces took about 14 s of the event loop that serves every tenant (quadratic; 20,000
    // took 0.14 s). Read once, they take about a millisecond; the bound only tells the two apart.
    const spaces = ' '.repeat(200_000);
    for (const [head, tail] of [['SELECT pgx_drop_database(', 'x'], ['SELECT pgx_drop_database()', 'x'], ["SELECT pgx_drop_database('a'", 'x'], ['', 'SELECT pgx_drop_database(x)']]) {
      const started = performance.now();
      expect(plainCall(`${head}${spaces}${tail}`, true)).to.equal(null);
      expect(performance.now() - started, JSON.stringify(head)).to.be.below(1000);
    }
  });

  it('parses no SQL of more than MAX_PARSED_TOKENS tokens, whose parse time grows faster than its length', () => {
    // 16,000 arguments took the parser 13 s of the event loop every tenant shares.
    const long = `SELECT pgx_drop_database(${'1,'.repeat(16_000)}1)`;
    const started = performance.now();
    expect(planQuery(long, true)).to.equal(null);
    expect(performance.now() - started).to.be.below(1000);
    // Up to the cap, several calls in one Query are still read: 51 calls of 5 tokens each.
    const calls = (n: number): string => 'SELECT pgx_runtime_status();'.repeat(n);
    expect(MAX_PARSED_TOKENS).to.equal(256);
    expect(recognize(calls(51), false)).to.have.length(51);
    expect(recognize(calls(52), false)).to.equal(null);
  });

  it('reads a Unicode space in a name as PostgreSQL does: part of the name, not whitespace', () => {
    // PostgreSQL's whitespace is ASCII; U+00A0 and the other Unicode spaces belong to identifiers, so
    // these are syntax errors there. The parser took them for whitespace and read calls.
    for (const space of ['\u00a0', '\u2003', '\u3000', '\ufeff']) {
      for (const sql of [`SELECT${space}pgx_drop_database('x')`, `${space}SELECT pgx_drop_database('x')`, `SELECT pgx_drop_database${space}('x')`, `SELECT pgx_drop_database('x') AS${space}y`]) {
        expect(planQuery(sql, false), JSON.stringify(sql)).to.equal(null);
      }
    }
    // Inside a literal or a quoted name it is text, as it is to PostgreSQL.
    expect(recognize("SELECT pgx_pin_database('a\u00a0b') AS \"c\u00a0d\"", false)).to.deep.equal([{ fn: 'pin_database', column: 'c\u00a0d', args: [{ value: 'a\u00a0b' }] }]);
  });

  it('leaves SQL PostgreSQL refuses to PostgreSQL, even where the parser would read a call in it', () => {
    // An unterminated comment is PostgreSQL's 42601; the parser read the call before it and ignored the rest.
    for (const sql of ['SELECT pgx_runtime_status() /* x', 'SELECT pgx_runtime_status() -- x\n/* y', "SELECT pgx_pin_database(E'\\xff')", "SELECT pgx_pin_database('a') $$"]) {
      expect(planQuery(sql, false), JSON.stringify(sql)).to.equal(null);
    }
    expect(recognize('SELECT pgx_runtime_status() /* x */', false)).to.have.length(1);
  });

  it('leaves everything else to PostgreSQL', () => {
    for (const sql of [
      "SELECT 'pgx_seal_template(1)'",
      'SELECT 1 AS pgx_x',
      "SELECT pgx_seal_template('a') FROM pg_class",
      'SELECT DISTINCT pgx_runtime_status()',
      'SELECT pgx_runtime_status() LIMIT 1',
      "SELECT pgx_seal_template('a'), 1",
      "SELECT public.pgx_seal_template('a')",
      'SELECT "PGX_RUNTIME_STATUS"()',
      'SELECT pgx_seal_template(1)',
      "SELECT pgx_seal_template('a'::text)",
      "SELECT pgx_seal_template('a', 'b')",
      'SELECT pgx_seal_template()',
      "SELECT pgx_unknown('a')",
      'SELECT pgx_seal_template($1)', // no parameters in a simple Query
      "SELECT pgx_seal_template('a'); SELECT 1", // mixed: all or nothing
      "SELECT upper(pgx_seal_template('a'))",
      "WITH x AS (SELECT 1) SELECT pgx_seal_template('a')",
      'SELECT pgx_seal_template((',
      '',
    ]) {
      expect(recognize(sql, false), sql).to.equal(null);
    }
  });

  it('refuses the first statement that uses a control function out of place, keeping the SQL before it', () => {
    const cases: [string, string, string][] = [
      ["SELECT 1; SELECT pgx_seal_template('a'); SELECT 2", 'SELECT 1; ', 'pgx_seal_template() must be called in a query of its own'],
      ["SELECT pgx_seal_template('a'); SELECT 1", '', 'pgx_seal_template() must be called in a query of its own'],
      ['SELECT * FROM pgx_runtime_status()', '', 'pgx_runtime_status() can only be called as SELECT pgx_runtime_status() [AS name]'],
      ["/* c */ SELECT 1 ;\nSELECT upper(PGX_DROP_DATABASE('a'))", '/* c */ SELECT 1 ;\n', "pgx_drop_database() can only be called as SELECT pgx_drop_database('database') [AS name]"],
      ['SELECT pgx_pin_database(current_database())', '', "pgx_pin_database() can only be called as SELECT pgx_pin_database('database') [AS name]"],
      ['SELECT pgx_seal_template()', '', "pgx_seal_template() can only be called as SELECT pgx_seal_template('template') [AS name]"],
      [
        "INSERT INTO t SELECT pgx_snapshot_database('a', 'b')",
        '',
        "pgx_snapshot_database() can only be called as SELECT pgx_snapshot_database('database', 'snapshot' [, force]) [AS name]",
      ],
    ];
    for (const [sql, before, message] of cases) {
      const plan = planQuery(sql, false);
      expect(plan, sql).to.deep.include({ before });
      expect(plan && 'refused' in plan ? plan.refused : null, sql).to.include({ code: '0A000', message });
    }
    expect(planQuery('SELECT upper(pgx_seal_template($3))', true)).to.deep.include({ params: 3 });
  });

  it('on generated multi-statement SQL: a refusal keeps exactly the statements before the first use', () => {
    const plain = fc.constantFrom('SELECT 1', "SELECT 'pgx_seal_template(1)'", 'CREATE TABLE pgx_t (id int)', 'INSERT INTO pgx_t VALUES (1)', 'SELECT pgx_unknown()', "SELECT public.pgx_pin_database('a')");
    const call = "SELECT pgx_seal_template('a')";
    const use = fc.constantFrom(call, 'SELECT * FROM pgx_runtime_status()', "SELECT upper(PGX_DROP_DATABASE('x'))", 'SELECT pgx_pin_database()', 'SELECT pgx_runtime_status()::json');
    const sep = fc.constantFrom(';', '; ', ';\n', ' ; /* pgx_drop_database(1) */ ', ';\n-- c\n');
    fc.assert(
      fc.property(fc.array(plain, { maxLength: 4 }), fc.option(use, { nil: null }), fc.array(plain, { maxLength: 3 }), sep, (before, used, after, sep) => {
        const head = before.map((st) => st + sep).join('');
        const sql = head + (used === null ? '' : used + sep) + after.join(sep);
        const plan = planQuery(sql, false);
        if (used === null) expect(plan, sql).to.equal(null);
        else if (used === call && before.length === 0 && after.length === 0) expect(plan, sql).to.have.property('calls').with.length(1);
        else expect(plan, sql).to.deep.include({ before: head });
      }),
      { seed: 0x5eed, numRuns: 500 },
    );
    // Whatever the text, an answer and no exception.
    const text = fc.tuple(fc.string({ maxLength: 40 }), fc.constantFrom('pgx_seal_template(', 'pgx_runtime_status()', '$1', "'", ';'), fc.string({ maxLength: 40 }));
    fc.assert(
      fc.property(text, fc.boolean(), ([a, b, c], params) => {
        planQuery(a + b + c, params);
      }),
      { seed: 0x5eed, numRuns: 2000 },
    );
  });

  it('leaves SQL that names no control function, or only a qualified one, to PostgreSQL', () => {
    for (const sql of [
      "SELECT 'pgx_seal_template(1)'",
      'SELECT 1 AS pgx_x; CREATE TABLE pgx_test (id int)',
      "SELECT public.pgx_seal_template('a')",
      'SELECT "PGX_RUNTIME_STATUS"()',
      "SELECT pgx_unknown('a'); SELECT 1",
      'SELECT pgx_seal_template((',
    ]) {
      expect(planQuery(sql, false), sql).to.equal(null);
    }
  });

  it('builds a DO block whose literals survive quotes, backslashes and its own dollar tag', () => {
    const sql = raiseStatement({ code: '22023', message: "a 'b' \\c $pgx$", hint: 'h' });
    expect(sql).to.equal(
      "DO $pgx0$BEGIN RAISE EXCEPTION USING ERRCODE = E'22023', MESSAGE = E'a ''b'' \\\\c $pgx$', HINT = E'h'; END$pgx0$",
    );
  });

  it('loads the SQL parser on the first statement that needs it, not with the runtime', () => {
    // A fresh process: this one has long loaded it. start.js brings in every module `pgx start` runs.
    const script = `
      import { createRequire } from 'node:module';
      const loaded = () => Object.keys(createRequire(import.meta.url).cache).some((k) => k.includes('/pgsql-ast-parser/'));
      await import(${JSON.stringify(new URL('../../src/cli/start.js', import.meta.url).href)});
      const atStart = loaded();
      const { planQuery } = await import(${JSON.stringify(new URL('../../src/engine/control.js', import.meta.url).href)});
      const plain = planQuery('SELECT pgx_runtime_status()', false);
      const afterPlain = loaded();
      const aliased = planQuery('SELECT pgx_runtime_status() AS status', false);
      console.log(JSON.stringify({ atStart, afterPlain, afterAliased: loaded(), calls: plain.calls.length + aliased.calls.length }));`;
    const out = execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' });
    // A plain call is read without it (plainCall); one with an alias needs it.
    expect(JSON.parse(out)).to.deep.equal({ atStart: false, afterPlain: false, afterAliased: true, calls: 2 });
  });
});

describe('engine/control: control functions through the engine', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let engine: Engine;
  const control = new TestControl();
  const open: { end(): Promise<unknown> }[] = [];

  before(async function () {
    rt = await startTestRuntime();
    // startTestRuntime configures a runtime without a control port: a second engine in front of the
    // same PostgreSQL, with one.
    engine = new Engine({ ...rt.runtime.engine.options, port: 0, socketDir: null, control });
    await engine.start();
    const admin = new pg.Client(directConnection(rt));
    await admin.connect();
    await admin.query('CREATE DATABASE realfn');
    await admin.end();
    const real = new pg.Client(directConnection(rt, 'realfn'));
    await real.connect();
    await real.query(REAL_FUNCTIONS);
    await real.end();
  });

  beforeEach(function () {
    control.calls = [];
  });

  afterEach(async function () {
    await Promise.allSettled(open.splice(0).map((c) => c.end()));
  });

  after(async function () {
    await engine?.stop();
    await rt?.stop();
  });

  const env = (): NodeJS.ProcessEnv => ({ ...rt.env(), PGPORT: String(engine.port) });
  const psql = (args: string[], input?: string, e: NodeJS.ProcessEnv = env()): Promise<CommandResult> =>
    runCommand('psql', ['-X', ...args], { env: e, timeoutMs: 30_000, ...(input === undefined ? {} : { input }) });

  async function pgClient(): Promise<pg.Client> {
    const client = new pg.Client({ ...rt.connection(), port: engine.port });
    client.on('error', () => {});
    await client.connect();
    open.push(client);
    return client;
  }

  function pgjs(): postgres.Sql {
    const sql = postgres({ ...rt.connection(), port: engine.port, max: 1, onnotice: () => {} });
    open.push({ end: () => sql.end({ timeout: 5 }) });
    return sql;
  }

  it('reads a call only where PostgreSQL reads the same call: generated SQL, against real functions', async function () {
    // Whatever the engine answers as calls, PostgreSQL must read as those calls too: the same function,
    // argument and column name (realfn has real functions of the same names). SQL near the call shape,
    // in the forms that differ between scanners: whitespace (Unicode too), comments (nested,
    // unterminated), string forms (escape, dollar, Unicode escape, continued across a newline), aliases.
    const direct = new pg.Client(directConnection(rt, 'realfn'));
    await direct.connect();
    open.push(direct);
    // Each part mostly its plain form (so that most statements are calls), else one of the others.
    const mostly = (plain: string, ...others: string[]): fc.Arbitrary<string> =>
      fc.oneof({ arbitrary: fc.constant(plain), weight: 3 }, { arbitrary: fc.constantFrom(...others), weight: 1 });
    const space = mostly(' ', '\t', '\n', '\r\n', '\f', '\v', '\u00a0', '\u3000', '', '/* c */', '/* /* n */ */', '-- c\n', '/* x', '--x');
    const literal = mostly(
      "'a'", '$1', '$1::text', "name => $1", "name => 'a'", "name := 'a'", "VARIADIC ARRAY['a']", "'a' COLLATE \"C\"", "ALL 'a'", "'it''s'", "'a\\'", "'a\\''b'", "'a\nb'", "E'a\\'b'", "e'\\x41'", "E'\\101'", "E'\\u0041'", "E'\\xff'", '$$d$$', '$t$d$t$', '$$a$$$$b$$',
      "U&'d\\0061'", "'a'\n'b'", "'a' 'b'", "'a'--c\n'b'", "N'a'", "B'1'", "X'1'", 'NULL', "'a'::text", "('a')", "'\u00a0'",
    );
    const select = mostly('SELECT', 'select', 'SELECT ALL', 'SELECT DISTINCT', 'TABLE', '(SELECT');
    const name = mostly('pgx_pin_database', 'PGX_PIN_DATABASE', '"pgx_pin_database"', '"PGX_PIN_DATABASE"', 'pgrust_seal_template', 'public.pgx_pin_database');
    const alias = mostly('', ' AS x', ' x', ' AS "Q r"', ' "q"', ' AS', ' AS select', ' select', ' AS user', ' user', ' AS x y', ' AS 1', ' AS ""', ' AS U&"x"', ' AS "a""b"');
    const statement = fc
      .tuple(space, select, space, name, space, literal, space, alias, space, mostly('', ';', '; ', ';;'))
      .map(([s1, sel, s2, fn, s3, lit, s4, alias, s5, end]) => `${s1}${sel}${s2}${fn}${s3}(${lit}${s4})${alias}${s5}${end}`);
    // Mostly one statement; sometimes two or three in one Query (a Parse takes one only).
    const sql = fc.oneof({ arbitrary: statement, weight: 2 }, { arbitrary: fc.array(statement, { minLength: 2, maxLength: 3 }).map((list) => list.join(';')), weight: 1 });
    let read = 0;
    let statements = 0;
    await fc.assert(
      // Simple protocol (a Query), or extended (a named Parse, so that it is extended even without
      // parameters; $1 bound to 'v').
      fc.asyncProperty(sql, fc.boolean(), async (text, extended) => {
        const calls = recognize(text, extended);
        // A Parse of several calls goes to PostgreSQL, which refuses to prepare it (control.ts).
        if (calls === null || (extended && calls.length > 1)) return;
        read++;
        // As many values as the engine read parameters: PostgreSQL refuses a Bind with more or fewer.
        const values = calls[0]!.args.some((arg) => 'param' in arg) ? ['v'] : [];
        const query = extended ? { name: `s${statements++}`, text, values } : { text };
        const answer = (await direct.query({ ...query, rowMode: 'array' }).catch((e: unknown) => e)) as pg.QueryResult | Error;
        expect(answer, JSON.stringify(text)).not.to.be.instanceOf(Error);
        // One result per statement that returned rows (empty statements between semicolons return none).
        const results = (Array.isArray(answer) ? (answer as pg.QueryResult[]) : [answer as pg.QueryResult]).filter((r) => r.fields.length > 0);
        expect(results.length, JSON.stringify(text)).to.equal(calls.length);
        calls.forEach((call, i) => {
          const result = results[i]!;
          expect(result.fields.map((f) => f.name), JSON.stringify(text)).to.deep.equal([call.column]);
          const arg = 'value' in call.args[0]! ? call.args[0]!.value : call.args[0]!.param === 0 ? 'v' : undefined;
          // The real functions return NULL for a NULL argument ('fn:' || NULL).
          expect(result.rows[0]?.[0], JSON.stringify(text)).to.equal(arg === null ? null : `${call.fn}:${arg}`);
        });
      }),
      { numRuns: 3000 },
    );
    expect(read).to.be.greaterThan(100);
  });

  describe('simple protocol (psql)', function () {
    it('shows pgx_runtime_status() as a real text function would, header and all', async function () {
      const sql = 'SELECT pgx_runtime_status()';
      const through = await psql(['-c', sql]);
      const direct = await psql(['-c', sql], undefined, directEnv(rt, 'realfn'));
      expect(through.stderr).to.equal('');
      expect(through.stdout).to.equal(direct.stdout);
      expect(through.stdout).to.match(/^ +pgx_runtime_status +\n-+\n /);
      expect(through.stdout).to.contain(STATUS);
      expect(control.calls).to.deep.equal([{ fn: 'runtime_status', args: [], caller: { user: 'postgres', database: 'postgres' } }]);
    });

    it('calls seal_template for pgrust_seal_template(name), with the column named as written', async function () {
      const sql = "SELECT PGRUST_SEAL_TEMPLATE('tpl'); select pgrust_seal_template('tpl') AS \"Sealed\"";
      const through = await psql(['-c', sql]);
      const direct = await psql(['-c', sql], undefined, directEnv(rt, 'realfn'));
      expect(through.stdout).to.equal(direct.stdout);
      expect(through.stdout).to.contain('pgrust_seal_template').and.to.contain('Sealed').and.to.contain('seal_template:tpl');
      expect(control.calls.map((c) => [c.fn, c.args])).to.deep.equal([
        ['seal_template', ['tpl']],
        ['seal_template', ['tpl']],
      ]);
    });

    it('raises a refused call as an ERROR with SQLSTATE and HINT, and the session goes on', async function () {
      const r = await psql(['-v', 'VERBOSITY=verbose', '-At'], "SELECT pgx_pin_database('forbidden');\nSELECT 'still here';\n");
      expect(r.stderr).to.equal(
        `ERROR:  42501: permission denied to pin_database "forbidden"\nHINT:  ${DENIED_HINT}\n`,
      );
      expect(r.stdout).to.equal('still here\n');
    });

    it('aborts a transaction block like a failing function, and makes no call in an aborted one', async function () {
      const script = [
        'BEGIN;',
        "SELECT pgx_pin_database('forbidden');",
        'SELECT 1;',
        "SELECT pgx_pin_database('not-called');",
        'ROLLBACK;',
        "SELECT pgx_pin_database('after');",
      ].join('\n');
      const r = await psql(['-v', 'VERBOSITY=verbose', '-At'], script);
      const aborted = 'ERROR:  25P02: current transaction is aborted, commands ignored until end of transaction block';
      expect(r.stderr.split('\n').filter((l) => l.includes('ERROR'))).to.deep.equal([
        'ERROR:  42501: permission denied to pin_database "forbidden"',
        aborted,
        aborted,
      ]);
      expect(r.stdout).to.equal('BEGIN\nROLLBACK\npin_database:after\n');
      expect(control.calls.map((c) => c.args[0])).to.deep.equal(['forbidden', 'after']);
    });

    it('runs every call of a multi-statement Query, and none after a failed one', async function () {
      const r = await psql(['-At', '-c', "SELECT pgx_seal_template('a'); SELECT pgx_pin_database('forbidden'); SELECT pgx_drop_database('c')"]);
      expect(r.stdout).to.equal('seal_template:a\n');
      expect(r.stderr).to.contain('permission denied');
      expect(control.calls.map((c) => c.fn)).to.deep.equal(['seal_template', 'pin_database']);
    });

    it('forwards statements that only mention pgx_ untouched', async function () {
      const sql = "SELECT 'pgx_seal_template(1)' AS s, 1 AS pgx_x /* pgx_drop_database('a') */";
      const through = await psql(['-c', sql]);
      expect(through.stdout).to.equal((await psql(['-c', sql], undefined, directEnv(rt))).stdout);
      expect(through.stdout).to.contain('pgx_seal_template(1)');
      expect(control.calls).to.deep.equal([]);
    });

    it('refuses a control function used out of place with 0A000 and a hint, after running the statements before it', async function () {
      // Each -c goes as one Query (psql splits a script at semicolons itself).
      const queries = ["SELECT 1; SELECT pgx_seal_template('a'); SELECT 2", 'SELECT * FROM pgx_runtime_status()', "SELECT 'still here'"];
      const r = await psql(['-v', 'VERBOSITY=verbose', '-At', ...queries.flatMap((q) => ['-c', q])]);
      expect(r.stdout).to.equal('1\nstill here\n');
      expect(r.stderr).to.equal(
        [
          'ERROR:  0A000: pgx_seal_template() must be called in a query of its own',
          "HINT:  PGX answers pgx_seal_template() itself, so it cannot run between other statements: send SELECT pgx_seal_template('template') separately.",
          'ERROR:  0A000: pgx_runtime_status() can only be called as SELECT pgx_runtime_status() [AS name]',
          'HINT:  PGX answers pgx_runtime_status() itself, not inside other SQL: pass literal or $n arguments, and work on its result in your next statement.',
          '',
        ].join('\n'),
      );
      expect(control.calls).to.deep.equal([]);
    });

    it("forwards SQL the parser cannot read, and PostgreSQL's own syntax error comes back", async function () {
      const r = await psql(['-v', 'VERBOSITY=verbose', '-c', "SELECT pgx_seal_template(('a'"]);
      expect(r.stderr).to.contain('ERROR:  42601: syntax error at end of input');
      expect(control.calls).to.deep.equal([]);
    });

    it("forwards a call whose name holds a Unicode space, and PostgreSQL's syntax error comes back", async function () {
      const r = await psql(['-v', 'VERBOSITY=verbose', '-c', 'SELECT\u00a0pgx_runtime_status()']);
      expect(r.stderr).to.match(/ERROR: {2}42601: syntax error at or near/);
      expect(control.calls).to.deep.equal([]);
    });

    it("forwards a call before an unterminated comment, and PostgreSQL's error comes back", async function () {
      const r = await psql(['-v', 'VERBOSITY=verbose', '-c', 'SELECT pgx_runtime_status() /* x']);
      expect(r.stderr).to.contain('ERROR:  42601: unterminated /* comment');
      expect(control.calls).to.deep.equal([]);
    });

    it('keeps quotes, backslashes and non-ASCII intact both ways', async function () {
      const c = await pgClient();
      const ok = await c.query(`SELECT pgx_seal_template('it''s \\ ☃') AS r`);
      expect(ok.rows).to.deep.equal([{ r: "seal_template:it's \\ ☃" }]);
      const err = await c.query("SELECT pgx_seal_template('weird')").catch((e: unknown) => e as pg.DatabaseError);
      expect(err).to.include({ code: '22023', message: "it's a \\ $pgx$ 'test' ☃", detail: 'line\nbreak', hint: '$$' });
      expect((err as pg.DatabaseError).where).to.equal(undefined);
    });
  });

  describe('literals and sizes the parser alone would not take', function () {
    /** A block comment that takes a statement past the 1 MiB the engine reads whole. */
    const PAD = ` /* ${'x'.repeat(1 << 20)} */`;

    it('simple protocol: $$x$$ and E\'x\' arguments are calls', async function () {
      const c = await pgClient();
      expect((await c.query('SELECT pgx_pin_database($$db$$) AS r')).rows).to.deep.equal([{ r: 'pin_database:db' }]);
      expect((await c.query("SELECT pgx_pin_database(E'it\\'s') AS r")).rows).to.deep.equal([{ r: "pin_database:it's" }]);
      expect((await c.query('SELECT pgx_snapshot_database($t$db$t$, $$s$$, true) AS r')).rows).to.deep.equal([{ r: 'snapshot_database:db,s,true' }]);
      expect(control.calls.map((x) => x.args)).to.deep.equal([['db'], ["it's"], ['db', 's', 'true']]);
    });

    it('extended protocol: $$x$$ and E\'x\' arguments are calls, beside $n ones', async function () {
      const c = await pgClient();
      expect((await c.query({ name: 'dq', text: 'SELECT pgx_pin_database($$db$$) AS r' })).rows).to.deep.equal([{ r: 'pin_database:db' }]);
      expect((await c.query({ text: "SELECT pgx_snapshot_database($1, E'\\x73nap') AS r", values: ['db'] })).rows).to.deep.equal([{ r: 'snapshot_database:db,snap' }]);
      expect(control.calls.map((x) => x.args)).to.deep.equal([['db'], ['db', 'snap']]);
    });

    it('simple protocol: a call in a Query over 1 MiB is 0A000 with the hint, after the statements before it; the session goes on', async function () {
      const c = await pgClient();
      await c.query('CREATE TEMP TABLE ran (x int)');
      const err = await c.query(`INSERT INTO ran VALUES (1); COMMIT; INSERT INTO ran VALUES (2); SELECT pgx_pin_database('db')${PAD}`).catch((e: unknown) => e as pg.DatabaseError);
      expect(err).to.include({
        code: '0A000',
        message: "pgx_pin_database() must be called as SELECT pgx_pin_database('database') in a query of its own, under 1 MiB",
        hint: 'PGX answers pgx_pin_database() itself, only in a Query or Parse of at most 1 MiB that is exactly that call, with literal or $n arguments: send it separately.',
      });
      // The statements before it ran; as PostgreSQL runs a Query, those after the last COMMIT roll back with it.
      expect((await c.query('SELECT array_agg(x)::text AS xs FROM ran')).rows).to.deep.equal([{ xs: '{1}' }]);
      // A large Query that names no control function runs as sent.
      expect((await c.query(`SELECT 'pgx_ in a literal' AS s${PAD}`)).rows).to.deep.equal([{ s: 'pgx_ in a literal' }]);
      expect(control.calls).to.deep.equal([]);
    });

    it('extended protocol: a call in a Parse over 1 MiB is 0A000 with the hint; the session goes on', async function () {
      const c = await pgClient();
      for (let i = 0; i < 2; i++) {
        const err = await c.query({ text: `SELECT pgx_restore_database($1, $2)${PAD}`, values: ['db', 's'] }).catch((e: unknown) => e as pg.DatabaseError);
        expect(err).to.include({ code: '0A000', message: "pgx_restore_database() must be called as SELECT pgx_restore_database('database', 'snapshot' [, force]) in a query of its own, under 1 MiB" });
      }
      await c.query('BEGIN');
      const inTx = await c.query({ text: `SELECT pgx_runtime_status()${PAD}`, values: [] , name: 'big' }).catch((e: unknown) => e as pg.DatabaseError);
      expect(inTx).to.include({ code: '0A000' });
      expect(await c.query('SELECT 1').catch((e: unknown) => (e as pg.DatabaseError).code)).to.equal('25P02');
      await c.query('ROLLBACK');
      expect((await c.query({ text: `SELECT $1::int AS n${PAD}`, values: [7] })).rows).to.deep.equal([{ n: 7 }]);
      expect(control.calls).to.deep.equal([]);
    });

    it('a call in SQL too long to parse is 0A000 with the hint; the session goes on', async function () {
      const c = await pgClient();
      const text = `SELECT pgx_pin_database(${"'a' || ".repeat(5_000)}'a')`;
      const err = await c.query(text).catch((e: unknown) => e as pg.DatabaseError);
      expect(err).to.include({ code: '0A000', message: "pgx_pin_database() must be called as SELECT pgx_pin_database('database') in a query of its own, under 1 MiB" });
      expect((await c.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
      expect(control.calls).to.deep.equal([]);
    });

    it('a call the parser cannot read reaches PostgreSQL, whose 42883 for it becomes 0A000; other errors stay PostgreSQL\'s', async function () {
      const c = await pgClient();
      // Named notation: the parser cannot read it, PostgreSQL can (and finds no such function).
      for (const text of ["SELECT pgx_pin_database(name => 'a')", 'SELECT pgx_pin_database(VARIADIC $$a$$)']) {
        const err = await c.query(text).catch((e: unknown) => e as pg.DatabaseError);
        expect(err, text).to.include({ code: '0A000', message: "pgx_pin_database() must be called as SELECT pgx_pin_database('database') in a query of its own, under 1 MiB" });
        const extended = await c.query({ text, values: [] , name: `n${text.length}` }).catch((e: unknown) => e as pg.DatabaseError);
        expect(extended, text).to.include({ code: '0A000' });
      }
      // A literal PostgreSQL refuses keeps PostgreSQL's own error.
      const bad = await c.query("SELECT pgx_pin_database(E'\\u12')").catch((e: unknown) => e as pg.DatabaseError);
      expect((bad as pg.DatabaseError).code).to.not.equal('0A000').and.not.equal('42883');
      // A function of that name that does exist answers for itself (42883 for other arguments is its own).
      expect((await c.query("SELECT pgx_unknown_thing('a')").catch((e: unknown) => e as pg.DatabaseError))).to.include({ code: '42883' });
      expect(control.calls).to.deep.equal([]);
    });
  });

  describe('extended protocol', function () {
    it('node-postgres: parameters, unnamed and named statements, results typed text', async function () {
      const c = await pgClient();
      const r = await c.query('SELECT pgx_pin_database($1)', ['db1']);
      expect(r.rows).to.deep.equal([{ pgx_pin_database: 'pin_database:db1' }]);
      expect(r.fields[0]!.dataTypeID).to.equal(25);
      const named = { name: 'pin', text: 'SELECT pgx_pin_database($1) AS pinned' };
      expect((await c.query({ ...named, values: ['a'] })).rows).to.deep.equal([{ pinned: 'pin_database:a' }]);
      expect((await c.query({ ...named, values: ['b'] })).rows).to.deep.equal([{ pinned: 'pin_database:b' }]);
      const snap = await c.query("SELECT pgx_snapshot_database('db1', $1)", ['s1']);
      expect(snap.rows[0]).to.deep.equal({ pgx_snapshot_database: 'snapshot_database:db1,s1' });
      expect(control.calls.map((x) => x.args)).to.deep.equal([['db1'], ['a'], ['b'], ['db1', 's1']]);
    });

    it('node-postgres: a refused call fails at Execute, again and again, and aborts a transaction', async function () {
      const c = await pgClient();
      const named = { name: 'pin2', text: 'SELECT pgx_pin_database($1)' };
      for (let i = 0; i < 2; i++) {
        const err = await c.query({ ...named, values: ['forbidden'] }).catch((e: unknown) => e as pg.DatabaseError);
        expect(err).to.include({ code: '42501', message: 'permission denied to pin_database "forbidden"', hint: DENIED_HINT });
        expect((await c.query({ ...named, values: ['ok'] })).rows).to.deep.equal([{ pgx_pin_database: 'pin_database:ok' }]);
      }
      await c.query('BEGIN');
      const err = await c.query('SELECT pgx_pin_database($1)', ['forbidden']).catch((e: unknown) => e as pg.DatabaseError);
      expect(err).to.include({ code: '42501' });
      const next = await c.query('SELECT 1').catch((e: unknown) => e as pg.DatabaseError);
      expect(next).to.include({ code: '25P02' });
      const refused = await c.query('SELECT pgx_pin_database($1)', ['in-aborted']).catch((e: unknown) => e as pg.DatabaseError);
      expect(refused).to.include({ code: '25P02' });
      expect(control.calls.map((x) => x.args[0])).to.not.include('in-aborted');
      await c.query('ROLLBACK');
      expect((await c.query('SELECT 2 AS two')).rows).to.deep.equal([{ two: 2 }]);
    });

    it('node-postgres: a control function used out of place fails at Execute with 0A000, and the session goes on', async function () {
      const client = await pgClient();
      for (let i = 0; i < 2; i++) {
        const err = await client.query('SELECT upper(pgx_seal_template($1)) AS s', ['a']).catch((e: unknown) => e);
        expect(err).to.include({ code: '0A000', message: "pgx_seal_template() can only be called as SELECT pgx_seal_template('template') [AS name]" });
        expect((err as { where?: string }).where).to.equal(undefined);
      }
      expect((await client.query('SELECT $1::int AS n', [5])).rows).to.deep.equal([{ n: 5 }]);
      expect(control.calls).to.deep.equal([]);
    });

    it('postgres.js: described and cached statements, called twice, with and without arguments', async function () {
      const sql = pgjs();
      for (let i = 0; i < 2; i++) {
        expect(await sql`SELECT pgx_pin_database(${'db' + i}) AS r`).to.deep.equal([{ r: `pin_database:db${i}` }]);
        const [status] = await sql`SELECT pgx_runtime_status()`;
        expect(status).to.deep.equal({ pgx_runtime_status: STATUS });
      }
      const err = await sql`SELECT pgx_pin_database(${'forbidden'})`.catch((e: unknown) => e as postgres.PostgresError);
      expect(err).to.include({ code: '42501', hint: DENIED_HINT });
      expect(await sql`SELECT pgx_pin_database(${'db9'}) AS r`).to.deep.equal([{ r: 'pin_database:db9' }]);
      expect(control.calls.map((c) => c.fn)).to.deep.equal([
        'pin_database',
        'runtime_status',
        'pin_database',
        'runtime_status',
        'pin_database',
        'pin_database',
      ]);
    });

    it('postgres.js: a pipeline of normal statements around control calls keeps its order', async function () {
      const sql = pgjs();
      const results = await Promise.all([
        sql`SELECT 1 AS a`,
        sql`SELECT pgx_pin_database(${'p1'}) AS b`,
        sql`SELECT ${'x'}::text AS c`,
        sql`SELECT pgx_unpin_database(${'p2'}) AS d`,
        sql`SELECT pgx_pin_database(${'forbidden'}) AS e`.catch((e: unknown) => (e as postgres.PostgresError).code),
        sql`SELECT 4 AS f`,
      ]);
      expect(results.map((r) => (typeof r === 'string' ? r : [...r]))).to.deep.equal([
        [{ a: 1 }],
        [{ b: 'pin_database:p1' }],
        [{ c: 'x' }],
        [{ d: 'unpin_database:p2' }],
        '42501',
        [{ f: 4 }],
      ]);
    });

    it('answers a raw pipeline with the same messages as real functions would', async function () {
      const bytes = Buffer.concat([
        serialize.parse({ text: 'SELECT 1 AS a' }),
        serialize.bind(),
        serialize.execute(),
        serialize.parse({ name: 'c', text: 'SELECT pgx_pin_database($1)' }),
        serialize.describe({ type: 'S', name: 'c' }),
        serialize.bind({ statement: 'c', values: ['x'] }),
        serialize.describe({ type: 'P' }),
        serialize.execute(),
        serialize.bind({ statement: 'c', values: ['forbidden'] }),
        serialize.execute(),
        serialize.sync(),
        serialize.query("SELECT pgrust_seal_template('a'); SELECT pgx_runtime_status()"),
        serialize.query('SELECT pgx_runtime_status()'),
        // Two refusals in one segment: PostgreSQL skips everything after the first.
        serialize.bind({ statement: 'c', values: ['forbidden'] }),
        serialize.execute(),
        serialize.bind({ statement: 'c', values: ['forbidden'] }),
        serialize.execute(),
        serialize.sync(),
        // An error before the call in its segment: PostgreSQL skips the call's messages.
        serialize.parse({ text: 'SELEC 1' }),
        serialize.bind({ statement: 'c', values: ['skipped'] }),
        serialize.execute(),
        serialize.sync(),
        serialize.bind({ statement: 'c', values: ['y'] }),
        serialize.execute(),
        serialize.close({ type: 'S', name: 'c' }),
        serialize.parse({ name: 'c', text: 'SELECT $1::text AS plain' }),
        serialize.bind({ statement: 'c', values: ['z'] }),
        serialize.execute(),
        serialize.sync(),
      ]);
      const through = await exchange({ port: engine.port, host: rt.host }, 'postgres', bytes, 6);
      const { host: socketDir, port } = directConnection(rt);
      const direct = await exchange({ path: `${socketDir}/.s.PGSQL.${port}` }, 'realfn', bytes, 6);
      // A real PL/pgSQL function adds its context to the error; the engine's error has none.
      expect(through).to.deep.equal(direct.map((line) => line.replace(/ PL\/pgSQL function .* at RAISE$/, '')));
      expect(through).to.include('parameterDescription 25');
      expect(through).to.include(`error 42501 permission denied to pin_database "forbidden" ${DENIED_HINT}`);
      // The engine makes a call as soon as its Bind arrives, before it can know that an earlier
      // message in the segment failed: the second 'forbidden' and 'skipped' are called, though
      // PostgreSQL then skips what the engine sent for them.
      const calls = ['x', 'forbidden', 'a', null, null, 'forbidden', 'forbidden', 'skipped', 'y'];
      expect(control.calls.map((c) => c.args[0] ?? null)).to.deep.equal(calls);
      // The same bytes in small pieces: held messages and their remainders straddle chunks.
      for (const size of [1, 3, 7, 64]) {
        control.calls = [];
        expect(await exchange({ port: engine.port, host: rt.host }, 'postgres', bytes, 6, size), `pieces of ${size}`).to.deep.equal(through);
        expect(control.calls.map((c) => c.args[0] ?? null)).to.deep.equal(calls);
      }
    });
  });

  describe('statement names and sessions', function () {
    it('forgets a control statement on Close, on a new unnamed Parse, and on a Parse after DEALLOCATE', async function () {
      const bytes = Buffer.concat([
        serialize.parse({ name: 'd', text: 'SELECT pgx_pin_database($1)' }),
        serialize.parse({ text: 'SELECT pgx_unpin_database($1)' }),
        serialize.bind({ statement: 'd', values: ['1'] }),
        serialize.execute(),
        serialize.bind({ values: ['2'] }),
        serialize.execute(),
        serialize.parse({ text: 'SELECT $1::text AS plain' }),
        serialize.bind({ values: ['3'] }),
        serialize.execute(),
        serialize.sync(),
        serialize.query('DEALLOCATE d'),
        serialize.parse({ name: 'd', text: 'SELECT $1::text AS plain' }),
        serialize.bind({ statement: 'd', values: ['4'] }),
        serialize.execute(),
        serialize.close({ type: 'S', name: 'd' }),
        serialize.parse({ name: 'd', text: 'SELECT pgx_pin_database($1)' }),
        serialize.bind({ statement: 'd', values: ['5'] }),
        serialize.execute(),
        serialize.close({ type: 'S', name: 'd' }),
        serialize.parse({ name: 'd', text: 'SELECT $1::text AS plain' }),
        serialize.bind({ statement: 'd', values: ['6'] }),
        serialize.execute(),
        serialize.sync(),
      ]);
      const lines = await exchange({ port: engine.port, host: rt.host }, 'postgres', bytes, 3);
      expect(lines.filter((l) => l.startsWith('dataRow') || l.startsWith('error'))).to.deep.equal([
        'dataRow ["pin_database:1"]',
        'dataRow ["unpin_database:2"]',
        'dataRow ["3"]',
        'dataRow ["4"]',
        'dataRow ["pin_database:5"]',
        'dataRow ["6"]',
      ]);
      expect(control.calls.map((c) => c.args[0])).to.deep.equal(['1', '2', '5']);
    });

    it('lets a client leave while its call runs, and the engine goes on', async function () {
      const gone = net.connect(engine.port, rt.host);
      gone.on('error', () => {});
      await new Promise((resolve) => gone.once('connect', resolve));
      gone.write(Buffer.concat([serialize.startup({ user: 'postgres', database: 'postgres' }), serialize.query("SELECT pgx_pin_database('slow')")]));
      await new Promise((resolve) => setTimeout(resolve, 30));
      gone.destroy();
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(control.calls.map((c) => c.args[0])).to.deep.equal(['slow']);
      const r = await psql(['-At', '-c', "SELECT pgx_pin_database('next')"]);
      expect(r.stdout).to.equal('pin_database:next\n');
      expect(engine.stats().clients).to.equal(0);
    });
  });

  describe('normal traffic', function () {
    const pgbench = (args: string[]): Promise<CommandResult> => runCommand('pgbench', ['--no-vacuum', ...args], { env: env(), timeoutMs: 50_000 });

    function expectClean(r: CommandResult, transactions: number): void {
      const output = `${r.stdout}\n${r.stderr}`;
      expect(r.code, `pgbench failed:\n${output}`).to.equal(0);
      expect(r.stdout, output).to.contain(`number of transactions actually processed: ${transactions}/${transactions}`);
      expect(r.stdout, output).to.match(/number of failed transactions: 0 \(0\.000%\)/);
    }

    it('pgbench -S passes through in every protocol mode, and control calls mix in', async function () {
      const init = await runCommand('pgbench', ['-i', '-s', '1', '-q'], { env: env(), timeoutMs: 50_000 });
      expect(init.code, init.stderr).to.equal(0);
      for (const mode of ['simple', 'extended', 'prepared']) {
        expectClean(await pgbench(['-M', mode, '-S', '-c', '4', '-j', '2', '-t', '500']), 2000);
      }
      expect(control.calls).to.deep.equal([]);
      const script = "SELECT pgx_runtime_status();\n\\set aid random(1, 100000)\nSELECT abalance FROM pgbench_accounts WHERE aid = :aid;\nSELECT pgx_pin_database('db');\n";
      const file = `${rt.dataDir}/../control.sql`;
      fs.writeFileSync(file, script);
      for (const mode of ['simple', 'prepared']) {
        expectClean(await pgbench(['-M', mode, '-f', file, '-c', '2', '-j', '2', '-t', '100']), 200);
      }
      expect(control.calls.length).to.equal(800);
    });
  });
});

/**
 * Logs in (trust), sends `bytes`, and describes every message up to the `readies`-th ReadyForQuery
 * after login, as comparable lines: the message name and what it says.
 */
function exchange(where: net.NetConnectOpts, database: string, bytes: Buffer, readies: number, pieces = 0): Promise<string[]> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(where);
    const lines: string[] = [];
    let ready = -1;
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`timed out after ${lines.join('; ')}`));
    }, 10_000);
    socket.on('error', reject);
    socket.on('connect', () => socket.write(serialize.startup({ user: 'postgres', database })));
    void parse(socket, (m: BackendMessage) => {
      if (m.name === 'readyForQuery' && ++ready === 0) return void writeInPieces(socket, bytes, pieces);
      if (ready < 0) return;
      lines.push(describeMessage(m));
      if (ready === readies) {
        clearTimeout(timer);
        socket.end(serialize.end());
        resolve(lines);
      }
    });
  });
}

/** Writes bytes whole, or in pieces of `size` a turn apart, so that they arrive as separate chunks. */
async function writeInPieces(socket: net.Socket, bytes: Buffer, size: number): Promise<void> {
  if (size <= 0) {
    socket.write(bytes);
    return;
  }
  for (let i = 0; i < bytes.length && !socket.destroyed; i += size) {
    socket.write(bytes.subarray(i, i + size));
    await new Promise((resolve) => setTimeout(resolve, 0));
  }
}

function describeMessage(m: BackendMessage): string {
  const any = m as unknown as Record<string, unknown> & { fields?: { name: string; dataTypeID: number }[] };
  switch (m.name) {
    case 'error': {
      const e = m as unknown as { code: string; message: string; hint?: string; where?: string };
      return `error ${e.code} ${e.message} ${e.hint ?? ''} ${e.where ?? ''}`.trim();
    }
    case 'rowDescription':
      return `rowDescription ${any.fields!.map((f) => `${f.name}:${f.dataTypeID}`).join(',')}`;
    case 'parameterDescription':
      return `parameterDescription ${(any.dataTypeIDs as number[]).join(',')}`;
    case 'dataRow':
      return `dataRow ${JSON.stringify(any.fields)}`;
    case 'commandComplete':
      return `commandComplete ${String(any.text)}`;
    case 'readyForQuery':
      return `readyForQuery ${String(any.status)}`;
    default:
      return m.name;
  }
}
