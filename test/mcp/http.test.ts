// `pgx mcp --http PORT`: the same tools over MCP's streamable HTTP transport (the SDK's
// StreamableHTTPClientTransport), from a spawned `pgx mcp` against a real runtime; and the guard in
// front of it: the API's bearer token, loopback Host headers only, POST /mcp only.

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StreamableHTTPClientTransport } from '@modelcontextprotocol/sdk/client/streamableHttp.js';
import { expect } from 'chai';
import { spawn, type ChildProcessWithoutNullStreams } from 'node:child_process';
import http from 'node:http';
import { runCommand } from '../helpers/commands.js';
import { callTool, mcpEnv, ok, PGX_BIN, queryUrl, root, startMcpRuntime, TOKEN, type McpRuntime } from './harness.js';

const TEMPLATE = 'tpl_mcp_http';

/** A raw request, so that the test can send what a client library would not (another Host, no token). */
function rawRequest(url: string, opts: { method?: string; headers?: Record<string, string>; body?: string }): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = http.request(url, { method: opts.method ?? 'POST', headers: opts.headers ?? {} }, (res) => {
      let body = '';
      res.on('data', (b: Buffer) => (body += b.toString('utf8')));
      res.on('end', () => resolve({ status: res.statusCode ?? 0, body }));
    });
    req.on('error', reject);
    req.end(opts.body ?? '');
  });
}

describe('mcp: pgx mcp --http (streamable HTTP) against a runtime', function () {
  this.timeout(120_000);
  let m: McpRuntime;
  let child: ChildProcessWithoutNullStreams;
  let mcpUrl: string;
  let client: Client;

  before(async () => {
    m = await startMcpRuntime(TEMPLATE);
    child = spawn(process.execPath, [PGX_BIN, 'mcp', '--http', '0'], { cwd: root, env: mcpEnv(m.apiUrl), stdio: ['pipe', 'pipe', 'pipe'] });
    let out = '';
    mcpUrl = await new Promise<string>((resolve, reject) => {
      child.stdout.on('data', (b: Buffer) => {
        out += b.toString('utf8');
        const match = /^PGX MCP ready: (\S+) /m.exec(out);
        if (match) resolve(match[1]!);
      });
      child.once('close', (code) => reject(new Error(`pgx mcp --http exited ${code} before it was ready: ${out}`)));
    });
    client = new Client({ name: 'pgx-test-agent-http', version: '1.0.0' });
    await client.connect(new StreamableHTTPClientTransport(new URL(mcpUrl), { requestInit: { headers: { Authorization: `Bearer ${TOKEN}` } } }));
  });

  after(async () => {
    await client?.close();
    if (child && child.exitCode === null) {
      const closed = new Promise((resolve) => child.once('close', resolve));
      child.kill('SIGTERM');
      await closed;
    }
    await m?.rt.stop();
  });

  it('prints its address: loopback, path /mcp', () => {
    expect(mcpUrl).to.match(/^http:\/\/127\.0\.0\.1:\d+\/mcp$/);
  });

  it('the tools work over HTTP: create, run_sql, snapshot, break, restore, drop', async () => {
    const { tools } = await client.listTools();
    expect(tools).to.have.length(13);
    const created = await ok<{ name: string; url: string }>(client, 'create_database', { template: TEMPLATE, ttl: 3600 });
    await ok(client, 'run_sql', { database: created.name, sql: "INSERT INTO items (id, label) VALUES (9001, 'over http')" });
    await ok(client, 'snapshot_database', { database: created.name, snapshot: 'http_before' });
    await ok(client, 'run_sql', { database: created.name, sql: 'TRUNCATE items' });
    expect(await queryUrl(created.url, 'SELECT * FROM items')).to.deep.equal([]);
    await ok(client, 'restore_database', { database: created.name, snapshot: 'http_before' });
    const row = await ok<{ rows: unknown[][] }>(client, 'run_sql', { database: created.name, sql: 'SELECT label FROM items WHERE id = 9001' });
    expect(row.rows).to.deep.equal([['over http']]);
    const bad = await callTool(client, 'run_sql', { database: created.name, sql: 42 });
    expect(bad.isError).to.equal(true);
    expect(bad.text).to.include('sql must be a string');
    await ok(client, 'drop_database', { database: created.name });
    const listed = await ok<{ items: unknown[] }>(client, 'list_databases', {});
    expect(listed.items).to.deep.equal([]);
  });

  it("refuses a request without the token (401), with another Host or a web page's Origin (403), a GET (405) and another path (404)", async () => {
    const init = JSON.stringify({ jsonrpc: '2.0', id: 1, method: 'initialize', params: { protocolVersion: '2025-06-18', capabilities: {}, clientInfo: { name: 'raw', version: '0' } } });
    const headers = { 'content-type': 'application/json', accept: 'application/json, text/event-stream' };
    const noToken = await rawRequest(mcpUrl, { headers, body: init });
    expect(noToken.status).to.equal(401);
    expect(noToken.body).to.include('PGX_API_TOKEN');
    const wrongToken = await rawRequest(mcpUrl, { headers: { ...headers, authorization: 'Bearer not-the-token-at-all' }, body: init });
    expect(wrongToken.status).to.equal(401);
    const port = new URL(mcpUrl).port;
    const rebound = await rawRequest(mcpUrl, { headers: { ...headers, authorization: `Bearer ${TOKEN}`, host: `attacker.example:${port}` }, body: init });
    expect(rebound.status).to.equal(403);
    // A web page posting across sites to 127.0.0.1: the Host is loopback, the browser adds its Origin.
    const crossSite = await rawRequest(mcpUrl, { headers: { ...headers, authorization: `Bearer ${TOKEN}`, origin: 'https://attacker.example' }, body: init });
    expect(crossSite.status).to.equal(403);
    expect(crossSite.body).to.include('web origin');
    const get = await rawRequest(mcpUrl, { method: 'GET', headers: { authorization: `Bearer ${TOKEN}` } });
    expect(get.status).to.equal(405);
    const elsewhere = await rawRequest(mcpUrl.replace(/\/mcp$/, '/other'), { headers: { ...headers, authorization: `Bearer ${TOKEN}` }, body: init });
    expect(elsewhere.status).to.equal(404);
    const good = await rawRequest(mcpUrl, { headers: { ...headers, authorization: `Bearer ${TOKEN}` }, body: init });
    expect(good.status).to.equal(200);
    expect((JSON.parse(good.body) as { result: { serverInfo: { name: string } } }).result.serverInfo.name).to.equal('pgx');
  });

  it('will not listen beyond loopback without a token: exit 1 with a hint', async () => {
    const env = mcpEnv(m.apiUrl);
    delete env.PGX_API_TOKEN;
    const r = await runCommand(process.execPath, [PGX_BIN, 'mcp', '--http', '0', '--host', '0.0.0.0'], { cwd: root, env, timeoutMs: 30_000 });
    expect(r.code).to.equal(1);
    expect(r.stderr).to.match(/^pgx: pgx mcp --http on 0\.0\.0\.0 without an API token/m);
    expect(r.stderr).to.match(/^hint: Set PGX_API_TOKEN/m);
  });

  it('SIGTERM ends it cleanly (exit 0)', async () => {
    const closed = new Promise<number | null>((resolve) => child.once('close', (code) => resolve(code)));
    child.kill('SIGTERM');
    expect(await closed).to.equal(0);
  });
});
