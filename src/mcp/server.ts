// The PGX MCP server: the tools (tools.ts) and one resource per minted database, its schema as text
// (schema.ts), over whichever transport the caller connects (stdio.ts, http.ts). Its only state is the
// scoped role it holds per database (scoped-roles.ts, owned by the transport, which revokes them at its
// end); everything else it asks the runtime's HTTP API, so several servers can share a runtime.

import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, McpError } from '@modelcontextprotocol/sdk/types.js';
import type { ApiClient } from '../api/client.js';
import { PgxError } from '../errors.js';
import { describeSchema } from './schema.js';
import type { ScopedRoles } from './scoped-roles.js';
import { TOOLS } from './tools.js';

/** Kept in step with package.json (as src/cli/start.ts does for the status document). */
const MCP_SERVER_VERSION = '0.1.0';

/** Sent to the agent at initialize: the workflow the tools are built for, in a few lines. */
const INSTRUCTIONS = `PGX gives you disposable PostgreSQL databases copied from templates.
Typical session: list_templates; create_database {template} (returns name and url); apply changes with run_sql
or your own client on the url; snapshot_database before a risky change; restore_database to undo it;
drop_database when done. Read pgx://databases/{name}/schema for a database's tables before writing SQL.`;

const SCHEMA_URI = 'pgx://databases/{name}/schema';

function schemaUri(database: string): string {
  return `pgx://databases/${encodeURIComponent(database)}/schema`;
}

export function createMcpServer(api: ApiClient, roles: ScopedRoles): McpServer {
  const server = new McpServer({ name: 'pgx', version: MCP_SERVER_VERSION }, { instructions: INSTRUCTIONS });
  for (const t of TOOLS) t.register(server, { api, roles });

  server.registerResource(
    'database-schema',
    new ResourceTemplate(SCHEMA_URI, {
      // resources/list: one entry per minted database, so a host can show them without a tool call.
      list: async () => {
        const items = await api.listDatabases().catch((err: unknown) => {
          throw asMcpError(err);
        });
        return {
          resources: items.map((d) => ({
            uri: schemaUri(d.name),
            name: `${d.name} schema`,
            description: `Tables, columns, indexes and constraints of ${d.name} (from template ${d.template})`,
            mimeType: 'text/plain',
          })),
        };
      },
    }),
    { description: 'A minted database\'s schema as text: tables and views with columns and types, indexes, foreign keys and checks.', mimeType: 'text/plain' },
    async (uri, variables) => {
      const raw = variables.name;
      const database = decodeURIComponent(Array.isArray(raw) ? (raw[0] ?? '') : (raw ?? ''));
      try {
        const text = await roles.withUrl(database, (url) => describeSchema(url, database));
        return { contents: [{ uri: uri.href, mimeType: 'text/plain', text }] };
      } catch (err) {
        throw asMcpError(err);
      }
    },
  );
  return server;
}

/** A resource failure as a JSON-RPC error whose message carries the hint (resources have no isError). */
function asMcpError(err: unknown): McpError {
  if (err instanceof McpError) return err;
  if (err instanceof PgxError) {
    const code = err.code === 'UNKNOWN_DATABASE' || err.code === 'INVALID_PARAMETER' ? ErrorCode.InvalidParams : ErrorCode.InternalError;
    return new McpError(code, `${err.message}${err.hint ? `; hint: ${err.hint}` : ''}`);
  }
  const message = err instanceof Error ? err.message : String(err);
  return new McpError(ErrorCode.InternalError, `${message}; hint: runtime_status shows whether the runtime is healthy`);
}
