// Passwords in statements PostgreSQL logs never reach the runtime's log: a tenant's refused CREATE ROLE
// ... PASSWORD (logged as STATEMENT at warn level), and every statement when log_statement is set with
// -c (the runtime's own CREATE ROLE of a credential included, whose verifier is a secret too). The
// statement stays, its literal masked. First the redaction on its own, then a real runtime's log.

import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import { PassThrough } from 'node:stream';
import pg from 'pg';
import { ApiClient } from '../../src/api/client.js';
import { createLogger } from '../../src/log.js';
import { LogPipe } from '../../src/runtime/postgres/log-pipe.js';
import { PasswordRedactor } from '../../src/runtime/postgres/log-redact.js';
import { waitFor } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'test-token-log-redact-0123456789abcdef';

/** The JSON lines a logger writes, parsed. */
function capture(level: 'info' | 'debug') {
  const stream = new PassThrough();
  const raw: string[] = [];
  stream.setEncoding('utf8').on('data', (s: string) => raw.push(s));
  const lines = (): Array<Record<string, unknown>> => raw.join('').split('\n').filter(Boolean).map((l) => JSON.parse(l) as Record<string, unknown>);
  return { logger: createLogger({ format: 'json', level, stream }), raw, lines };
}

describe('runtime: password literals are masked in the PostgreSQL lines the runtime logs', function () {
  describe('the redaction', () => {
    const one = (line: string): string => new PasswordRedactor().line(line);

    it("masks PASSWORD '...' in any case and quoting, keeping the statement around it", function () {
      const cases: Array<[string, string]> = [
        ["CREATE ROLE x LOGIN PASSWORD 'LeakMe-12345'", "CREATE ROLE x LOGIN PASSWORD '***'"],
        ["alter role x with encrypted password 'it''s-me' valid until 'infinity'", "alter role x with encrypted password '***' valid until 'infinity'"],
        ["ALTER ROLE x PASSWORD E'Leak\\'Me\\\\' LOGIN", "ALTER ROLE x PASSWORD '***' LOGIN"],
        ["ALTER USER x PASSWORD U&'d\\0061t' CONNECTION LIMIT 2", "ALTER USER x PASSWORD '***' CONNECTION LIMIT 2"],
        ['ALTER ROLE x PASSWORD $p$Leak\'Me$p$ LOGIN', "ALTER ROLE x PASSWORD '***' LOGIN"],
        ["CREATE ROLE a PASSWORD'one'; CREATE ROLE b PASSWORD  'two'", "CREATE ROLE a PASSWORD'***'; CREATE ROLE b PASSWORD  '***'"],
        ["CREATE USER MAPPING FOR x SERVER s OPTIONS (user 'u', password 'LeakMe')", "CREATE USER MAPPING FOR x SERVER s OPTIONS (user 'u', password '***')"],
        // standard_conforming_strings off: 'a\'b' is one literal; masking to its real end hides no secret.
        ["ALTER ROLE x PASSWORD 'Leak\\'Me' LOGIN", "ALTER ROLE x PASSWORD '***' LOGIN"],
      ];
      for (const [line, masked] of cases) expect(one(`[42] tenant@db STATEMENT:  ${line}`), line).to.equal(`[42] tenant@db STATEMENT:  ${masked}`);
    });

    it('leaves lines without a password literal as they are', function () {
      for (const line of [
        'ALTER ROLE x PASSWORD NULL',
        'FATAL:  password authentication failed for user "app"',
        "UPDATE users SET password = 'x' WHERE id = 1",
      ]) {
        expect(one(line)).to.equal(line);
      }
      // The word inside a literal is not told apart from the keyword (a log line is no SQL to lex:
      // an apostrophe in a message would open a literal that hides a later PASSWORD): too much is
      // masked, never too little.
      expect(one("SELECT 'PASSWORD' AS word")).to.equal("SELECT 'PASSWORD'***");
    });

    it('a literal or a PASSWORD keyword cut by a line end continues on the next continuation line', function () {
      const r = new PasswordRedactor();
      const lines = ['[7] t@d STATEMENT:  CREATE ROLE y LOGIN', "\tPASSWORD 'Leak", '\tMe-', "\tmulti' CONNECTION LIMIT 1", '\tPASSWORD', "\t$$Leak$$ VALID UNTIL 'infinity'", '[8] LOG:  next'];
      expect(lines.map((l) => r.line(l))).to.deep.equal(['[7] t@d STATEMENT:  CREATE ROLE y LOGIN', "\tPASSWORD '***", '\t***', "\t***' CONNECTION LIMIT 1", '\tPASSWORD', "\t'***' VALID UNTIL 'infinity'", '[8] LOG:  next']);
      // A new message (no tab) ends whatever the last one left open.
      const s = new PasswordRedactor();
      expect(s.line("[1] STATEMENT:  ALTER ROLE x PASSWORD 'Leak")).to.equal("[1] STATEMENT:  ALTER ROLE x PASSWORD '***");
      expect(s.line("[2] LOG:  checkpoint starting: time, 'quoted'")).to.equal("[2] LOG:  checkpoint starting: time, 'quoted'");
    });

    it('LogPipe logs and remembers the masked line only, each stream on its own', async function () {
      const { logger, raw } = capture('debug');
      const pipe = new LogPipe(logger);
      const stdout = new PassThrough();
      const stderr = new PassThrough();
      pipe.pipePostgres(Object.assign(new EventEmitter(), { stdout, stderr }) as unknown as ChildProcess);
      stderr.write("[9] t@d ERROR:  permission denied to create role\n[9] t@d STATEMENT:  CREATE ROLE x PASSWORD 'Leak\n");
      stdout.write('[10] LOG:  something else\n');
      stderr.write("\tMe' LOGIN\n");
      await new Promise((resolve) => setImmediate(resolve));
      expect(raw.join('')).to.not.match(/Leak|Me'/);
      expect(pipe.tail(4)).to.equal("[9] t@d ERROR:  permission denied to create role\n[9] t@d STATEMENT:  CREATE ROLE x PASSWORD '***\n[10] LOG:  something else\n\t***' LOGIN");
    });
  });

  describe('a real runtime, with log_statement = ddl', function () {
    this.timeout(60_000);
    let rt: TestRuntime;
    let tenant: pg.Client;
    let admin: pg.Client;
    const log = capture('debug');
    const postgresLines = (): Array<{ level: string; severity?: string; text: string }> =>
      log.lines().filter((l) => l.message === 'postgres') as Array<{ level: string; severity?: string; text: string }>;

    before(async function () {
      rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 0, pgSettings: { log_statement: 'ddl' } }, log.logger);
      const api = new ApiClient({ url: `http://127.0.0.1:${rt.runtime.api!.port}`, token: TOKEN });
      await api.buildTemplate({ name: 'tpl_logs', sql: 'CREATE TABLE t (x int)' });
      await api.createDatabase({ template: 'tpl_logs', name: 'tdb_tpl_logs__a' });
      const credential = await api.createCredential('tdb_tpl_logs__a');
      tenant = new pg.Client({ ...rt.connection('tdb_tpl_logs__a', credential.user), password: credential.password });
      await tenant.connect();
      admin = new pg.Client(rt.connection('postgres'));
      await admin.connect();
    });

    after(async function () {
      await tenant?.end().catch(() => undefined);
      await admin?.end().catch(() => undefined);
      await rt?.stop();
    });

    it("a tenant's refused CREATE ROLE / ALTER ROLE ... PASSWORD: 42501, and the STATEMENT line masks the password", async function () {
      const refused = [
        "CREATE ROLE x LOGIN PASSWORD 'LeakMe-12345'",
        "ALTER ROLE postgres PASSWORD E'LeakMe-\\'e'",
        "CREATE ROLE y LOGIN\n  PASSWORD 'LeakMe-multi\nline' CONNECTION LIMIT 1",
      ];
      for (const sql of refused) {
        const err = await tenant.query(sql).then(() => null, (e: { code?: string }) => e);
        expect(err?.code, sql).to.equal('42501');
      }
      await tenant.query('SELECT pgx_log_sentinel_one()').catch(() => undefined);
      await waitFor('the sentinel in the log', () => postgresLines().some((l) => l.text.includes('pgx_log_sentinel_one')));
      const statements = postgresLines().filter((l) => l.severity === 'STATEMENT').map((l) => l.text);
      expect(statements).to.include("CREATE ROLE x LOGIN PASSWORD '***'");
      expect(statements).to.include("ALTER ROLE postgres PASSWORD '***'");
      expect(statements).to.include('CREATE ROLE y LOGIN');
      expect(postgresLines().find((l) => l.severity === 'STATEMENT' && l.text === "CREATE ROLE x LOGIN PASSWORD '***'")!.level).to.equal('warn');
      expect(log.raw.join('')).to.not.include('LeakMe');
    });

    it('statements logged by log_statement and log_min_duration_statement, the runtime\'s own included, mask theirs', async function () {
      await admin.query("CREATE ROLE z LOGIN ENCRYPTED PASSWORD 'LeakMe-ddl'");
      // log_statement off for the session, or the duration line would not repeat the statement.
      await admin.query("SET log_statement = 'none'; SET log_min_duration_statement = 0");
      await admin.query('ALTER ROLE z PASSWORD $q$LeakMe-dollar$q$');
      await admin.query('RESET log_min_duration_statement; RESET log_statement');
      await admin.query('DROP ROLE z');
      await admin.query('SELECT pgx_log_sentinel_two()').catch(() => undefined);
      await waitFor('the sentinel in the log', () => postgresLines().some((l) => l.text.includes('pgx_log_sentinel_two')));
      const texts = postgresLines().map((l) => l.text);
      expect(texts).to.include("statement: CREATE ROLE z LOGIN ENCRYPTED PASSWORD '***'");
      expect(texts.some((t) => /^duration: [\d.]+ ms {2}statement: ALTER ROLE z PASSWORD '\*\*\*'$/.test(t)), texts.join('\n')).to.equal(true);
      // The credential's role, made by the runtime with its SCRAM verifier, was logged too (log_statement = ddl).
      expect(texts.some((t) => /^statement: CREATE ROLE .* PASSWORD '\*\*\*'; GRANT/.test(t)), 'the credential CREATE ROLE').to.equal(true);
      expect(log.raw.join('')).to.not.include('LeakMe').and.to.not.include('SCRAM-SHA-256$');
    });
  });
});
