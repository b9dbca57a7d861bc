// What the runtime's PostgreSQL offers a source database, read from its binaries and the PGX profile
// without starting a server: the extensions its distribution ships (share/extension/*.control) and
// whether each can actually load (its library's shared-library dependencies resolve on this machine:
// the embedded build lists plperl, but its plperl.so needs a libperl.so.5.26 few machines have), the
// libraries in its $libdir, whether it was built with ICU, and the settings of profile/pgx.conf.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { readdir, readFile } from 'node:fs/promises';
import { basename, join } from 'node:path';
import { promisify } from 'node:util';
import { PgxError } from '../errors.js';
import type { PgBinaries } from '../runtime/postgres/pg-binaries.js';
import { profilePath } from '../runtime/postgres/data-directory.js';

const execFileAsync = promisify(execFile);

export interface RuntimeExtension {
  name: string;
  /** null when CREATE EXTENSION can work; else why not (a missing library, a required extension). */
  unavailable: string | null;
  /** CREATE EXTENSION needs a superuser: the control file says superuser (the default) and not trusted. */
  needsSuperuser: boolean;
  requires: string[];
}

export interface RuntimeFacts {
  /** As `postgres --version` reports it, e.g. "18.4". */
  version: string;
  major: number;
  binDir: string;
  /** Where the .control files are. */
  extensionDir: string;
  /** PostgreSQL's $libdir (pkglibdir). */
  libDir: string;
  extensions: Map<string, RuntimeExtension>;
  /** Loadable module names in $libdir, without `.so`. */
  libraries: Set<string>;
  /** The server links ICU, so ICU collations work; null when it could not be told (no ldd). */
  icu: boolean | null;
  /** The settings profile/pgx.conf sets; PostgreSQL's defaults for what it leaves alone are in setting(). */
  settings: Map<string, string>;
  profileFile: string;
}

/** PostgreSQL's defaults for the settings the rules read, where the profile does not set them. */
const POSTGRES_DEFAULTS: Record<string, string> = {
  wal_level: 'replica',
  max_logical_replication_workers: '4',
  max_prepared_transactions: '0',
  shared_preload_libraries: '',
};

/** A setting as the runtime starts with it: the profile's, else PostgreSQL's default. */
export function setting(rt: RuntimeFacts, name: string): string {
  return rt.settings.get(name) ?? POSTGRES_DEFAULTS[name] ?? '';
}

