// `pgx url|env|psql NAME`: a minted database's connection, the three ways a person uses one: the URL
// for a config file, shell exports for tools that read DATABASE_URL or libpq's PG* variables, and psql
// opened on it. The URL comes from the API (GET /v1/databases/NAME), so it is the one the runtime
// serves, whatever its host and port.

import { spawn } from 'node:child_process';
import { PgxError, withHints } from '../errors.js';
import { apiClient, parseCommand, positionals, TARGET_HELP, UsageError } from './command-line.js';
import { printJson } from './output.js';
import { databaseHints } from './hints.js';

const URL_HELP = `Usage: pgx url NAME [options]

Prints the connection URL of minted database NAME (postgresql://...); --json prints {name, url}.

${TARGET_HELP}`;

const ENV_HELP = `Usage: pgx env NAME [options]

Prints shell lines that point clients at minted database NAME:
  export DATABASE_URL=postgresql://...
  export PGHOST=... PGPORT=... PGUSER=... PGDATABASE=...   (one line each; PGPASSWORD if the URL has one)
Use it as: eval "$(pgx env NAME)". --json prints the same variables as an object.

${TARGET_HELP}`;

const PSQL_HELP = `Usage: pgx psql [options] NAME [--] [psql arguments...]

Opens psql (from PATH, or $PGX_PSQL) on minted database NAME; its input and output are yours, and
pgx exits with psql's exit code. Everything after NAME goes to psql, e.g.
  pgx psql tdb_tpl_app__abc -c 'SELECT count(*) FROM users'
pgx's own options (--url, --token) go before NAME.

${TARGET_HELP.replace("  --json                  machine output: the API's JSON as is\n", '')}`;

/**
 * `url`, the database URL in an API answer, once it is one: postgresql:// (or postgres://) with no
 * whitespace or control character in it. The API is whatever listens at --url, by default
 * 127.0.0.1:7432, which any local user can bind while no runtime does; its answer must not become
 * a psql option (--output=FILE truncates FILE) or lines of a shell's input. Every command that prints a
 * database's URL or hands it to another program takes it through here first.
 */
export function databaseUrl(url: unknown, api: string): string {
  if (typeof url === 'string' && /^postgres(ql)?:\/\/[^\s\x00-\x1f\x7f]*$/.test(url)) return url;
  throw new PgxError('PROTOCOL_VIOLATION', `the API at ${api} answered with a database URL that is not postgresql://...`, {
    hint: `The API at ${api} did not answer like a PGX runtime: is --url (or PGX_URL) pointing at one? Nothing was run or printed.`,
  });
}

/** The URL's parts as libpq environment variables, DATABASE_URL first. */
function connectionEnv(url: string): Record<string, string> {
  const u = new URL(url);
  const env: Record<string, string> = { DATABASE_URL: url };
  const host = u.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host) env.PGHOST = decodeURIComponent(host);
  env.PGPORT = u.port || '5432';
  if (u.username) env.PGUSER = decodeURIComponent(u.username);
  if (u.password) env.PGPASSWORD = decodeURIComponent(u.password);
  env.PGDATABASE = decodeURIComponent(u.pathname.replace(/^\//, ''));
  return env;
}

/** Single-quoted for sh, unless it needs no quoting at all. */
function shellQuote(value: string): string {
  return /^[A-Za-z0-9_@%+=:,./-]+$/.test(value) ? value : `'${value.replace(/'/g, `'\\''`)}'`;
}

export async function runUrl(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, URL_HELP);
  if (cmd.help) {
    process.stdout.write(URL_HELP);
    return 0;
  }
  const [name] = positionals(cmd, ['NAME'], URL_HELP);
  const api = apiClient(cmd);
  const d = await withHints(databaseHints(name!), api.getDatabase(name!));
  const url = databaseUrl(d.url, api.url);
  if (cmd.json) printJson({ name: d.name, url });
  else process.stdout.write(`${url}\n`);
  return 0;
}

export async function runEnv(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, ENV_HELP);
  if (cmd.help) {
    process.stdout.write(ENV_HELP);
    return 0;
  }
  const [name] = positionals(cmd, ['NAME'], ENV_HELP);
  const api = apiClient(cmd);
  const d = await withHints(databaseHints(name!), api.getDatabase(name!));
  const env = connectionEnv(databaseUrl(d.url, api.url));
  if (cmd.json) printJson(env);
  else process.stdout.write(Object.entries(env).map(([k, v]) => `export ${k}=${shellQuote(v)}\n`).join(''));
  return 0;
}

export async function runPsql(argv: string[]): Promise<number> {
  // pgx's options stop at NAME: everything after it is psql's, so `-c SQL` needs no `--`.
  const nameAt = indexOfName(argv);
  const own = nameAt === -1 ? argv : argv.slice(0, nameAt + 1);
  let psqlArgs = nameAt === -1 ? [] : argv.slice(nameAt + 1);
  if (psqlArgs[0] === '--') psqlArgs = psqlArgs.slice(1);
  const cmd = parseCommand(own, PSQL_HELP);
  if (cmd.help) {
    process.stdout.write(PSQL_HELP);
    return 0;
  }
  if (cmd.json) throw new UsageError("--json does not apply to pgx psql (psql's output is its own); pgx url NAME --json gives the URL", PSQL_HELP);
  const [name] = positionals(cmd, ['NAME'], PSQL_HELP);
  const api = apiClient(cmd);
  const d = await withHints(databaseHints(name!), api.getDatabase(name!));
  const url = databaseUrl(d.url, api.url);
  const psql = process.env.PGX_PSQL?.trim() || 'psql';
  return await new Promise<number>((resolve, reject) => {
    // --dbname=URL: the URL is the value of an option, never an option of its own, whatever it holds.
    const child = spawn(psql, [`--dbname=${url}`, ...psqlArgs], { stdio: 'inherit' });
    // Ctrl-C belongs to psql (it cancels the running query); pgx must not die of it meanwhile.
    const ignore = (): void => undefined;
    process.on('SIGINT', ignore);
    const done = (): void => {
      process.off('SIGINT', ignore);
    };
    child.once('error', (err: NodeJS.ErrnoException) => {
      done();
      reject(
        err.code === 'ENOENT'
          ? new PgxError('CONFIG_INVALID', `${psql} not found`, { hint: 'Install the PostgreSQL client (apt-get install postgresql-client, brew install libpq), or set PGX_PSQL to its path; pgx url NAME prints the URL for another client.' })
          : err,
      );
    });
    child.once('close', (code, signal) => {
      done();
      resolve(code ?? (signal !== null ? 128 + signalNumber(signal) : 1));
    });
  });
}

/** Where NAME is in `pgx psql` arguments: the first argument that is neither an option nor an option's value. */
function indexOfName(argv: string[]): number {
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]!;
    if (a === '--') return -1;
    if (a === '--url' || a === '--token') {
      i++;
      continue;
    }
    if (!a.startsWith('-')) return i;
  }
  return -1;
}

function signalNumber(signal: NodeJS.Signals): number {
  return ({ SIGHUP: 1, SIGINT: 2, SIGQUIT: 3, SIGKILL: 9, SIGTERM: 15 } as Partial<Record<NodeJS.Signals, number>>)[signal] ?? 1;
}
