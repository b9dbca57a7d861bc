// GET /v1/databases in pages (?limit=N&after=NAME): a real runtime with its HTTP API, databases minted
// and dropped between the pages, and every surface that pages: raw HTTP, the API client, `pgx db list`
// (the real CLI as a child process) and the MCP tool list_databases (a spawned `pgx mcp` over stdio).

import { Client } from '@modelcontextprotocol/sdk/client/index.js';
import { StdioClientTransport } from '@modelcontextprotocol/sdk/client/stdio.js';
import { expect } from 'chai';
import path from 'node:path';
import { ApiClient } from '../../src/api/client.js';
import type { DatabasePageBody } from '../../src/api/contract.js';
import { DATABASE_PAGE, PATHS } from '../../src/api/paths.js';
import { runCommand, type CommandResult } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'paging-test-token-0123456789';
const TEMPLATE = 'tpl_page';
const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
const PGX_BIN = path.join(root, 'bin/pgx.js');
/** More than a default page, so a request without a limit is seen cut. */
const COUNT = DATABASE_PAGE.defaultLimit + 5;

const nameOf = (i: number): string => `tdb_${TEMPLATE}__n${String(i).padStart(4, '0')}`;
const binary = (a: string, b: string): number => (a < b ? -1 : a > b ? 1 : 0);

