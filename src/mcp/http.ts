// `pgx mcp --http PORT`: the same server over MCP's streamable HTTP transport, at POST /mcp. Stateless:
// each request gets a fresh server and transport, so there are no sessions to leak and GET (a
// server-push stream) is 405. The scoped roles (one credential per database touched) are the HTTP
// server's, shared by its requests and revoked when it closes. It fronts the runtime's API
// with that API's own token, so it must not widen who can use it: when a token is configured, requests
// need `Authorization: Bearer <the same token>`; bound to loopback, the Host header must name loopback
// too (a web page cannot reach it by DNS rebinding) and no web page's Origin may come with it
// (api/loopback.ts); another --host without a token is refused.

import { createHash, timingSafeEqual } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { StreamableHTTPServerTransport } from '@modelcontextprotocol/sdk/server/streamableHttp.js';
import type { ApiClient } from '../api/client.js';
import { isLoopback, refuseForeign } from '../api/loopback.js';
import { PgxError } from '../errors.js';
import { ScopedRoles } from './scoped-roles.js';
import { createMcpServer } from './server.js';

const MCP_HTTP_PATH = '/mcp';

export interface McpHttpOptions {
  host: string;
  /** 0 picks a free port (tests). */
  port: number;
  /** Required as a bearer token on every request when set. */
  token: string | null;
}

export interface McpHttpServer {
  /** The port bound (the one asked for, or the one picked for 0). */
  port: number;
  url: string;
  close(): Promise<void>;
}

export async function serveHttp(api: ApiClient, opts: McpHttpOptions): Promise<McpHttpServer> {
  if (!isLoopback(opts.host) && opts.token === null) {
    throw new PgxError('CONFIG_INVALID', `pgx mcp --http on ${opts.host} without an API token would give anyone who reaches it the runtime's API`, {
      hint: 'Set PGX_API_TOKEN (or --token) to the runtime API token; clients then send it as Authorization: Bearer. Or keep the default --host 127.0.0.1.',
    });
  }
  const expected = opts.token === null ? null : digest(opts.token);
  const roles = new ScopedRoles(api);
  const server = http.createServer((req, res) => {
    handle(api, roles, req, res, opts, expected).catch((err: unknown) => {
      if (!res.headersSent) jsonRpcError(res, 500, -32603, `internal error: ${err instanceof Error ? err.message : String(err)}`);
      else res.end();
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as AddressInfo).port;
  const hostForUrl = opts.host.includes(':') && !opts.host.startsWith('[') ? `[${opts.host}]` : opts.host;
  return {
    port,
    url: `http://${hostForUrl}:${port}${MCP_HTTP_PATH}`,
    close: async () => {
      await new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      });
      await roles.revokeAll();
    },
  };
}

async function handle(api: ApiClient, roles: ScopedRoles, req: http.IncomingMessage, res: http.ServerResponse, opts: McpHttpOptions, expected: Buffer | null): Promise<void> {
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (url.pathname !== MCP_HTTP_PATH) {
    jsonRpcError(res, 404, -32000, `no MCP endpoint at ${url.pathname}; the endpoint is ${MCP_HTTP_PATH}`);
    return;
  }
  // Bound to loopback: a Host naming loopback only (no DNS rebinding), and no web page's Origin.
  const foreign = isLoopback(opts.host) ? refuseForeign({ host: req.headers.host, origin: req.headers.origin }, `http://${req.headers.host ?? opts.host}${MCP_HTTP_PATH}`) : null;
  if (foreign !== null) {
    jsonRpcError(res, 403, -32000, `${foreign.message}. ${foreign.hint}`);
    return;
  }
  if (expected !== null && !bearerMatches(req.headers.authorization, expected)) {
    res.setHeader('www-authenticate', 'Bearer');
    jsonRpcError(res, 401, -32001, 'missing or wrong bearer token: send Authorization: Bearer <the PGX API token (PGX_API_TOKEN)>');
    return;
  }
  if (req.method !== 'POST') {
    res.setHeader('allow', 'POST');
    jsonRpcError(res, 405, -32000, `${req.method ?? 'this method'} is not supported: this server is stateless; send JSON-RPC with POST ${MCP_HTTP_PATH}`);
    return;
  }
  const server = createMcpServer(api, roles);
  const transport = new StreamableHTTPServerTransport({ sessionIdGenerator: undefined, enableJsonResponse: true });
  res.on('close', () => {
    void transport.close();
    void server.close();
  });
  await server.connect(transport);
  await transport.handleRequest(req, res);
}

/** Digests first, so the comparison takes the same time whatever the lengths. */
function digest(token: string): Buffer {
  return createHash('sha256').update(token).digest();
}

function bearerMatches(header: string | undefined, expected: Buffer): boolean {
  const m = /^Bearer\s+(.+)$/i.exec(header ?? '');
  return m !== null && timingSafeEqual(digest(m[1]!.trim()), expected);
}

function jsonRpcError(res: http.ServerResponse, status: number, code: number, message: string): void {
  res.writeHead(status, { 'content-type': 'application/json' });
  res.end(JSON.stringify({ jsonrpc: '2.0', error: { code, message }, id: null }));
}
