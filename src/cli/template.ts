// `pgx template list|seal NAME|unseal NAME`: templates through the runtime's HTTP API.

import type { TemplateBody } from '../api/contract.js';
import { apiClient, parseCommand, positionals, printJson, printTable, TARGET_HELP, UsageError } from './api-target.js';

export const TEMPLATE_HELP = `Usage: pgx template <list | seal NAME | unseal NAME> [options]

  list          the templates PGX knows, sealed or not
  seal NAME     make database NAME a sealed template: VACUUM FREEZE, no more connections to it,
                databases are minted from it (tdb_NAME__<token>, or pgx db create NAME)
  unseal NAME   open the template for changes again; nothing mints from it until resealed

${TARGET_HELP}`;

export async function runTemplate(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, TEMPLATE_HELP);
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
      throw new UsageError('missing subcommand: list, seal or unseal', TEMPLATE_HELP);
    default:
      throw new UsageError(`unknown subcommand "${sub}": expected list, seal or unseal`, TEMPLATE_HELP);
  }
}

function printTemplates(items: TemplateBody[]): void {
  printTable(
    ['NAME', 'SEALED', 'SEALED AT', 'GENERATION', 'STRATEGY'],
    items.map((t) => [t.name, t.sealed ? 'yes' : 'no', t.sealed_at ?? '-', String(t.generation), t.strategy]),
    'no templates (seal one with: pgx template seal NAME)',
  );
}
