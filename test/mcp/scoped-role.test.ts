// The MCP server acts on a database as that database's own scoped role, never as the runtime's
// superuser: through a real `pgx mcp` (over stdio, and over streamable HTTP) against a real runtime,
// run_sql on tenant A's database meets the walls of a tenant's connection (COPY ... TO PROGRAM,
// pg_read_file, dblink and postgres_fdw into other tenants, ALTER ROLE, SET ROLE postgres: each 42501
// as PostgreSQL words it), while ordinary DDL and DML in its own database work. A template or a
// database PGX did not mint is refused with a tool error saying what to do; the credential is made once
// per database, revoked when the server ends, and what it created stays usable by the next server.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'chai';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import pg from 'pg';
import { callTool, mcpEnv, ok, PGX_BIN, root, startMcpRuntime, TOKEN, type McpRuntime } from './harness.js';

const TEMPLATE = 'tpl_mcp_walls';
/** A template its author gave dblink (a superuser may): its copies hold dblink_connect_u, which needs no password. */
const DBLINK_TEMPLATE = 'tpl_mcp_walls_dblink';

/** An MCP client on a freshly spawned `pgx mcp`, and how to end that server. */
interface Session {
  client: Client;
  end(): Promise<void>;
}

async function stdioSession(apiUrl: string): Promise<Session> {
  const client = new Client({ name: 'pgx-test-walls-stdio', version: '1.0.0' });
  await client.connect(new StdioClientTransport({ command: process.execPath, args: [PGX_BIN, 'mcp'], env: mcpEnv(apiUrl), cwd: root, stderr: 'pipe' }));
  return { client, end: () => client.close() };
}

async function httpSession(apiUrl: string): Promise<Session> {
  const child: ChildProcessWithoutNullStreams = spawn(process.execPath, [PGX_BIN, 'mcp', '--http', '0'], { cwd: root, env: mcpEnv(apiUrl), stdio: ['pipe', 'pipe', 'pipe'] });
  let out = '';
  const url = await new Promise<string>((resolve, reject) => {
    child.stdout.on('data', (b: Buffer) => {
      out += b.toString('utf8');
      const match = /^PGX MCP ready: (\S+) /m.exec(out);
      if (match) resolve(match[1]!);
    });
    child.once('close', (code) => reject(new Error(`pgx mcp --http exited ${code} before it was ready: ${out}`)));
  });
  const client = new Client({ name: 'pgx-test-walls-http', version: '1.0.0' });
  await client.connect(new StreamableHTTPClientTransport(new URL(url), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } }));
  return {
    client,
    end: async () => {
      await client.close();
      if (child.exitCode !== null) return;
      const closed = new Promise((resolve) => child.once('close', resolve));
      child.kill('SIGTERM');
      await closed;
    },
  };
}

/** SQL an attacker would try from tenant A's database, and how PostgreSQL words the refusal. */
const ESCAPES: Array<[string, string, RegExp]> = [
  ['COPY ... TO PROGRAM (a shell as the PostgreSQL OS user)', "COPY (SELECT 1) TO PROGRAM 'id > /tmp/pgx-mcp-escape'", /^permission denied to COPY to or from an external program$/],
  ['COPY ... FROM a server file', "COPY items FROM '/etc/passwd'", /^permission denied to COPY from a file$/],
  ['pg_read_file', "SELECT pg_read_file('/etc/passwd')", /^permission denied for function pg_read_file$/],
  ['dblink (into another tenant through the private socket)', 'CREATE EXTENSION dblink', /^permission denied to create extension "dblink"$/],
  ['postgres_fdw (the same)', 'CREATE EXTENSION postgres_fdw', /^permission denied to create extension "postgres_fdw"$/],
  ['ALTER ROLE on the admin', "ALTER ROLE postgres PASSWORD 'owned'", /^permission denied to alter role$/],
  ['ALTER ROLE ... SUPERUSER on itself', 'ALTER ROLE current_user SUPERUSER', /^permission denied to alter role$/],
  ['SET ROLE postgres', 'SET ROLE postgres', /^permission denied to set role "postgres"$/],
  ['SET SESSION AUTHORIZATION postgres', 'SET SESSION AUTHORIZATION postgres', /^permission denied to set session authorization\b/],
  ['ALTER SYSTEM', "ALTER SYSTEM SET work_mem = '1GB'", /^permission denied to set parameter "work_mem"$/],
];

