// The `pgx` command: dispatches to a subcommand. Each subcommand has --help. Exit codes: 0 success,
// 1 an error from PGX or its API (`pgx: message` and `hint: ...` on stderr), 2 a usage error. `pgx
// check` answers 1 for "needs standard PostgreSQL" and 2 for every error (see check.ts).

import { PgxError } from '../errors.js';
import { DEFAULT_API_URL, UsageError } from './command-line.js';
import { COMMON_HINTS } from './hints.js';

const HELP = `pgx: disposable PostgreSQL for agents, CI and previews

Usage: pgx <command> [options]

Commands:
  start     run a runtime: a supervised PostgreSQL 18 behind the PGX wire engine
  status    a running runtime at a glance: memory, sessions, databases, pools, mints, janitor, disk
  template  list | create NAME --file F | import NAME --from URL | seal NAME | unseal NAME |
            rename NAME NEW | keep NAME | drop NAME: templates databases are minted from, and snapshots
  db        create TEMPLATE | list | get | drop | pin | unpin | ttl | limit | memory-limit |
            snapshot | restore | credential | revoke: minted databases
  url       NAME: a minted database's connection URL
  env       NAME: export DATABASE_URL=... and PGHOST/PGPORT/PGUSER/PGDATABASE lines for it
  psql      NAME [-- psql args]: open psql on it
  mcp       serve MCP tools for coding agents (stdio, or --http PORT); see docs/agents.md
  doctor    what this machine gives a runtime: PostgreSQL, copy-on-write storage, memory limit
  check     --from URL | --file schema.sql: can a source database move to PGX, or does it need
            standard PostgreSQL (extensions, languages, replication, ...); see docs/compatibility.md
  operator  run the Kubernetes operator (Runtime, Template, Branch) in a cluster or from a kubeconfig

status, template, db, url, env, psql and mcp talk to a runtime's HTTP API: --url (env PGX_URL, default
${DEFAULT_API_URL}, which npm start listens on) and --token (env PGX_API_TOKEN).

Run 'pgx <command> --help' for a command's options.
`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'start':
      {
        // Before the runtime's modules load, which would grow it (src/runtime/young-generation.ts).
        (await import('../runtime/young-generation.js')).capYoungGeneration();
        // Loaded only here: the runtime's modules (engine, supervisor, logging) are not needed by the
        // API commands, which start faster without them.
        const { runStart, START_HELP } = await import('./start.js');
        if (rest.includes('--help') || rest.includes('-h')) {
          process.stdout.write(START_HELP);
          return 0;
        }
        return await runStart(rest);
      }
      // Every command loads only its own modules: `pgx status` in a loop (a script, a watch) pays node's
      // start and its own code, not the other commands'.
      case 'status':
        return await (await import('./status.js')).runStatus(rest);
      case 'template':
      case 'templates':
        return await (await import('./template.js')).runTemplate(rest);
      case 'db':
        return await (await import('./db.js')).runDb(rest);
      case 'url':
        return await (await import('./connection.js')).runUrl(rest);
      case 'env':
        return await (await import('./connection.js')).runEnv(rest);
      case 'psql':
        return await (await import('./connection.js')).runPsql(rest);
      case 'mcp': {
        // Loaded only here, like start: the MCP SDK is not needed by the other commands.
        const { runMcp } = await import('./mcp.js');
        return await runMcp(rest);
      }
      case 'doctor':
        return await (await import('./doctor.js')).runDoctor(rest);
      case 'check': {
        // Loaded only here: node-postgres and the rules are not needed by the other commands.
        const { runCheck } = await import('./check.js');
        return await runCheck(rest);
      }
      case 'operator': {
        // Loaded only here: client-node is large and only the operator needs it.
        const { runOperator } = await import('../operator/command.js');
        return await runOperator(rest);
      }
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(HELP);
        return 0;
      default:
        process.stderr.write(`pgx: unknown command "${command}"\n${helpPointer(HELP)}\n`);
        return 2;
    }
  } catch (err) {
    if (err instanceof UsageError) {
      process.stderr.write(`pgx: ${err.message}\n${helpPointer(err.help)}\n`);
      return 2;
    }
    if (err instanceof PgxError) {
      const hint = COMMON_HINTS[err.code] ?? err.hint;
      process.stderr.write(`pgx: ${err.message}\n${err.detail ? `detail: ${err.detail}\n` : ''}${hint ? `hint: ${hint}\n` : ''}`);
      return 1;
    }
    throw err;
  }
}

/** One line after a usage error, as git and kubectl do: where the whole help is, not the help itself. */
function helpPointer(help: string): string {
  const command = /^Usage: (pgx(?: [a-z-]+)*)/m.exec(help)?.[1] ?? 'pgx';
  return `Run '${command} --help' for usage.`;
}
