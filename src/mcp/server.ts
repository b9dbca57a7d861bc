// The PGX MCP server: the tools (tools.ts) and one resource per minted database, its schema as text
// (schema.ts), listed a page at a time, over whichever transport the caller connects (stdio.ts, http.ts). Its only state is the
// scoped role it holds per database (scoped-roles.ts, owned by the transport, which revokes them at its
// end); everything else it asks the runtime's HTTP API, so several servers can share a runtime.

import { McpServer, ResourceTemplate } from '@modelcontextprotocol/sdk/server/mcp.js';
import { ErrorCode, ListResourcesRequestSchema, McpError, type ListResourcesResult } from '@modelcontextprotocol/sdk/types.js';
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
    // Listed by the resources/list handler below, a page at a time.
    new ResourceTemplate(SCHEMA_URI, { list: undefined }),
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
  // resources/list: one entry per minted database, so a host can show them without a tool call, a page
  // at a time (the MCP cursor: params.cursor in, nextCursor out), as GET /v1/databases pages: the SDK's
  // own handler would list every database in one answer (10,000 at the runtime's cap) and drops
  // nextCursor. Replaces the handler registerResource set; this server has no other resources.
  server.server.setRequestHandler(ListResourcesRequestSchema, async (request) => listSchemaResources(api, request.params?.cursor));
  return server;
}

/** One page of database schema resources after `cursor` (a database name: the `next` of GET /v1/databases). */
async function listSchemaResources(api: ApiClient, cursor: string | undefined): Promise<ListResourcesResult> {
  // Checked here so the error speaks of the cursor, not of the HTTP API's ?after.
  if (cursor !== undefined && Buffer.byteLength(cursor) > 63) {
    throw new McpError(ErrorCode.InvalidParams, 'cursor must be the nextCursor of the previous resources/list answer (a database name, at most 63 bytes); leave it out for the first page');
  }
  const page = await api.listDatabasesPage({ after: cursor ?? null }).catch((err: unknown) => {
    throw asMcpError(err);
  });
  return {
    resources: page.items.map((d) => ({
      uri: schemaUri(d.name),
      name: `${d.name} schema`,
      description: `Tables, columns, indexes and constraints of ${d.name} (from template ${d.template})`,
      mimeType: 'text/plain',
    })),
    ...(page.next !== null ? { nextCursor: page.next } : {}),
  };
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
