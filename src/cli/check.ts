// `pgx check --from URL | --file schema.sql`: can this source database move to a PGX runtime? Reads
// facts about the source (its catalogs, or a schema-only dump), what the runtime's PostgreSQL offers
// (its binaries and profile, no server needed) and answers `compatible` or `needs standard PostgreSQL`
// with reasons and warnings. Exit codes: 0 compatible, 1 needs standard PostgreSQL, 2 the question
// could not be answered (usage, connection, unreadable file, no PostgreSQL binaries).

import { readDatabaseFacts } from '../check/database-facts.js';
import { readDumpFacts } from '../check/dump-facts.js';
import { evaluate, type CheckReport, type Finding } from '../check/rules.js';
import { readRuntimeFacts } from '../check/runtime-facts.js';
import type { SourceFacts } from '../check/source-facts.js';
import { PgxError } from '../errors.js';
import { parsePostgresUrl } from '../postgres-url.js';
import { locatePgBinaries, PG_MAJOR } from '../runtime/postgres/pg-binaries.js';
import { parseCommand, positionals, UsageError } from './command-line.js';
import { inputName, readInputFile } from './input-file.js';
import { printJson } from './output.js';

/** How long pgx check waits for a source to answer, unless --connect-timeout says otherwise. */
const DEFAULT_CONNECT_TIMEOUT_SECONDS = 10;

const CHECK_HELP = `Usage: pgx check (--from URL | --file FILE) [options]

Answers whether a source database can move to a PGX runtime (PostgreSQL ${PG_MAJOR}, the PGX profile, tenants
without superuser): "compatible", or "needs standard PostgreSQL" with the reasons (extensions the
runtime lacks or cannot load, untrusted languages, C functions, a newer server, publications,
subscriptions, event triggers, tablespaces), and warnings that do not stop a move. No runtime needs
to run: the runtime's extensions are read from its PostgreSQL binaries. See docs/compatibility.md.
Exit codes: 0 compatible, 1 needs standard PostgreSQL, 2 no answer (usage, connection, file).

  --from URL              a live source: postgresql://user:password@host:port/database (read-only;
                          a superuser sees everything, others get a warning for what they cannot)
  --file FILE             a schema-only dump instead (pg_dump -s -f FILE); - reads standard input
  --pg-bin DIR            judge against these PostgreSQL ${PG_MAJOR} binaries instead of the embedded ones
  --connect-timeout S     how long to wait for the source to answer              [${DEFAULT_CONNECT_TIMEOUT_SECONDS}]
  --json                  machine output: {verdict, compatible, source, runtime, reasons, warnings}
  -h, --help              this help
`;

export async function runCheck(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, CHECK_HELP, {
    from: { type: 'string' },
    file: { type: 'string' },
    'pg-bin': { type: 'string' },
    'connect-timeout': { type: 'string' },
  });
  if (cmd.help) {
    process.stdout.write(CHECK_HELP);
    return 0;
  }
  positionals(cmd, [], CHECK_HELP);
  if (cmd.url !== undefined || cmd.token !== undefined) throw new UsageError('--url and --token name a runtime\'s API; pgx check needs none (the source is --from URL)', CHECK_HELP);
  const from = cmd.values.from as string | undefined;
  const file = cmd.values.file as string | undefined;
  if ((from === undefined) === (file === undefined)) throw new UsageError('give exactly one of --from URL and --file FILE', CHECK_HELP);
  const timeoutText = (cmd.values['connect-timeout'] as string | undefined) ?? String(DEFAULT_CONNECT_TIMEOUT_SECONDS);
  const connectTimeoutSeconds = Number(timeoutText);
  if (!(connectTimeoutSeconds > 0) || !Number.isFinite(connectTimeoutSeconds)) throw new UsageError(`--connect-timeout ${timeoutText}: expected seconds, e.g. 10`, CHECK_HELP);
  const pgBin = cmd.values['pg-bin'] as string | undefined;

  let report: CheckReport;
  try {
    // The source first: a wrong URL or file fails fast, before the binaries are inspected.
    const facts = from !== undefined ? await readDatabaseFacts(parsePostgresUrl(from, '--from'), { connectTimeoutSeconds }) : readDump(file!);
    const runtime = await readRuntimeFacts(await locatePgBinaries(pgBin === undefined ? {} : { pgBin }));
    report = evaluate(facts, runtime);
  } catch (err) {
    // No answer is exit 2, unlike the other commands' errors (1 is "needs standard PostgreSQL").
    if (!(err instanceof PgxError)) throw err;
    process.stderr.write(`pgx: ${err.message}\n${err.hint ? `hint: ${err.hint}\n` : ''}`);
    return 2;
  }
  if (cmd.json) printJson(report);
  else process.stdout.write(formatReport(report));
  return report.compatible ? 0 : 1;
}

function readDump(file: string): SourceFacts {
  const buf = readInputFile('--file', file, 'Name a schema-only dump made with pg_dump -s -f FILE.');
  const custom = buf.subarray(0, 5).toString('latin1') === 'PGDMP';
  const tar = buf.subarray(257, 262).toString('latin1') === 'ustar';
  if (custom || tar) {
    throw new PgxError('INVALID_PARAMETER', `--file ${file} is a pg_dump archive (${custom ? 'custom' : 'tar'} format), not SQL`, {
      hint: `Make a plain one: pg_dump -s -f schema.sql, or pg_restore -s -f schema.sql ${file}.`,
    });
  }
  return readDumpFacts(buf.toString('utf8'), inputName(file));
}

/** The short human report: the verdict with what was compared, then reasons and warnings with hints. */
function formatReport(r: CheckReport): string {
  const source = `${r.source.source}${r.source.server_version ? ` (PostgreSQL ${r.source.server_version})` : ''}`;
  const lines = [`${r.verdict}: ${source} on a PGX runtime (PostgreSQL ${r.runtime.postgres_version})`];
  const section = (title: string, items: Finding[]): void => {
    if (items.length === 0) return;
    lines.push('', `${title}:`);
    for (const f of items) {
      lines.push(`  - ${f.message}`);
      if (f.hint) lines.push(`    hint: ${f.hint}`);
    }
  };
  section('reasons', r.reasons);
  section('warnings', r.warnings);
  if (r.reasons.length === 0 && r.warnings.length === 0) lines.push('', 'nothing to report: no reasons, no warnings');
  return `${lines.join('\n')}\n`;
}
