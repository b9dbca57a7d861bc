// What the MCP tests share: a real runtime with its HTTP API and a template, and a way to call a tool
// and read its answer (the JSON text, the structured value, or the error text) from any MCP client.

import type { Client } from '@modelcontextprotocol/sdk/client/index.js';
import path from 'node:path';
import pg from 'pg';
import { ApiClient } from '../../src/api/client.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

export const TOKEN = 'mcp-test-token-0123456789abcdef';
export const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../../..');
export const PGX_BIN = path.join(root, 'bin/pgx.js');

/** 1500 rows, more than run_sql's largest page (1000), so the caps can be seen cut. */
export const TEMPLATE_SQL = "CREATE TABLE items (id int PRIMARY KEY, label text NOT NULL, created_at timestamptz DEFAULT now()); CREATE INDEX items_label ON items (label); INSERT INTO items (id, label) SELECT g, 'item ' || g FROM generate_series(1, 1500) g";

export interface McpRuntime {
  rt: TestRuntime;
  api: ApiClient;
  apiUrl: string;
}

export async function startMcpRuntime(template: string): Promise<McpRuntime> {
  const rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, poolSize: 1 });
  const apiUrl = `http://127.0.0.1:${rt.runtime.api!.port}`;
  const api = new ApiClient({ url: apiUrl, token: TOKEN });
  await api.buildTemplate({ name: template, sql: TEMPLATE_SQL });
  return { rt, api, apiUrl };
}

/** The environment `pgx mcp` gets from its host: the API's address and token. */
export function mcpEnv(apiUrl: string): Record<string, string> {
  const env: Record<string, string> = {};
  for (const [k, v] of Object.entries(process.env)) if (v !== undefined) env[k] = v;
  return { ...env, PGX_URL: apiUrl, PGX_API_TOKEN: TOKEN };
}

export interface ToolAnswer {
  isError: boolean;
  text: string;
  /** structuredContent on success; null on error. */
  data: Record<string, unknown> | null;
}

export async function callTool(client: Client, name: string, args: Record<string, unknown>): Promise<ToolAnswer> {
  const result = await client.callTool({ name, arguments: args });
  const content = result.content as { type: string; text?: string }[];
  const text = content.map((c) => c.text ?? '').join('\n');
  return { isError: result.isError === true, text, data: (result.structuredContent as Record<string, unknown> | undefined) ?? null };
}

/** A tool's structured answer; fails the test with the tool's error text otherwise. */
export async function ok<T = Record<string, unknown>>(client: Client, name: string, args: Record<string, unknown>): Promise<T> {
  const a = await callTool(client, name, args);
  if (a.isError || a.data === null) throw new Error(`${name} failed: ${a.text}`);
  return a.data as T;
}

export async function queryUrl<T extends pg.QueryResultRow>(url: string, sql: string): Promise<T[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return (await client.query<T>(sql)).rows;
  } finally {
    await client.end();
  }
}
