// The `pgx` command: dispatches to a subcommand. Each subcommand has --help.

import { PgxError } from '../errors.js';
import { runStart, START_HELP } from './start.js';

const HELP = `pgx: disposable PostgreSQL for agents, CI and previews

Usage: pgx <command> [options]

Commands:
  start     run a runtime: a supervised PostgreSQL 18 behind the PGX wire engine

Run 'pgx <command> --help' for a command's options.
`;

export async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  try {
    switch (command) {
      case 'start':
        if (rest.includes('--help') || rest.includes('-h')) {
          process.stdout.write(START_HELP);
          return 0;
        }
        return await runStart(rest);
      case undefined:
      case 'help':
      case '--help':
      case '-h':
        process.stdout.write(HELP);
        return 0;
      default:
        process.stderr.write(`pgx: unknown command "${command}"\n\n${HELP}`);
        return 2;
    }
  } catch (err) {
    if (err instanceof PgxError) {
      process.stderr.write(`pgx: ${err.message}\n${err.hint ? `hint: ${err.hint}\n` : ''}`);
      return 1;
    }
    throw err;
  }
}
