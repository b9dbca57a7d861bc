// `pgx mcp`: the MCP server (src/mcp) for agent hosts, over stdio by default or streamable HTTP with
// --http PORT. It talks to a runtime's HTTP API like every other API command (--url/PGX_URL,
// --token/PGX_API_TOKEN); this file only parses the command line and waits for the end.

import { serveHttp } from '../mcp/http.js';
import { serveStdio } from '../mcp/stdio.js';
import { apiClient, parseCommand, positionals, TARGET_HELP, UsageError } from './command-line.js';

/** Where `pgx mcp --http` listens unless --host says otherwise: loopback, so no token is needed. */
const DEFAULT_MCP_HOST = '127.0.0.1';

const MCP_HELP = `Usage: pgx mcp [--http PORT [--host HOST]] [options]

Serves the Model Context Protocol for coding agents: tools to create, list, snapshot, restore, pin
and drop disposable databases, list templates, read the runtime status and run SQL, and each
database's schema as a resource. docs/agents.md shows how to add it to an agent host.

  (default)          MCP over stdio: what an agent host launches (command: node /path/to/bin/pgx.js mcp)
  --http PORT        MCP over streamable HTTP at http://HOST:PORT/mcp instead (0: any free port)
  --host HOST        the address --http binds                    [default ${DEFAULT_MCP_HOST}]
                     with a token set, clients send it as Authorization: Bearer <token>;
                     a non-loopback HOST needs one

${TARGET_HELP.replace('  --json                  machine output: the API\'s JSON as is\n', '')}`;

export async function runMcp(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, MCP_HELP, { http: { type: 'string' }, host: { type: 'string' } });
  if (cmd.help) {
    process.stdout.write(MCP_HELP);
    return 0;
  }
  positionals(cmd, [], MCP_HELP);
  if (cmd.json) throw new UsageError('--json does not apply to pgx mcp: it speaks MCP (JSON-RPC) already', MCP_HELP);
  const host = cmd.values.host as string | undefined;
  const httpPort = cmd.values.http as string | undefined;
  if (host !== undefined && httpPort === undefined) throw new UsageError('--host goes with --http PORT (stdio needs no address)', MCP_HELP);
  const api = apiClient(cmd);
  const log = (line: string): void => {
    process.stderr.write(`${line}\n`);
  };
  if (httpPort === undefined) {
    await serveStdio(api, log);
    return 0;
  }
  if (!/^\d+$/.test(httpPort) || Number(httpPort) > 65535) throw new UsageError(`--http ${httpPort}: expected a TCP port (0-65535)`, MCP_HELP);
  const token = cmd.token ?? (process.env.PGX_API_TOKEN?.trim() || null);
  const server = await serveHttp(api, { host: host ?? DEFAULT_MCP_HOST, port: Number(httpPort), token });
  // stdout is free in this mode: one line a script can wait for, like `pgx start`'s ready line.
  process.stdout.write(`PGX MCP ready: ${server.url} (streamable HTTP, API ${api.url}${token !== null ? ', bearer token required' : ''})\n`);
  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  await server.close();
  return 0;
}
