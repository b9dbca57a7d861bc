// Where results and docs go: relative to the package root, found above this file (which runs from
// dist/benchmarks/lib/ once compiled); and the directories a benchmark makes for what it starts.

import { chmodSync, existsSync, mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { PgxError } from '../../src/errors.js';

export function packageRoot(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    if (dirname(dir) === dir) throw new PgxError('INTERNAL', 'cannot find the package root', { hint: 'Run the benchmarks from a pgx checkout: npm run bench -- NAME.' });
    dir = dirname(dir);
  }
  return dir;
}

/** A new directory `name` under `parent`, mode 755: PostgreSQL runs as the `pgx` OS user and must reach it. */
export function workSubdir(parent: string, name: string): string {
  const d = join(parent, name);
  mkdirSync(d);
  chmodSync(d, 0o755);
  return d;
}