export async function readRuntimeFacts(bin: PgBinaries): Promise<RuntimeFacts> {
  const major = Number(bin.version.split('.')[0]);
  const { extensionDir, libDir } = await installDirs(bin.binDir, major);
  const libraries = new Set((await readdir(libDir)).filter((f) => f.endsWith('.so')).map((f) => f.slice(0, -3)));
  const controls = (await readdir(extensionDir)).filter((f) => f.endsWith('.control'));

  const parsed = await Promise.all(
    controls.map(async (f) => {
      const name = f.slice(0, -'.control'.length);
      const fields = parseControl(await readFile(join(extensionDir, f), 'utf8'));
      // module_pathname names the library; extensions without one (intagg) are plain SQL, unless a
      // library carries their name.
      const module = fields.get('module_pathname') ?? (libraries.has(name) ? `$libdir/${name}` : undefined);
      return {
        name,
        library: module === undefined ? null : basename(module.replace(/^\$libdir\//, '')).replace(/\.so$/, ''),
        needsSuperuser: fields.get('superuser') !== 'false' && fields.get('trusted') !== 'true',
        requires: (fields.get('requires') ?? '').split(',').map((s) => s.trim()).filter(Boolean),
      };
    }),
  );

  const postgres = join(bin.binDir, 'postgres');
  const modules = [...new Set(parsed.map((e) => e.library).filter((l): l is string => l !== null && libraries.has(l)))];
  const missing = await unresolvedDependencies([postgres, ...modules.map((m) => join(libDir, `${m}.so`))]);

  const own = new Map<string, string | null>();
  for (const e of parsed) {
    let why: string | null = null;
    if (e.library !== null && !libraries.has(e.library)) why = `its library ${e.library}.so is not in ${libDir}`;
    else if (e.library !== null) {
      const libs = missing?.get(join(libDir, `${e.library}.so`)) ?? [];
      if (libs.length > 0) why = `its library ${e.library}.so needs ${libs.join(', ')}, which this machine lacks`;
    }
    own.set(e.name, why);
  }
  const extensions = new Map<string, RuntimeExtension>();
  const resolve = (name: string, seen: Set<string>): string | null => {
    const e = parsed.find((p) => p.name === name);
    if (!e) return `it requires ${name}, which is not shipped`;
    if (own.get(name)) return own.get(name)!;
    for (const r of e.requires) {
      if (seen.has(r)) continue;
      const why = resolve(r, new Set([...seen, r]));
      if (why !== null) return why.startsWith('it requires') ? why : `it requires ${r}, which cannot load: ${why}`;
    }
    return null;
  };
  for (const e of parsed) {
    extensions.set(e.name, { name: e.name, unavailable: resolve(e.name, new Set([e.name])), needsSuperuser: e.needsSuperuser, requires: e.requires });
  }

  const profileFile = profilePath();
  const settings = parseProfile(await readFile(profileFile, 'utf8'));
  return {
    version: bin.version,
    major,
    binDir: bin.binDir,
    extensionDir,
    libDir,
    extensions,
    libraries,
    icu: missing === null ? null : (missing.get(`${postgres}#icu`)?.length ?? 0) > 0,
    settings,
    profileFile,
  };
}

/**
 * share/extension and $libdir of an install: pg_config's answer if it sits next to postgres (Debian's
 * /usr/lib/postgresql/18/bin), else the layouts PostgreSQL itself finds relative to its binary: the
 * embedded package's ../share/postgresql and ../lib/postgresql, Debian's /usr/share/postgresql/18.
 */
async function installDirs(binDir: string, major: number): Promise<{ extensionDir: string; libDir: string }> {
  const shares = [join(binDir, '../share/postgresql'), join(binDir, '../share'), join(binDir, '../../../share/postgresql', String(major)), `/usr/share/postgresql/${major}`];
  const libs = [join(binDir, '../lib/postgresql'), join(binDir, '../lib')];
  const pgConfig = join(binDir, 'pg_config');
  if (existsSync(pgConfig)) {
    try {
      const { stdout } = await execFileAsync(pgConfig, ['--sharedir', '--pkglibdir'], { timeout: 10_000 });
      const [share, lib] = stdout.trim().split('\n');
      if (share) shares.unshift(share.trim());
      if (lib) libs.unshift(lib.trim());
    } catch {
      // Fall back to the layouts above.
    }
  }
  const extensionDir = shares.map((s) => join(s, 'extension')).find((d) => existsSync(join(d, 'plpgsql.control')));
  const libDir = libs.find((d) => existsSync(join(d, 'plpgsql.so')));
  if (extensionDir === undefined || libDir === undefined) {
    throw new PgxError('CONFIG_INVALID', `cannot find the extensions of the PostgreSQL in ${binDir} (no plpgsql.control / plpgsql.so near it)`, {
      hint: 'Pass --pg-bin the bin directory of a complete PostgreSQL 18 install, or leave it out to use the embedded binaries.',
    });
  }
  return { extensionDir, libDir };
}

/** key = 'value' lines of a .control file (comments and blank lines skipped). */
function parseControl(text: string): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\s*([a-z_]+)\s*=\s*(?:'((?:[^']|'')*)'|(\S+))/i.exec(line);
    if (m) fields.set(m[1]!.toLowerCase(), (m[2] ?? m[3]!).replace(/''/g, "'"));
  }
  return fields;
}

/** name = value lines of a postgresql.conf-style file. */
function parseProfile(text: string): Map<string, string> {
  const settings = new Map<string, string>();
  for (const line of text.split('\n')) {
    const m = /^\s*([a-z_.]+)\s*=?\s*(?:'((?:[^']|'')*)'|([^\s#]+))/i.exec(line);
    if (m && !line.trim().startsWith('#')) settings.set(m[1]!.toLowerCase(), (m[2] ?? m[3]!).replace(/''/g, "'"));
  }
  return settings;
}

/**
 * For each file, the shared libraries it needs that the dynamic loader cannot find, as `ldd` reports
 * them (one ldd run for all files); `<postgres>#icu` lists the ICU libraries postgres links. null when
 * ldd cannot run here: every library then counts as loadable.
 */
async function unresolvedDependencies(files: string[]): Promise<Map<string, string[]> | null> {
  let stdout: string;
  try {
    ({ stdout } = await execFileAsync('ldd', files, { timeout: 30_000, maxBuffer: 16 * 1024 * 1024 }));
  } catch (err) {
    // ldd exits non-zero when one file is not dynamic; its report of the others is still complete.
    const out = (err as { stdout?: string }).stdout;
    if (typeof out !== 'string' || out.length === 0) return null;
    stdout = out;
  }
  const result = new Map<string, string[]>();
  let current: string | null = null;
  for (const line of stdout.split('\n')) {
    const header = /^(\S.*):$/.exec(line);
    if (header) {
      current = header[1]!;
      result.set(current, []);
      continue;
    }
    if (current === null) continue;
    const notFound = /^\s+(\S+) => not found/.exec(line);
    if (notFound) result.get(current)!.push(notFound[1]!);
    if (current === files[0] && /^\s+libicu/.test(line)) {
      const key = `${current}#icu`;
      result.set(key, [...(result.get(key) ?? []), line.trim().split(/\s/)[0]!]);
    }
  }
  return result;
}

