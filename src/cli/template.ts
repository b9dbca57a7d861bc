// `pgx template list|create NAME|seal NAME|unseal NAME`: templates through the runtime's HTTP API.

import { readFileSync } from 'node:fs';
import type { TemplateBody } from '../api/contract.js';
import { apiClient, parseCommand, positionals, printJson, printTable, TARGET_HELP, UsageError } from './api-target.js';

export const TEMPLATE_HELP = `Usage: pgx template <list | create NAME | seal NAME | unseal NAME> [options]

  list          the templates PGX knows, sealed or not
  create NAME   build template NAME from a SQL script (--file) in a new database, then seal it
      --file FILE     the script; - reads standard input (required)
      --owner ROLE    the role that owns the template and runs the script    [postgres]
      --no-seal       leave it unsealed (seal it later with pgx template seal NAME)
      --replace       rebuild NAME if it exists (its sessions are ended once the script ran)
  seal NAME     make database NAME a sealed template: VACUUM FREEZE, no more connections to it,
                databases are minted from it (tdb_NAME__<token>, or pgx db create NAME)
  unseal NAME   open the template for changes again; nothing mints from it until resealed

${TARGET_HELP}`;

export async function runTemplate(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, TEMPLATE_HELP, {
    file: { type: 'string' },
    owner: { type: 'string' },
    'no-seal': { type: 'boolean' },
    replace: { type: 'boolean' },
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
      const sql = readFileSync(file === '-' ? 0 : file, 'utf8');
      const t = await apiClient(cmd).buildTemplate({
        name: name!,
        sql,
        owner: cmd.values.owner as string | undefined,
        seal: cmd.values['no-seal'] !== true,
        replace: cmd.values.replace === true,
      });
      if (cmd.json) printJson(t);
      else process.stdout.write(`built template ${t.name}${t.sealed ? ` and sealed it (generation ${t.generation})` : ' (not sealed)'}\n`);
      return 0;
    }
    case 'seal':
    case 'unseal': {
      const [name] = positionals(rest, ['NAME'], TEMPLATE_HELP);
      const client = apiClient(cmd);
      const t = sub === 'seal' ? await client.seal(name!) : await client.unseal(name!);
      if (cmd.json) printJson(t);
      else process.stdout.write(`${sub === 'seal' ? 'sealed' : 'unsealed'} template ${t.name} (generation ${t.generation})\n`);
      return 0;
    }
    case undefined:
      throw new UsageError('missing subcommand: list, create, seal or unseal', TEMPLATE_HELP);
    default:
      throw new UsageError(`unknown subcommand "${sub}": expected list, create, seal or unseal`, TEMPLATE_HELP);
  }
}

function printTemplates(items: TemplateBody[]): void {
  printTable(
    ['NAME', 'SEALED', 'SEALED AT', 'GENERATION', 'STRATEGY'],
    items.map((t) => [t.name, t.sealed ? 'yes' : 'no', t.sealed_at ?? '-', String(t.generation), t.strategy]),
    'no templates (seal one with: pgx template seal NAME)',
  );
}
