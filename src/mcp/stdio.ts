// `pgx mcp` over stdio, what agent hosts launch: JSON-RPC on stdin/stdout, so nothing else may write to
// stdout (the one log line goes to stderr). The server ends when the host closes stdin (or sends
// SIGTERM/SIGINT); the scoped roles it made for the session are revoked then.

import { StdioServerTransport } from '@modelcontextprotocol/sdk/server/stdio.js';
import type { ApiClient } from '../api/client.js';
import { ScopedRoles } from './scoped-roles.js';
import { createMcpServer } from './server.js';

/** Serves until stdin ends (the host went away or closed the pipe). */
export async function serveStdio(api: ApiClient, log: (line: string) => void): Promise<void> {
  const roles = new ScopedRoles(api);
  const server = createMcpServer(api, roles);
  const transport = new StdioServerTransport();
  // A malformed line is reported to the host by the transport and skipped; note it on stderr too.
  transport.onerror = (err) => log(`pgx mcp: ${err.message}`);
  // The host closing its end of stdout is the end of the session, not a crash.
  process.stdout.on('error', () => process.stdin.destroy());
  const ended = new Promise<void>((resolve) => {
    process.stdin.once('end', resolve);
    process.stdin.once('close', resolve);
    process.once('SIGTERM', resolve);
    process.once('SIGINT', resolve);
  });
  await server.connect(transport);
  log(`pgx mcp: serving MCP on stdio for the PGX API at ${api.url}`);
  await ended;
  await server.close();
  await roles.revokeAll();
  // After a signal stdin is still open, and would keep the process alive.
  process.stdin.destroy();
}