describe('api: GET /v1/databases in pages', function () {
  this.timeout(300_000);
  let rt: TestRuntime;
  let api: ApiClient;
  let base: string;

  async function get(query: string): Promise<{ status: number; body: Record<string, unknown> }> {
    const res = await fetch(`${base}${PATHS.databases}${query}`, { headers: { authorization: `Bearer ${TOKEN}` } });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  }

  function pgx(args: string[]): Promise<CommandResult> {
    const env: NodeJS.ProcessEnv = { ...process.env, PGX_URL: base, PGX_API_TOKEN: TOKEN };
    return runCommand(process.execPath, [PGX_BIN, ...args], { cwd: root, env, timeoutMs: 60_000 });
  }

  /** Every minted database's name now, straight from the runtime (not through a page). */
  function liveNames(): string[] {
    return rt.runtime.databases.listDatabases().map((d) => d.name).sort(binary);
  }

  before(async () => {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 1 });
    base = `http://127.0.0.1:${rt.runtime.api!.port}`;
    api = new ApiClient({ url: base, token: TOKEN });
    await api.buildTemplate({ name: TEMPLATE, sql: 'CREATE TABLE t (id int)' });
    // Made out of order, so a list in creation order would not pass for sorted.
    for (let i = COUNT - 1; i >= 0; i--) await api.createDatabase({ template: TEMPLATE, name: nameOf(i * 2), pinned: true });
  });

  after(async () => {
    await rt?.stop();
  });

  it('without a limit answers the first default page by name, and next names its last', async () => {
    const { status, body } = await get('');
    expect(status).to.equal(200);
    const page = body as unknown as DatabasePageBody;
    const names = page.items.map((d) => d.name);
    expect(names).to.deep.equal(liveNames().slice(0, DATABASE_PAGE.defaultLimit));
    expect(page.next).to.equal(names.at(-1));
    // The last page says so.
    const last = (await get(`?after=${encodeURIComponent(page.next!)}&limit=${DATABASE_PAGE.maxLimit}`)).body as unknown as DatabasePageBody;
    expect(last.items.map((d) => d.name)).to.deep.equal(liveNames().slice(DATABASE_PAGE.defaultLimit));
    expect(last.next).to.equal(null);
  });

  it('pages list every database that lived throughout exactly once while others are minted and dropped between pages', async () => {
    const before = liveNames();
    const seen: string[] = [];
    const minted: string[] = [];
    const dropped = new Set<string>();
    let after: string | null = null;
    let round = 0;
    do {
      const page: DatabasePageBody = await api.listDatabasesPage({ limit: 7, after });
      expect(page.items.length).to.be.at.most(7);
      seen.push(...page.items.map((d) => d.name));
      after = page.next;
      round++;
      // Between pages: a name sorting before the cursor, one after it (odd numbers are free), and a drop
      // of a database not listed yet.
      const low = nameOf(2 * round - 1);
      const high = nameOf(2 * (COUNT - round) + 1);
      for (const name of [low, high]) {
        await api.createDatabase({ template: TEMPLATE, name, pinned: true });
        minted.push(name);
      }
      const victim = before.find((n) => after !== null && n > after && !dropped.has(n) && n !== before.at(-1));
      if (victim !== undefined && round % 2 === 0) {
        await api.dropDatabase(victim);
        dropped.add(victim);
      }
    } while (after !== null);
    expect(new Set(seen).size, 'no name twice').to.equal(seen.length);
    expect([...seen].sort(binary), 'in name order').to.deep.equal(seen);
    const throughout = before.filter((n) => !dropped.has(n));
    expect(seen.filter((n) => before.includes(n))).to.deep.equal(throughout);
    for (const n of dropped) expect(seen, `${n} was dropped before its page`).to.not.include(n);
    expect(dropped.size).to.be.greaterThan(0);
    // Those minted meanwhile: listed only if they sort after the page being read when they came.
    expect(seen.filter((n) => minted.includes(n)).length).to.be.greaterThan(0);
    for (const n of [...minted, ...dropped]) await api.dropDatabase(n);
    expect(liveNames()).to.deep.equal(throughout);
  });

  it('the client lists all of them across pages', async () => {
    expect((await api.listDatabases()).map((d) => d.name)).to.deep.equal(liveNames());
  });

  it('a limit outside 1 to the maximum, or not a whole number, is 400 INVALID_PARAMETER with the range in the hint', async () => {
    for (const limit of ['0', String(DATABASE_PAGE.maxLimit + 1), '-1', '1.5', 'ten', '', '1e2', '99999999']) {
      const { status, body } = await get(`?limit=${encodeURIComponent(limit)}`);
      expect(status, limit).to.equal(400);
      expect(body, limit).to.include({ code: 'INVALID_PARAMETER', sqlstate: '22023' });
      expect(body.message, limit).to.include(`limit must be a whole number from 1 to ${DATABASE_PAGE.maxLimit}`);
      expect(body.hint, limit).to.include(`limit takes 1 to ${DATABASE_PAGE.maxLimit} (default ${DATABASE_PAGE.defaultLimit})`);
    }
    const tooLong = await get(`?after=${'x'.repeat(64)}`);
    expect(tooLong.status).to.equal(400);
    expect(tooLong.body).to.include({ code: 'INVALID_PARAMETER', sqlstate: '22023' });
    for (const limit of [1, DATABASE_PAGE.maxLimit]) {
      const { status, body } = await get(`?limit=${limit}`);
      expect(status).to.equal(200);
      expect((body.items as unknown[]).length).to.equal(Math.min(limit, liveNames().length));
    }
  });

  it('pgx db list shows every page; --limit shows one and the command for the next', async () => {
    const all = await pgx(['db', 'list', '--json']);
    expect(all.code, all.stderr).to.equal(0);
    expect((JSON.parse(all.stdout) as DatabasePageBody).items.map((d) => d.name)).to.deep.equal(liveNames());
    const one = await pgx(['db', 'list', '--limit', '3']);
    expect(one.code, one.stderr).to.equal(0);
    const [first, second, third] = liveNames();
    expect(one.stdout.split('\n').filter((l) => l.startsWith('tdb_')).map((l) => l.split(/\s+/)[0])).to.deep.equal([first, second, third]);
    expect(one.stdout).to.include(`more: pgx db list --limit 3 --after ${third}\n`);
    const next = JSON.parse((await pgx(['db', 'list', '--limit', '2', '--after', third!, '--json'])).stdout) as DatabasePageBody;
    expect(next.items.map((d) => d.name)).to.deep.equal(liveNames().slice(3, 5));
    expect(next.next).to.equal(liveNames()[4]);
    const bad = await pgx(['db', 'list', '--limit', '0']);
    expect(bad.code).to.equal(2);
    expect(bad.stderr).to.include(`--limit 0: expected 1 to ${DATABASE_PAGE.maxLimit}`);
    const misplaced = await pgx(['db', 'get', first!, '--limit', '3']);
    expect(misplaced.code).to.equal(2);
    expect(misplaced.stderr).to.include('--limit is an option of pgx db list only');
  });

  it('the MCP tool list_databases takes limit and cursor', async () => {
    const transport = new StdioClientTransport({ command: process.execPath, args: [PGX_BIN, 'mcp'], env: { ...(process.env as Record<string, string>), PGX_URL: base, PGX_API_TOKEN: TOKEN }, cwd: root, stderr: 'pipe' });
    const client = new Client({ name: 'pgx-paging-test', version: '1.0.0' });
    await client.connect(transport);
    try {
      const call = async (args: Record<string, unknown>): Promise<{ isError: boolean; data: DatabasePageBody | null; text: string }> => {
        const r = await client.callTool({ name: 'list_databases', arguments: args });
        const text = (r.content as { text?: string }[]).map((c) => c.text ?? '').join('\n');
        return { isError: r.isError === true, data: (r.structuredContent as DatabasePageBody | undefined) ?? null, text };
      };
      const names: string[] = [];
      let cursor: string | null = null;
      do {
        const page = await call(cursor === null ? { limit: 40 } : { limit: 40, cursor });
        expect(page.isError, page.text).to.equal(false);
        names.push(...page.data!.items.map((d) => d.name));
        cursor = page.data!.next;
      } while (cursor !== null);
      expect(names).to.deep.equal(liveNames());
      const first = await call({});
      expect(first.data!.items.map((d) => d.name)).to.deep.equal(liveNames().slice(0, DATABASE_PAGE.defaultLimit));
      const bad = await call({ limit: 0 });
      expect(bad.isError).to.equal(true);
      expect(bad.text).to.include(`limit must be a whole number from 1 to ${DATABASE_PAGE.maxLimit}`);
    } finally {
      await client.close();
    }
  });
});
