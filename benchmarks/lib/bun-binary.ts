// Where the Bun binary is: the optional npm package @oven/bun-linux-x64 ships it, and it is found the
// way Node finds any package (require.resolve of its package.json), never at a fixed path. Used by the
// overhead benchmark's Bun targets (bun-relay, pgx-bun; docs/benchmarks.md, "Bun as the engine's runtime"), and by the test that runs
// accept-onread.ts under Bun.

import { accessSync, constants } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { PgxError } from '../../src/errors.js';

/** The package that ships the Bun binary for this platform (an optional dependency). */
const BUN_PACKAGE = '@oven/bun-linux-x64';

/** The absolute path of the Bun binary; CONFIG_INVALID with a hint when the package is absent. */
export function bunBinary(): string {
  const pkg = BUN_PACKAGE;
  let dir: string;
  try {
    dir = path.dirname(createRequire(import.meta.url).resolve(`${pkg}/package.json`));
  } catch {
    throw new PgxError('CONFIG_INVALID', `Bun is not installed: the package ${pkg} is not in node_modules`, {
      hint: 'Install it (npm install --include=optional; it exists for Linux x64 with glibc), or leave Bun out: PGX runs on Node.js.',
    });
  }
  const binary = path.join(dir, 'bin', 'bun');
  try {
    accessSync(binary, constants.X_OK);
  } catch {
    throw new PgxError('CONFIG_INVALID', `Bun is not usable: ${binary} is missing or not executable`, {
      hint: `Reinstall the package ${pkg}, or leave Bun out: PGX runs on Node.js.`,
    });
  }
  return binary;
}
