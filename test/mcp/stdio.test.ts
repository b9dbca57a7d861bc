// `pgx mcp` as an agent host runs it: spawned over real stdio (the SDK's own Client and
// StdioClientTransport), against a real runtime. The agent's whole loop: list the tools, create a
// database from a template and connect to its URL, snapshot, break it with run_sql, restore, see the
// data back, drop it; and every tool given bad arguments answers a tool error while the server goes on.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { freePort } from '../helpers/commands.js';
import { callTool, mcpEnv, ok, PGX_BIN, queryUrl, root, startMcpRuntime, type McpRuntime } from './harness.js';

const TEMPLATE = 'tpl_mcp';
const TOOL_NAMES = [
  'create_database',
  'list_databases',
  'database_status',
  'snapshot_database',
  'restore_database',
  'drop_database',
  'pin_database',
  'list_templates',
  'drop_template',
  'keep_snapshot',
  'rename_template',
  'runtime_status',
  'run_sql',
];

interface Created {
  name: string;
  url: string;
  template: string;
}

describe('mcp: pgx mcp over stdio against a runtime', function () {
  this.timeout(120_000);
  let m: McpRuntime;
  let client: Client;
  let stderr = '';

  before(async () => {
    m = await startMcpRuntime(TEMPLATE);
    const transport = new StdioClientTransport({ command: process.execPath, args: [PGX_BIN, 'mcp'], env: mcpEnv(m.apiUrl), cwd: root, stderr: 'pipe' });
    transport.stderr?.on('data', (b: Buffer) => (stderr += b.toString('utf8')));
    client = new Client({ name: 'pgx-test-agent', version: '1.0.0' });
    await client.connect(transport);
  });

  after(async () => {
    await client?.close();
    await m?.rt.stop();
  });

  it('lists the thirteen tools, each with a one-line description and an object input schema', async () => {
    const { tools } = await client.listTools();
    expect(tools.map((t) => t.name).sort()).to.deep.equal([...TOOL_NAMES].sort());
    for (const t of tools) {
      expect(t.inputSchema.type, t.name).to.equal('object');
      expect(t.description, t.name).to.be.a('string').and.not.match(/\n/);
      expect(t.description!.length, t.name).to.be.greaterThan(20);
    }
    const create = tools.find((t) => t.name === 'create_database')!;
    expect(create.inputSchema.required).to.deep.equal(['template']);
    expect(Object.keys(create.inputSchema.properties ?? {})).to.deep.equal(['template', 'name', 'ttl', 'pinned']);
    const runSql = tools.find((t) => t.name === 'run_sql')!;
    expect(runSql.inputSchema.required).to.deep.equal(['database', 'sql']);
    expect(client.getInstructions()).to.include('snapshot_database');
    expect(stderr).to.include(`serving MCP on stdio for the PGX API at ${m.apiUrl}`);
  });

  it('create, connect, snapshot, break with run_sql, restore, data back, drop', async () => {
    const templates = await ok<{ items: { name: string }[] }>(client, 'list_templates', {});
    expect(templates.items.map((t) => t.name)).to.include(TEMPLATE);

    // The duration grammar a Branch takes (src/durations.ts): 1h30m is 5400 s.
    const created = await ok<Created>(client, 'create_database', { template: TEMPLATE, ttl: '1h30m' });
    expect(created.name).to.match(/^tdb_tpl_mcp__/);
    expect(created.url).to.match(/^postgresql:\/\/.+\/tdb_tpl_mcp__/);
    expect(await queryUrl<{ n: string }>(created.url, 'SELECT count(*) AS n FROM items')).to.deep.equal([{ n: '1500' }]);

    const status = await ok<{ name: string; expires_at: string | null; created_at: string; template: string }>(client, 'database_status', { database: created.name });
    expect(status.template).to.equal(TEMPLATE);
    expect(status.expires_at).to.be.a('string');
    expect((Date.parse(status.expires_at!) - Date.parse(status.created_at)) / 1000).to.be.within(5399, 5401);

    const snap = await ok<{ snapshot: string; snapshot_of: string }>(client, 'snapshot_database', { database: created.name, snapshot: 'mcp_before' });
    expect(snap.snapshot).to.equal('mcp_before');
    expect(snap.snapshot_of).to.equal(created.name);

    // run_sql is the database's own role: the template's tables are not its to drop, but their rows are.
    const notOwner = await callTool(client, 'run_sql', { database: created.name, sql: 'DROP TABLE items' });
    expect(notOwner.text).to.match(/^error 42501: must be owner of table items\nhint: run_sql acts as the database's own role/);
    const emptied = await ok<{ command: string; rows: unknown[] }>(client, 'run_sql', { database: created.name, sql: 'TRUNCATE items' });
    expect(emptied.command).to.equal('TRUNCATE');
    expect(emptied.rows).to.deep.equal([]);
    expect(await queryUrl<{ n: string }>(created.url, 'SELECT count(*) AS n FROM items')).to.deep.equal([{ n: '0' }]);
    const gone = await callTool(client, 'run_sql', { database: created.name, sql: 'SELECT count(*) FROM no_such_table' });
    expect(gone.isError).to.equal(true);
    expect(gone.text).to.match(/^error 42P01: relation "no_such_table" does not exist/);
    expect(gone.text).to.match(/^hint: .*pgx:\/\/databases\/\{name\}\/schema/m);

    const restored = await ok<{ name: string; restored_to: string }>(client, 'restore_database', { database: created.name, snapshot: 'mcp_before' });
    expect(restored).to.include({ name: created.name, restored_to: 'mcp_before' });
    expect(await queryUrl<{ n: string }>(created.url, 'SELECT count(*) AS n FROM items')).to.deep.equal([{ n: '1500' }]);
    const back = await ok<{ columns: unknown[]; rows: unknown[][]; rowCount: number; command: string; truncated: boolean }>(client, 'run_sql', {
      database: created.name,
      sql: 'SELECT id, label, id > 1 AS later FROM items ORDER BY id LIMIT 2',
    });
    expect(back).to.deep.equal({
      database: created.name,
      command: 'SELECT',
      rowCount: 2,
      columns: [
        { name: 'id', type: 'integer' },
        { name: 'label', type: 'text' },
        { name: 'later', type: 'boolean' },
      ],
      rows: [
        [1, 'item 1', false],
        [2, 'item 2', true],
      ],
      truncated: false,
    });

    const pinned = await ok<{ pinned: boolean }>(client, 'pin_database', { database: created.name, pinned: true });
    expect(pinned.pinned).to.equal(true);
    const unpinned = await ok<{ pinned: boolean }>(client, 'pin_database', { database: created.name, pinned: false });
    expect(unpinned.pinned).to.equal(false);
    const listed = await ok<{ items: { name: string }[] }>(client, 'list_databases', {});
    expect(listed.items.map((d) => d.name)).to.include(created.name);

    const { resources } = await client.listResources();
    const uri = `pgx://databases/${created.name}/schema`;
    expect(resources.map((r) => r.uri)).to.include(uri);
    const schema = await client.readResource({ uri });
    const text = (schema.contents[0] as { text: string }).text;
    expect(text).to.include(`-- schema of database ${created.name}`);
    expect(text).to.match(/^table public\.items$/m);
    expect(text).to.match(/^ {2}id\s+integer {2}not null$/m);
    expect(text).to.match(/^ {2}created_at\s+timestamp with time zone {2}default now\(\)$/m);
    expect(text).to.include('index items_pkey: CREATE UNIQUE INDEX items_pkey ON public.items USING btree (id)');
    expect(text).to.include('index items_label: CREATE INDEX items_label ON public.items USING btree (label)');

    // Disk use is measured only when asked for: it reads every database's size.
    const counts = await ok<{ databases: { templates: number }; disk_usage: null }>(client, 'runtime_status', {});
    expect(counts.databases.templates).to.be.at.least(2); // the template and its snapshot
    expect(counts.disk_usage).to.equal(null);
    const runtime = await ok<{ databases: { templates: number }; disk_usage: { snapshots_mb: number; free_mb: number } }>(client, 'runtime_status', { disk_usage: true });
    expect(runtime.disk_usage.snapshots_mb).to.be.greaterThan(0);
    expect(runtime.disk_usage.free_mb).to.be.greaterThan(0);
    // A second snapshot, kept past the database; the first belongs to it.
    const kept = await ok<{ snapshot: string; kept: boolean }>(client, 'snapshot_database', { database: created.name, snapshot: 'mcp_kept', keep: true });
    expect(kept).to.include({ snapshot: 'mcp_kept', kept: true });
    // A third, kept afterwards with keep_snapshot.
    await ok(client, 'snapshot_database', { database: created.name, snapshot: 'mcp_later' });
    expect(await ok(client, 'keep_snapshot', { snapshot: 'mcp_later' })).to.include({ name: 'mcp_later', kept: true });
    const template = await callTool(client, 'keep_snapshot', { snapshot: TEMPLATE });
    expect(template.text).to.match(/^error NOT_A_TEMPLATE \(22023\): .*\nhint: That is a template, not a snapshot/);
    const sized = await ok<{ items: { name: string; kept: boolean; disk: { apparent_bytes: number } }[] }>(client, 'list_templates', {});
    expect(sized.items.find((t) => t.name === 'mcp_before')).to.include({ kept: false });
    expect(sized.items.find((t) => t.name === 'mcp_before')!.disk.apparent_bytes).to.be.greaterThan(1_000_000);

    expect(await ok(client, 'drop_database', { database: created.name })).to.deep.equal({ name: created.name, dropped: true });
    const after = await ok<{ items: { name: string }[] }>(client, 'list_databases', {});
    expect(after.items.map((d) => d.name)).to.not.include(created.name);
    const status2 = await callTool(client, 'database_status', { database: created.name });
    expect(status2.isError).to.equal(true);
    expect(status2.text).to.match(/^error DATABASE_DROPPED \(3D000\): /);

    // The snapshot went with its database; the kept one outlives it, a template like any other,
    // which can be renamed and dropped.
    const names = async (): Promise<string[]> => (await ok<{ items: { name: string }[] }>(client, 'list_templates', {})).items.map((t) => t.name);
    expect(await names()).to.not.include('mcp_before');
    expect(await names()).to.include('mcp_kept');
    expect(await ok(client, 'drop_template', { template: 'mcp_later' })).to.deep.equal({ name: 'mcp_later', dropped: true });
    const fromSnapshot = await ok<Created>(client, 'create_database', { template: 'mcp_kept' });
    expect(await queryUrl<{ n: string }>(fromSnapshot.url, 'SELECT count(*) AS n FROM items')).to.deep.equal([{ n: '1500' }]);
    const busy = await callTool(client, 'rename_template', { template: 'mcp_kept', new_name: 'mcp_golden' });
    expect(busy.text).to.match(/^error OBJECT_IN_USE \(55006\): cannot rename template "mcp_kept": 1 database minted from it is alive\n(detail: .*\n)?hint: .*list_databases/);
    const inUse = await callTool(client, 'drop_template', { template: 'mcp_kept' });
    expect(inUse.text).to.match(/^error OBJECT_IN_USE \(55006\): .*\n(detail: .*\n)?hint: .*force: true/);
    await ok(client, 'drop_database', { database: fromSnapshot.name });
    expect(await ok(client, 'rename_template', { template: 'mcp_kept', new_name: 'mcp_golden' })).to.include({ name: 'mcp_golden', renamed_from: 'mcp_kept' });
    expect(await names()).to.include('mcp_golden');
    expect(await ok(client, 'drop_template', { template: 'mcp_golden' })).to.deep.equal({ name: 'mcp_golden', dropped: true });
    expect(await names()).to.not.include('mcp_golden');
    const droppedTwice = await callTool(client, 'drop_template', { template: 'mcp_golden' });
    expect(droppedTwice.text).to.match(/^error UNKNOWN_DATABASE \(3D000\): .*\nhint: list_templates/);
  });

  it('run_sql caps rows (default 100, max_rows up to 1000) and marks truncated; statement_timeout ends a long statement', async () => {
    const { name } = await ok<Created>(client, 'create_database', { template: TEMPLATE });
    try {
      const capped = await ok<{ rows: unknown[]; truncated: boolean; rowCount: number | null }>(client, 'run_sql', { database: name, sql: 'SELECT * FROM items ORDER BY id' });
      expect(capped.rows).to.have.length(100);
      expect(capped.truncated).to.equal(true);
      expect(capped.rowCount).to.equal(null);
      const big = await ok<{ rows: unknown[][]; truncated: boolean }>(client, 'run_sql', { database: name, sql: 'SELECT id FROM items ORDER BY id', max_rows: 1000 });
      expect(big.rows).to.have.length(1000);
      expect(big.rows[999]).to.deep.equal([1000]);
      expect(big.truncated).to.equal(true);
      const exact = await ok<{ rows: unknown[]; truncated: boolean; rowCount: number }>(client, 'run_sql', { database: name, sql: 'SELECT id FROM items WHERE id <= 7', max_rows: 7 });
      expect(exact).to.include({ truncated: false, rowCount: 7 });
      const updated = await ok<{ command: string; rowCount: number; columns: unknown[] }>(client, 'run_sql', { database: name, sql: "UPDATE items SET label = 'x' WHERE id <= 10" });
      expect(updated).to.include({ command: 'UPDATE', rowCount: 10 });
      expect(updated.columns).to.deep.equal([]);
      // COPY: node-postgres calls handlers pg-cursor does not have; a regression here ends the server.
      const copied = await ok<{ rows: unknown[][]; truncated: boolean; command: string; rowCount: number }>(client, 'run_sql', { database: name, sql: 'COPY (SELECT id, label FROM items WHERE id > 10 ORDER BY id) TO STDOUT', max_rows: 3 });
      expect(copied).to.deep.include({ command: 'COPY', rowCount: 1490, truncated: true, rows: [['11\titem 11'], ['12\titem 12'], ['13\titem 13']] });
      const copyIn = await callTool(client, 'run_sql', { database: name, sql: 'COPY items FROM STDIN' });
      expect(copyIn.isError).to.equal(true);
      expect(copyIn.text).to.equal('error FEATURE_NOT_SUPPORTED (0A000): run_sql cannot run COPY FROM STDIN: it has no data to send\nhint: Use INSERT ... VALUES, or COPY from a client of your own with the database URL.');
      const slow = await callTool(client, 'run_sql', { database: name, sql: 'SELECT pg_sleep(30)', timeout_seconds: 0.2 });
      expect(slow.isError).to.equal(true);
      expect(slow.text).to.match(/^error 57014: canceling statement due to statement timeout/);
      expect(slow.text).to.include('timeout_seconds');
    } finally {
      await ok(client, 'drop_database', { database: name });
    }
  });

  it('every tool with bad arguments answers a tool error (isError) with what to do, and the server keeps answering', async () => {
    const { name } = await ok<Created>(client, 'create_database', { template: TEMPLATE, pinned: true });
    const nosuch = 'tdb_nosuch__x';
    const cases: [string, Record<string, unknown>, RegExp][] = [
      ['create_database', {}, /template is required: the sealed template to copy \(list_templates/],
      ['create_database', { template: 42 }, /template must be a string/],
      ['create_database', { template: 'nosuch' }, /^error UNKNOWN_TEMPLATE \(3D000\): there is no template "nosuch"\nhint: There is no template of that name: list_templates/],
      ['create_database', { template: TEMPLATE, ttl: 'soon' }, /ttl must be .*"1h", "6h", "24h", "7d"/],
      ['create_database', { template: TEMPLATE, ttl: -5 }, /ttl must be how long until it is dropped/],
      ['create_database', { template: TEMPLATE, ttl: true }, /ttl must be how long until it is dropped/],
      ['create_database', { template: TEMPLATE, pinned: 'yes' }, /pinned must be true or false/],
      ['create_database', { template: TEMPLATE, templat: 'x' }, /unknown argument templat: this tool takes template, name, ttl, pinned/],
      ['create_database', { template: TEMPLATE, name: 'Bad Name!' }, /^error INVALID_PARAMETER \(22023\): .*\nhint: /],
      ['list_databases', { all: true }, /unknown argument all: this tool takes limit, cursor/],
      ['list_databases', { limit: 0 }, /limit must be a whole number from 1 to 1000/],
      ['database_status', {}, /database is required: the name of a minted database/],
      ['database_status', { database: nosuch }, /^error UNKNOWN_DATABASE \(3D000\): database "tdb_nosuch__x" does not exist\nhint: list_databases shows the live databases/],
      ['snapshot_database', { database: name }, /snapshot is required/],
      ['snapshot_database', { database: nosuch, snapshot: 'snap_x' }, /^error UNKNOWN_DATABASE/],
      ['snapshot_database', { database: name, snapshot: 'snap_y', force: 'please' }, /force must be true or false/],
      ['restore_database', { database: name, snapshot: 'no_such_snapshot' }, /^error UNKNOWN_DATABASE .*"no_such_snapshot" does not exist\nhint: .*list_templates the snapshots/],
      ['restore_database', { database: nosuch, snapshot: 'no_such_snapshot' }, /^error UNKNOWN_DATABASE/],
      ['drop_database', { database: 5 }, /database must be a string/],
      ['drop_database', { database: nosuch }, /^error UNKNOWN_DATABASE .*\nhint: list_databases/],
      ['pin_database', { database: name }, /pinned must be true or false/],
      ['pin_database', { database: nosuch, pinned: true }, /^error UNKNOWN_DATABASE/],
      ['list_templates', { x: 1 }, /unknown argument x/],
      ['runtime_status', { verbose: true }, /unknown argument verbose/],
      ['runtime_status', { disk_usage: 'yes' }, /disk_usage must be true or false/],
      ['run_sql', { database: name }, /sql is required: one SQL statement/],
      ['run_sql', { database: name, sql: '' }, /sql must not be empty/],
      ['run_sql', { database: name, sql: 'SELECT 1', max_rows: 5000 }, /max_rows is at most 1000/],
      ['run_sql', { database: name, sql: 'SELECT 1', max_rows: 2.5 }, /max_rows must be a whole number/],
      ['run_sql', { database: nosuch, sql: 'SELECT 1' }, /^error UNKNOWN_DATABASE/],
      ['run_sql', { database: name, sql: 'SELEC 1' }, /^error 42601: syntax error at or near "SELEC" \(at character 1\)$/],
      ['run_sql', { database: name, sql: 'SELECT 1; SELECT 2' }, /^error 42601: cannot insert multiple commands into a prepared statement\nhint: run_sql takes exactly one statement/],
      ['no_such_tool', {}, /no_such_tool not found/],
    ];
    try {
      for (const [tool, args, expected] of cases) {
        const label = `${tool} ${JSON.stringify(args)}`;
        const answer = await callTool(client, tool, args);
        expect(answer.isError, label).to.equal(true);
        expect(answer.text, label).to.match(expected);
      }
      // Still serving, and nothing was created or dropped by the failed calls.
      const listed = await ok<{ items: { name: string; template: string }[] }>(client, 'list_databases', {});
      expect(listed.items.map((d) => d.name)).to.deep.equal([name]);
      const one = await ok<{ rows: unknown[][] }>(client, 'run_sql', { database: name, sql: 'SELECT 1 AS one' });
      expect(one.rows).to.deep.equal([[1]]);
      // An unknown database's schema resource is a protocol error with the hint, not a crash.
      const read = await client.readResource({ uri: `pgx://databases/${nosuch}/schema` }).then(
        () => null,
        (err: unknown) => err as Error,
      );
      expect(read?.message).to.match(/is not one PGX minted.*hint: list_databases/);
    } finally {
      await ok(client, 'drop_database', { database: name });
    }
  });

  it('resources/list pages with the MCP cursor, as GET /v1/databases pages, and refuses a cursor that is no name', async () => {
    // More databases than one page (DATABASE_PAGE.defaultLimit, 100), minted over the API 8 at a time;
    // pinned, so none is dropped for idling while the rest are made.
    const made: string[] = [];
    try {
      for (let i = 0; i < 105; i += 8) {
        const batch = await Promise.all(Array.from({ length: Math.min(8, 105 - i) }, () => m.api.createDatabase({ template: TEMPLATE, pinned: true })));
        made.push(...batch.map((d) => d.name));
      }
      const listed = (await m.api.listDatabases()).map((d) => `pgx://databases/${d.name}/schema`);
      expect(listed).to.include.members(made.map((n) => `pgx://databases/${n}/schema`));
      const pages: { uris: string[]; nextCursor: string | undefined }[] = [];
      let cursor: string | undefined;
      do {
        const page = await client.listResources(cursor === undefined ? {} : { cursor });
        pages.push({ uris: page.resources.map((r) => r.uri), nextCursor: page.nextCursor });
        cursor = page.nextCursor;
      } while (cursor !== undefined && pages.length < 10);
      // Full pages of 100 but the last, a nextCursor on each but the last.
      expect(pages.length).to.equal(Math.ceil(listed.length / 100)).and.be.at.least(2);
      expect(pages.map((p) => p.uris.length)).to.deep.equal(pages.map((_, i) => Math.min(100, listed.length - 100 * i)));
      expect(pages.map((p) => typeof p.nextCursor)).to.deep.equal(pages.map((_, i) => (i < pages.length - 1 ? 'string' : 'undefined')));
      // Every minted database once, in the API's order (by name), and nothing else.
      expect(pages.flatMap((p) => p.uris)).to.deep.equal(listed);
      const bad = await client.listResources({ cursor: 'x'.repeat(64) }).then(
        () => null,
        (err: unknown) => err as Error & { code: number },
      );
      expect(bad?.code).to.equal(-32602);
      expect(bad?.message).to.match(/cursor must be the nextCursor of the previous resources\/list answer/);
    } finally {
      for (const name of made) await m.api.dropDatabase(name);
    }
  });

  it('no runtime at PGX_URL: the server starts, and each tool answers an error saying to start one or set PGX_URL', async () => {
    const nowhere = `http://127.0.0.1:${await freePort()}`;
    const lonely = new Client({ name: 'pgx-test-agent-lonely', version: '1.0.0' });
    await lonely.connect(new StdioClientTransport({ command: process.execPath, args: [PGX_BIN, 'mcp'], env: mcpEnv(nowhere), cwd: root, stderr: 'pipe' }));
    try {
      for (const [tool, args] of [['list_databases', {}], ['create_database', { template: TEMPLATE }], ['runtime_status', {}]] as const) {
        const answer = await callTool(lonely, tool, args);
        expect(answer.isError, tool).to.equal(true);
        expect(answer.text, tool).to.match(new RegExp(`^error CANNOT_CONNECT_NOW \\(57P03\\): cannot reach the PGX API at ${nowhere}`));
        expect(answer.text, tool).to.match(/^hint: .*set PGX_URL/m);
      }
      expect((await lonely.listTools()).tools).to.have.length(13);
    } finally {
      await lonely.close();
    }
  });

  it('a line that is not JSON-RPC on stdin does not end the server', async () => {
    const child = spawn(process.execPath, [PGX_BIN, 'mcp'], { cwd: root, env: mcpEnv(m.apiUrl), stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (b: Buffer) => (out += b.toString('utf8')));
    const answered = new Promise<void>((resolve) => {
      child.stdout.on('data', () => {
        if (out.includes('"id":1')) resolve();
      });
    });
    child.stdin.write('this is not json\n{"jsonrpc":"2.0","id":"x","method":\n');
    child.stdin.write(`${JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } })}\n`);
    await answered;
    const reply = JSON.parse(out.split('\n').find((l) => l.includes('"id":1'))!) as { result: { serverInfo: { name: string } } };
    expect(reply.result.serverInfo.name).to.equal('pgx');
    const exited = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    child.stdin.end();
    expect(await exited).to.equal(0);
  });
});