describe('mcp: tools act on a database as its own scoped role, never as a superuser', function () {
  this.timeout(180_000);
  let m: McpRuntime;
  let admin: pg.Client;
  let a: string;
  let b: string;
  /** A database copied from DBLINK_TEMPLATE. */
  let withDblink: string;
  /** PostgreSQL's private socket, where postgres logs in without a password. */
  let privateSocket: string;

  /** The credentials (login roles) the runtime holds for `database`. */
  async function credentialsOf(database: string): Promise<string[]> {
    // Named <database>_u<4 hex digits> (roleNameFor in database-credentials.ts).
    const { rows } = await admin.query<{ role: string }>("SELECT rolname::text AS role FROM pg_roles WHERE rolname ~ ('^' || $1 || '_u[0-9a-f]{4}$') ORDER BY 1", [database]);
    return rows.map((r) => r.role);
  }

  /** Waits, bounded, for the server's revocations to land after it was ended. */
  async function noCredentials(database: string): Promise<string[]> {
    for (let i = 0; i < 100; i++) {
      const left = await credentialsOf(database);
      if (left.length === 0) return left;
      await new Promise((resolve) => setTimeout(resolve, 100));
    }
    return credentialsOf(database);
  }

  before(async () => {
    m = await startMcpRuntime(TEMPLATE);
    a = (await m.api.createDatabase({ template: TEMPLATE, pinned: true })).name;
    b = (await m.api.createDatabase({ template: TEMPLATE, pinned: true })).name;
    admin = new pg.Client(m.rt.connection('postgres'));
    await admin.connect();
    await m.api.buildTemplate({ name: DBLINK_TEMPLATE, sql: 'CREATE EXTENSION dblink; CREATE TABLE t (x int)' });
    withDblink = (await m.api.createDatabase({ template: DBLINK_TEMPLATE, pinned: true })).name;
    // The attacker does not need to ask: the directory is derived from the data directory's path.
    privateSocket = `host=${(await admin.query<{ d: string }>('SELECT current_setting($1) AS d', ['unix_socket_directories'])).rows[0]!.d} port=${(await admin.query<{ p: string }>("SELECT current_setting('port') AS p")).rows[0]!.p}`;
    const inB = new pg.Client(m.rt.connection(b));
    await inB.connect();
    await inB.query("UPDATE items SET label = 'tenant B secret' WHERE id = 1");
    await inB.end();
  });

  after(async () => {
    await admin?.end().catch(() => undefined);
    await m?.rt.stop();
  });

  for (const [transport, open] of [
    ['stdio', stdioSession],
    ['streamable HTTP', httpSession],
  ] as const) {
    describe(`over ${transport}`, () => {
      const kept = `kept_${transport === 'stdio' ? 'stdio' : 'http'}`;
      let s: Session;
      before(async () => {
        s = await open(m.apiUrl);
      });
      after(async () => {
        await s?.end();
      });

      it('run_sql runs as a login role of its database that is not a superuser', async () => {
        const who = await ok<{ rows: unknown[][] }>(s.client, 'run_sql', { database: a, sql: 'SELECT current_user::text, rolsuper, current_database()::text FROM pg_roles WHERE rolname = current_user' });
        const [user, superuser, database] = who.rows[0] as [string, boolean, string];
        expect(user).to.not.equal('postgres');
        expect(superuser).to.equal(false);
        expect(database).to.equal(a);
        expect(await credentialsOf(a)).to.deep.equal([user]);
      });

      for (const [what, sql, message] of ESCAPES) {
        it(`${what}: 42501`, async () => {
          const answer = await callTool(s.client, 'run_sql', { database: a, sql });
          expect(answer.isError, answer.text).to.equal(true);
          const [first] = answer.text.split('\n');
          expect(first).to.match(/^error 42501: /);
          expect(first!.slice('error 42501: '.length)).to.match(message);
          // PostgreSQL's own hint where it gives one, else run_sql's: either way, what to do.
          expect(answer.text).to.match(/^hint: \S/m);
        });
      }

      it("dblink in a template's copy: dblink_connect_u is 42501, and dblink itself asks for a password", async () => {
        const unsafe = await callTool(s.client, 'run_sql', { database: withDblink, sql: `SELECT dblink_connect_u('c', 'dbname=${b} user=postgres ${privateSocket}')` });
        expect(unsafe.text).to.match(/^error 42501: permission denied for function dblink_connect_u$/m);
        const safe = await callTool(s.client, 'run_sql', { database: withDblink, sql: `SELECT * FROM dblink('dbname=${b} user=postgres ${privateSocket}', 'SELECT label FROM items') AS t(label text)` });
        expect(safe.text).to.match(/^error 2F003: password or GSSAPI delegated credentials required/);
      });

      it("tenant B's rows stay B's: nothing above reached them, and A's own session still works", async () => {
        const inB = new pg.Client(m.rt.connection(b));
        await inB.connect();
        try {
          expect((await inB.query('SELECT label FROM items WHERE id = 1')).rows).to.deep.equal([{ label: 'tenant B secret' }]);
        } finally {
          await inB.end();
        }
        const one = await ok<{ rows: unknown[][] }>(s.client, 'run_sql', { database: a, sql: 'SELECT label FROM items WHERE id = 1' });
        expect(one.rows).to.deep.equal([['item 1']]);
      });

      it('ordinary DDL and DML in its own database work, and the schema resource reads as the same role', async () => {
        const steps: Array<[string, string]> = [
          ['CREATE TABLE notes (id int PRIMARY KEY, body text)', 'CREATE'],
          ["INSERT INTO notes VALUES (1, 'one'), (2, 'two')", 'INSERT'],
          ['ALTER TABLE notes ADD COLUMN done boolean NOT NULL DEFAULT false', 'ALTER'],
          ['CREATE INDEX notes_body ON notes (body)', 'CREATE'],
          ['UPDATE notes SET done = true WHERE id = 2', 'UPDATE'],
          ["UPDATE items SET label = 'changed by A' WHERE id = 2", 'UPDATE'],
          ['CREATE VIEW done_notes AS SELECT id FROM notes WHERE done', 'CREATE'],
          ['CREATE SEQUENCE note_numbers', 'CREATE'],
          ['CREATE FUNCTION twice(int) RETURNS int LANGUAGE sql AS $$ SELECT $1 * 2 $$', 'CREATE'],
        ];
        for (const [sql, command] of steps) expect((await ok<{ command: string }>(s.client, 'run_sql', { database: a, sql })).command, sql).to.equal(command);
        const read = await ok<{ rows: unknown[][] }>(s.client, 'run_sql', { database: a, sql: 'SELECT n.id, n.body, twice(n.id), nextval(\'note_numbers\')::int FROM notes n JOIN done_notes d USING (id)' });
        expect(read.rows).to.deep.equal([[2, 'two', 4, 1]]);
        const schema = await s.client.readResource({ uri: `pgx://databases/${a}/schema` });
        expect((schema.contents[0] as { text: string }).text).to.include('table public.notes').and.include('index notes_body');
        for (const sql of ['DROP VIEW done_notes', 'DROP TABLE notes', 'DROP SEQUENCE note_numbers', 'DROP FUNCTION twice(int)']) {
          expect((await ok<{ command: string }>(s.client, 'run_sql', { database: a, sql })).command, sql).to.equal('DROP');
        }
      });

      it('a template, or a database PGX did not mint, is refused with what to do instead', async () => {
        const template = await callTool(s.client, 'run_sql', { database: TEMPLATE, sql: 'SELECT 1' });
        expect(template.isError).to.equal(true);
        expect(template.text).to.match(new RegExp(`^error INSUFFICIENT_PRIVILEGE \\(42501\\): "${TEMPLATE}" is a template: the MCP server runs SQL only in databases PGX minted`));
        expect(template.text).to.match(new RegExp(`^hint: create_database \\{"template": "${TEMPLATE}"\\}`, 'm'));
        for (const other of ['postgres', 'template1', 'pgx_control']) {
          const answer = await callTool(s.client, 'run_sql', { database: other, sql: 'SELECT 1' });
          expect(answer.text, other).to.match(new RegExp(`^error UNKNOWN_DATABASE \\(3D000\\): database "${other}" is not one PGX minted`));
          expect(answer.text, other).to.match(/^hint: list_databases shows the databases it can use; create_database makes one/m);
        }
        const schema = await s.client.readResource({ uri: `pgx://databases/${TEMPLATE}/schema` }).then(
          () => null,
          (err: unknown) => err as Error,
        );
        expect(schema?.message).to.match(/is a template.*hint: create_database/);
      });

      it('one credential per database for the whole session, revoked when the server ends; what it made stays readable and writable', async () => {
        await ok(s.client, 'run_sql', { database: a, sql: `CREATE TABLE ${kept} (x int)` });
        await ok(s.client, 'run_sql', { database: a, sql: `INSERT INTO ${kept} VALUES (42)` });
        // Planted for after the revoke: were they handed to a superuser, they would run as one.
        await ok(s.client, 'run_sql', { database: a, sql: `CREATE FUNCTION ${kept}_who() RETURNS text SECURITY DEFINER LANGUAGE sql AS $$ SELECT current_user::text $$` });
        await ok(s.client, 'run_sql', { database: a, sql: `CREATE VIEW ${kept}_verifiers AS SELECT rolname, rolpassword FROM pg_authid` });
        await ok(s.client, 'run_sql', { database: b, sql: 'SELECT 1' });
        expect(await credentialsOf(a)).to.have.length(1);
        const [first] = await credentialsOf(b);
        expect(first).to.be.a('string');
        // Revoked under the server's feet (pgx db revoke): the next call makes a new one.
        await m.api.revokeCredential(b, first!);
        expect((await ok<{ rows: unknown[][] }>(s.client, 'run_sql', { database: b, sql: 'SELECT 2' })).rows).to.deep.equal([[2]]);
        const [second] = await credentialsOf(b);
        expect(second).to.be.a('string').and.not.equal(first);
        expect(await credentialsOf(b)).to.have.length(1);
        await s.end();
        expect(await noCredentials(a)).to.deep.equal([]);
        expect(await noCredentials(b)).to.deep.equal([]);
        // The next server's credential reads and writes what the last one created, then drops it.
        s = await open(m.apiUrl);
        expect((await ok<{ rows: unknown[][] }>(s.client, 'run_sql', { database: a, sql: `SELECT x FROM ${kept}` })).rows).to.deep.equal([[42]]);
        await ok(s.client, 'run_sql', { database: a, sql: `INSERT INTO ${kept} VALUES (43)` });
        // The owner is a superuser, so the runtime handed them to the credentials' group, not to it.
        expect((await ok<{ rows: unknown[][] }>(s.client, 'run_sql', { database: a, sql: `SELECT ${kept}_who()` })).rows).to.deep.equal([['pgx_credentials']]);
        const verifiers = await callTool(s.client, 'run_sql', { database: a, sql: `SELECT * FROM ${kept}_verifiers` });
        expect(verifiers.text).to.match(/^error 42501: permission denied for table pg_authid$/m);
        // And the group's ownership is this credential's too: it may alter and drop them.
        await ok(s.client, 'run_sql', { database: a, sql: `ALTER TABLE ${kept} ADD COLUMN y int` });
        for (const sql of [`DROP VIEW ${kept}_verifiers`, `DROP FUNCTION ${kept}_who()`]) await ok(s.client, 'run_sql', { database: a, sql });
      });
    });
  }

  describe('after the sessions', () => {
    it("a snapshot holding what revoked credentials made can be unsealed: the objects stay, the group's grants go", async () => {
      await m.api.snapshot(a, 'walls_snap', true);
      await m.api.unseal('walls_snap');
      const inSnap = new pg.Client(m.rt.connection('walls_snap'));
      await inSnap.connect();
      try {
        const { rows } = await inSnap.query("SELECT tablename::text, tableowner::text FROM pg_tables WHERE tablename LIKE 'kept\\_%' ORDER BY 1");
        expect(rows).to.deep.equal([
          { tablename: 'kept_http', tableowner: 'pgx_credentials' },
          { tablename: 'kept_stdio', tableowner: 'pgx_credentials' },
        ]);
        expect((await inSnap.query("SELECT has_table_privilege('pgx_credentials', 'items', 'SELECT') AS granted")).rows).to.deep.equal([{ granted: false }]);
      } finally {
        await inSnap.end();
      }
    });
  });
});
