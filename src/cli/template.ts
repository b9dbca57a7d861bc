// `pgx template list|create|import|seal|unseal|rename|drop`: templates and snapshots through the runtime's HTTP API.

import path from 'node:path';
import { scriptFromFile } from '../runtime/templates/import.js';
import type { ImportJobBody, TemplateBody } from '../api/contract.js';
import { ApiClientError } from '../api/client.js';
import { PgxError, withHints } from '../errors.js';
import { apiClient, parseCommand, positionals, TARGET_HELP, UsageError } from './command-line.js';
import { inputName, readInputFile } from './input-file.js';
import { count, printJson, printTable } from './output.js';
import { buildHints, dropTemplateHints, keepSnapshotHints, renameTemplateHints, sealHints } from './hints.js';

const TEMPLATE_HELP = `Usage: pgx template <list | create NAME | import NAME | seal NAME | unseal NAME | rename NAME NEW | keep NAME | drop NAME> [options]

  list          the templates and snapshots PGX knows, sealed or not, with their size on disk
                (SIZE as PostgreSQL counts it; SHARED: of the blocks it holds, those shared
                with clones, where the filesystem clones) and the database a snapshot belongs to
  create NAME   build template NAME from a SQL script (--file) in a new database, then seal it
      --file FILE     the script; - reads standard input (required). psql's reading of it:
                      statements, COPY ... FROM stdin data, a pg_dump plain file (its owners
                      and grants left out) or a custom-format one (-Fc, through pg_restore)
      --owner ROLE    the role that owns the template and runs the script    [postgres]
      --unprivileged  never run it as a role with privileges (a superuser, CREATEROLE, ...):
                      without --owner, as a role of the template's own, named like it
      --no-seal       leave it unsealed (seal it later with pgx template seal NAME)
      --replace       rebuild NAME if it exists (its sessions are ended once the script ran)
  import NAME   build template NAME from a copy of a source database (pg_dump, pg_restore), masked
      --from URL      the source: postgresql://user:password@host:port/database (required)
      --mask FILE     SQL that overwrites personal data; its rules, as comments
                      -- pgx:forbid users.email ~ 'regex'   (table and column may be *)
                      are checked after it ran: a value still matching fails the import
      --owner, --unprivileged, --no-seal, --replace as for create; progress goes to standard error
  seal NAME     make database NAME a sealed template: VACUUM FREEZE, no more connections to it,
                databases are minted from it (tdb_NAME__<token>, or pgx db create NAME)
  unseal NAME   open the template for changes again; nothing mints from it until resealed
  rename NAME NEW
                rename the template or snapshot (refused while databases minted from it are alive)
  keep NAME     keep snapshot NAME when its database is dropped, and out of the runtime's
                --snapshot-retention count
      --release       give it back to its database instead (dropped with it, counted again)
  drop NAME     drop the template or snapshot NAME; databases minted from it keep their data
      --force         drop it although databases minted from it are alive (else 55006)

${TARGET_HELP}`;

