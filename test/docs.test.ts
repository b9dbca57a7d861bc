// The docs say what the code does, where a test can tell: every `pgx` command docs/operations.md lists
// exists (its --help answers) and `pgx --help` names it; every option of `pgx start` the docs list
// exists in its help, and every option in the help is documented; every SQLSTATE docs/limits.md names
// is one the code raises or passes on from PostgreSQL in a test that asserts it.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { runCommand } from './helpers/commands.js';

const root = path.resolve(path.dirname(new URL(import.meta.url).pathname), '../..');
const read = (file: string): string => fs.readFileSync(path.join(root, file), 'utf8');

function pgx(args: string[]): Promise<{ code: number | null; stdout: string; stderr: string }> {
  return runCommand(process.execPath, [path.join(root, 'bin/pgx.js'), ...args], { cwd: root, timeoutMs: 30_000 });
}

/** Every .ts file under `dir`, recursively, as one string each. */
function sources(dir: string): string[] {
  const out: string[] = [];
  for (const entry of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
    const rel = path.join(dir, entry.name);
    if (entry.isDirectory()) out.push(...sources(rel));
    else if (entry.name.endsWith('.ts')) out.push(read(rel));
  }
  return out;
}

describe('docs: what they say the code does', function () {
  this.timeout(60_000);
  const operations = read('docs/operations.md');

  it('every command in docs/operations.md answers --help, and pgx --help names it', async function () {
    const commands = new Set<string>();
    for (const m of operations.matchAll(/^\| `pgx ([a-z]+)((?: [a-z][a-z-]*)?)/gm)) commands.add(`${m[1]}${m[2]}`);
    expect(commands.size).to.be.greaterThan(10);
    const top = (await pgx(['--help'])).stdout;
    for (const command of commands) {
      const [name, sub] = command.split(' ');
      expect(top, `pgx --help names ${name}`).to.match(new RegExp(`^  ${name}\\s`, 'm'));
      const help = await pgx([name!, '--help']);
      expect(help.code, `pgx ${name} --help`).to.equal(0);
      if (sub !== undefined) {
        expect(help.stdout, `pgx ${name} --help lists ${sub}`).to.match(new RegExp(`\\b${sub}\\b`));
        expect(top, `pgx --help lists ${name} ${sub}`).to.match(new RegExp(`\\b${sub}\\b`));
      }
    }
  });

  it('every pgx start option in docs/operations.md is in pgx start --help, and the other way round', async function () {
    const help = (await pgx(['start', '--help'])).stdout;
    // An option row's first cell may name more than one (`--tls-cert FILE`, `--tls-key FILE`).
    const rows = [...operations.matchAll(/^\| (`--[^|]*)\|/gm)].map((m) => m[1]!);
    const documented = new Set(rows.flatMap((cell) => [...cell.matchAll(/`(--[a-z-]+)/g)].map((m) => m[1]!)));
    const offered = new Set([...help.matchAll(/^ {2}(?:-c NAME=VALUE|(--[a-z-]+))/gm)].map((m) => m[1]).filter((f): f is string => f !== undefined));
    expect(documented.size).to.be.greaterThan(20);
    for (const flag of documented) expect(offered.has(flag), `${flag} in pgx start --help`).to.equal(true);
    for (const flag of offered) if (flag !== '--help') expect(documented.has(flag), `${flag} in docs/operations.md`).to.equal(true);
  });

  it('every SQLSTATE docs/limits.md names is raised by the code or asserted by a test', function () {
    const limits = read('docs/limits.md');
    const named = new Set([...limits.matchAll(/`([0-9A-Z]{5})\b/g)].map((m) => m[1]!).filter((s) => /[0-9]/.test(s)));
    expect(named.size).to.be.greaterThan(5);
    // Code, not comments: a SQLSTATE a comment mentions is not one anything raises or checks.
    const code = [...sources('src'), ...sources('test')]
      .join('\n')
      .split('\n')
      .filter((line) => !/^\s*(\/\/|\*|\/\*)/.test(line))
      .join('\n');
    for (const sqlstate of named) expect(new RegExp(`\\b${sqlstate}\\b`).test(code), `${sqlstate} in src/ or a test`).to.equal(true);
  });
});
