// Where results and docs go: relative to the package root, found above this file (which runs from
// dist/benchmarks/lib/ once compiled).

import { existsSync } from 'node:fs';
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