export async function runTemplate(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, TEMPLATE_HELP, {
    file: { type: 'string' },
    from: { type: 'string' },
    mask: { type: 'string' },
    owner: { type: 'string' },
    unprivileged: { type: 'boolean' },
    'no-seal': { type: 'boolean' },
    replace: { type: 'boolean' },
    force: { type: 'boolean' },
    release: { type: 'boolean' },
  });
  if (cmd.help) {
    process.stdout.write(TEMPLATE_HELP);
    return 0;
  }
  const [sub, ...args] = cmd.positionals;
  const rest = { ...cmd, positionals: args };
  switch (sub) {
    case 'list': {
      positionals(rest, [], TEMPLATE_HELP);
      const items = await apiClient(cmd).listTemplates();
      if (cmd.json) printJson({ items });
      else printTemplates(items);
      return 0;
    }
    case 'create': {
      const [name] = positionals(rest, ['NAME'], TEMPLATE_HELP);
      const file = cmd.values.file as string | undefined;
      if (file === undefined) throw new UsageError('missing --file FILE (the SQL script; - for standard input)', TEMPLATE_HELP);
      const bytes = readInputFile('--file', file, 'Name a SQL script (psql -f style, or a pg_dump file) that creates the template\'s schema; - reads standard input.');
      if (bytes.length === 0) throw new PgxError('INVALID_PARAMETER', `--file ${inputName(file)} is empty`, { hint: 'A template is built by running a SQL script: put the CREATE statements of its schema in the file.' });
      const sql = await scriptFromFile(inputName(file), bytes);
      const t = await withHints(buildHints(), apiClient(cmd).buildTemplate({
        name: name!,
        sql,
        script_name: path.basename(inputName(file)),
        owner: cmd.values.owner as string | undefined,
        ...(cmd.values.unprivileged === true ? { unprivileged: true } : {}),
        seal: cmd.values['no-seal'] !== true,
        replace: cmd.values.replace === true,
      }));
      if (cmd.json) printJson(t);
      else process.stdout.write(`built template ${t.name}${t.sealed ? ` and sealed it (generation ${t.generation})` : ' (not sealed)'}\n`);
      return 0;
    }
    case 'import': {
      const [name] = positionals(rest, ['NAME'], TEMPLATE_HELP);
      const from = cmd.values.from as string | undefined;
      if (from === undefined) throw new UsageError('missing --from URL (the source database)', TEMPLATE_HELP);
      const maskFile = cmd.values.mask as string | undefined;
      const client = apiClient(cmd);
      const started = await client.importTemplate({
        name: name!,
        source_url: from,
        ...(maskFile !== undefined ? { mask: readInputFile('--mask', maskFile, 'Name a SQL file of UPDATE statements that overwrite personal data, with -- pgx:forbid rules (docs/api.md).').toString('utf8') } : {}),
        owner: cmd.values.owner as string | undefined,
        ...(cmd.values.unprivileged === true ? { unprivileged: true } : {}),
        seal: cmd.values['no-seal'] !== true,
        replace: cmd.values.replace === true,
      });
      let shown = '';
      const job = await client.waitForImport(started.id, (j) => {
        const line = progressLine(j);
        if (line !== shown && !cmd.json) process.stderr.write(`${line}\n`);
        shown = line;
      });
      // The job's error, reported as the API would have answered it.
      if (job.phase === 'failed') {
        const failed = new ApiClientError(422, job.error!);
        throw failed.withHint(buildHints()[failed.code]);
      }
      if (cmd.json) printJson(job);
      else process.stdout.write(`imported template ${job.template} from ${job.source}${job.result?.sealed ? ' and sealed it' : ''}\n`);
      return 0;
    }
    case 'seal':
    case 'unseal': {
      const [name] = positionals(rest, ['NAME'], TEMPLATE_HELP);
      const client = apiClient(cmd);
      const t = await withHints(sealHints(name!), sub === 'seal' ? client.seal(name!) : client.unseal(name!));
      if (cmd.json) printJson(t);
      else process.stdout.write(`${sub === 'seal' ? 'sealed' : 'unsealed'} template ${t.name} (generation ${t.generation})\n`);
      return 0;
    }
    case 'keep': {
      const [name] = positionals(rest, ['NAME'], TEMPLATE_HELP);
      const t = await withHints(keepSnapshotHints(), apiClient(cmd).keepSnapshot(name!, cmd.values.release !== true));
      if (cmd.json) printJson(t);
      else process.stdout.write(t.kept ? `snapshot ${t.name} is kept past ${t.snapshot_of}\n` : `snapshot ${t.name} belongs to ${t.snapshot_of} again\n`);
      return 0;
    }
    case 'rename': {
      const [name, to] = positionals(rest, ['NAME', 'NEW'], TEMPLATE_HELP);
      const t = await withHints(renameTemplateHints(name!), apiClient(cmd).renameTemplate(name!, to!));
      if (cmd.json) printJson(t);
      else process.stdout.write(`renamed template ${name} to ${t.name}\n`);
      return 0;
    }
    case 'drop': {
      const [name] = positionals(rest, ['NAME'], TEMPLATE_HELP);
      await withHints(dropTemplateHints(name!), apiClient(cmd).dropTemplate(name!, cmd.values.force === true));
      if (cmd.json) printJson({ name, dropped: true });
      else process.stdout.write(`dropped template ${name}\n`);
      return 0;
    }
    case undefined:
      throw new UsageError('missing subcommand: list, create, import, seal, unseal, rename, keep or drop', TEMPLATE_HELP);
    default:
      throw new UsageError(`unknown subcommand "${sub}": expected list, create, import, seal, unseal, rename, keep or drop`, TEMPLATE_HELP);
  }
}

function printTemplates(items: TemplateBody[]): void {
  printTable(
    ['NAME', 'SEALED', 'SNAPSHOT OF', 'SIZE', 'SHARED', 'SEALED AT', 'GENERATION', 'STRATEGY'],
    items.map((t) => [
      t.name,
      t.sealed ? 'yes' : 'no',
      t.snapshot_of === null ? '-' : `${t.snapshot_of}${t.kept ? ' (kept)' : ''}`,
      t.disk ? megabytes(t.disk.apparent_bytes) : '-',
      t.disk?.shared_bytes == null ? '-' : megabytes(t.disk.shared_bytes),
      t.sealed_at ?? '-',
      String(t.generation),
      t.strategy,
    ]),
    'no templates (seal one with: pgx template seal NAME)',
  );
}

function megabytes(bytes: number): string {
  return `${(bytes / 1048576).toFixed(1)} MB`;
}

function progressLine(j: ImportJobBody): string {
  const mb = (j.bytes / 1048576).toFixed(1);
  switch (j.phase) {
    case 'dumping':
      return `dumping ${j.source}: ${mb} MB`;
    case 'restoring':
      return `restoring: ${j.tables_done}/${count(j.tables_total, 'table')} (${mb} MB dump)`;
    default:
      return j.phase;
  }
}
