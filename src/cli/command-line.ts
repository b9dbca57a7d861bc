// The `pgx` command line as every subcommand reads it: the options each takes (--url, --token, --json,
// --help), positionals, durations in flags, where the API is (flag, else env, else the default), and
// usage errors (exit 2, one line pointing to --help). What the commands print is output.ts's.

import { parseArgs, type ParseArgsConfig } from 'node:util';
import { ApiClient } from '../api/client.js';
import { DURATION_EXAMPLES, parseSeconds } from '../durations.js';

/** Where `pgx status|template|db` look for the API unless told: `npm start` passes --api-port 7432. */
export const DEFAULT_API_URL = 'http://127.0.0.1:7432';

export const TARGET_HELP = `Connection options (every command):
  --url URL               the runtime's HTTP API            [env PGX_URL, else ${DEFAULT_API_URL}]
  --token TOKEN           the API's bearer token            [env PGX_API_TOKEN]
  --json                  machine output: the API's JSON as is
  -h, --help              this help
`;

/** A command line that does not make sense: main() prints it with the command's help and exits 2. */
export class UsageError extends Error {
  constructor(
    message: string,
    readonly help: string,
  ) {
    super(message);
    this.name = 'UsageError';
  }
}

const COMMON_OPTIONS = {
  url: { type: 'string' },
  token: { type: 'string' },
  json: { type: 'boolean' },
  help: { type: 'boolean', short: 'h' },
} as const;

type Options = NonNullable<ParseArgsConfig['options']>;

export interface ParsedCommand {
  values: Record<string, string | boolean | undefined>;
  positionals: string[];
  json: boolean;
  help: boolean;
  url: string | undefined;
  token: string | undefined;
}

/** Parses a command's arguments (its own options plus the common ones); bad flags are a UsageError. */
export function parseCommand(argv: string[], help: string, options: Options = {}): ParsedCommand {
  const all = { ...options, ...COMMON_OPTIONS };
  let parsed;
  try {
    parsed = parseArgs({ args: argv, strict: true, allowPositionals: true, options: all });
  } catch (err) {
    // Node's words for an unknown option run to a paragraph about '--'; the option alone says it.
    const unknown = (err as NodeJS.ErrnoException).code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' ? unknownOption(argv, all) : undefined;
    throw new UsageError(unknown !== undefined ? `unknown option ${unknown}` : (err as Error).message, help);
  }
  const values = parsed.values as Record<string, string | boolean | undefined>;
  return {
    values,
    positionals: parsed.positionals,
    json: values.json === true,
    help: values.help === true,
    url: values.url as string | undefined,
    token: values.token as string | undefined,
  };
}

/** The first option in `argv` that `options` does not declare, as written (--bogus, -x). */
function unknownOption(argv: string[], options: Options): string | undefined {
  const { tokens } = parseArgs({ args: argv, strict: false, allowPositionals: true, options, tokens: true });
  for (const t of tokens) {
    if (t.kind === 'option' && !Object.prototype.hasOwnProperty.call(options, t.name) && !Object.values(options).some((o) => o.short === t.name)) return t.rawName;
  }
  return undefined;
}

/** Exactly `n` positionals named `names`, or a UsageError. */
export function positionals(cmd: ParsedCommand, names: string[], help: string): string[] {
  if (cmd.positionals.length < names.length) throw new UsageError(`missing ${names.slice(cmd.positionals.length).join(' ')}`, help);
  if (cmd.positionals.length > names.length) throw new UsageError(`unexpected argument "${cmd.positionals[names.length]}"`, help);
  return cmd.positionals;
}

/** The API client for a command: --url, else PGX_URL, else the default; --token, else PGX_API_TOKEN. */
export function apiClient(cmd: Pick<ParsedCommand, 'url' | 'token'>, env: NodeJS.ProcessEnv = process.env): ApiClient {
  const url = cmd.url ?? nonEmpty(env.PGX_URL) ?? DEFAULT_API_URL;
  if (!/^https?:\/\//i.test(url)) throw new UsageError(`--url ${url}: expected http://HOST:PORT`, TARGET_HELP);
  const token = cmd.token ?? nonEmpty(env.PGX_API_TOKEN?.trim());
  return new ApiClient({ url, token: token ?? null });
}

function nonEmpty(s: string | undefined): string | undefined {
  return s === undefined || s.length === 0 ? undefined : s;
}

/** Seconds in a duration (src/durations.ts: 1h, 90m, 1h30m, 7d, or whole seconds); 'none' -> null. */
export function parseDuration(text: string, flag: string, help: string): number | null {
  if (text === 'none') return null;
  const seconds = parseSeconds(text);
  if (seconds === null || !(seconds > 0)) throw new UsageError(`${flag} ${text}: expected a duration like 1h, 1h30m, 7d (${DURATION_EXAMPLES})`, help);
  return seconds;
}
