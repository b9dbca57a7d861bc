// `pgx doctor`: what this machine gives a runtime, checked rather than assumed: Node.js, the PostgreSQL
// 18 binaries, whether the data directory's filesystem clones (copy-on-write databases), the memory
// limit of this cgroup, the client tools, which source versions `template import` can read (through
// the local pg_dump, or the logical copy for newer ones), and a running runtime if one answers at --url.

import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { promisify } from 'node:util';
import { cgroupLimit } from '../runtime/postgres/cgroup.js';
import { locatePgBinaries, PG_MAJOR } from '../runtime/postgres/pg-binaries.js';
import { probeStorage } from '../runtime/postgres/storage-probe.js';
import { dumpMajor, findDumpToolsOrNone } from '../runtime/templates/import.js';
import { LOGICAL_COPY_MIN_MAJOR } from '../runtime/templates/logical-copy.js';
import { apiClient, parseCommand, positionals, TARGET_HELP } from './command-line.js';
import { printJson } from './output.js';

const DOCTOR_HELP = `Usage: pgx doctor [--data-dir DIR] [--pg-bin DIR] [options]

Checks what this machine gives a PGX runtime: Node.js, the PostgreSQL ${PG_MAJOR} server binaries, whether
the data directory's filesystem can clone files (copy-on-write databases: XFS with reflink, btrfs,
OpenZFS >= 2.2 with block cloning), the cgroup memory limit, psql, which source PostgreSQL versions
pgx template import can read here, and a runtime at --url if one runs.
Exits 1 if a check fails.

  --data-dir DIR          the data directory to check (or where it would be made)  [.pgx/data]
  --pg-bin DIR            check these PostgreSQL binaries instead of the embedded ones

${TARGET_HELP}`;

type DoctorVerdict = 'ok' | 'warn' | 'fail';

interface Check {
  name: string;
  verdict: DoctorVerdict;
  detail: string;
}

const run = promisify(execFile);

export async function runDoctor(argv: string[]): Promise<number> {
  const cmd = parseCommand(argv, DOCTOR_HELP, { 'data-dir': { type: 'string' }, 'pg-bin': { type: 'string' } });
  if (cmd.help) {
    process.stdout.write(DOCTOR_HELP);
    return 0;
  }
  positionals(cmd, [], DOCTOR_HELP);
  const dataDir = path.resolve((cmd.values['data-dir'] as string | undefined) ?? '.pgx/data');
  const pgBin = cmd.values['pg-bin'] as string | undefined;
  const checks = await Promise.all([
    checkNode(),
    checkPostgres(pgBin),
    checkStorage(dataDir),
    checkMemoryLimit(),
    checkPsql(),
    checkImport(),
    checkRuntime(cmd),
  ]);
  if (cmd.json) printJson({ ok: !checks.some((c) => c.verdict === 'fail'), checks });
  else {
    const width = Math.max(...checks.map((c) => c.name.length));
    for (const c of checks) process.stdout.write(`${c.verdict.padEnd(4)}  ${c.name.padEnd(width)}  ${c.detail}\n`);
  }
  return checks.some((c) => c.verdict === 'fail') ? 1 : 0;
}

async function checkNode(): Promise<Check> {
  const major = Number(process.versions.node.split('.')[0]);
  return major >= 20
    ? { name: 'node', verdict: 'ok', detail: `Node.js ${process.versions.node}` }
    : { name: 'node', verdict: 'fail', detail: `Node.js ${process.versions.node}: PGX needs 20 or newer` };
}

async function checkPostgres(pgBin: string | undefined): Promise<Check> {
  try {
    const b = await locatePgBinaries(pgBin === undefined ? {} : { pgBin });
    const major = Number(b.version.split('.')[0]);
    if (major !== PG_MAJOR) return { name: 'postgres', verdict: 'fail', detail: `PostgreSQL ${b.version} in ${b.binDir}: PGX runs PostgreSQL ${PG_MAJOR}` };
    return { name: 'postgres', verdict: 'ok', detail: `PostgreSQL ${b.version} in ${b.binDir}` };
  } catch (err) {
    return { name: 'postgres', verdict: 'fail', detail: (err as Error).message };
  }
}

/** Probes the data directory, or the nearest directory above it that exists (where it would be made). */
async function checkStorage(dataDir: string): Promise<Check> {
  let dir = dataDir;
  while (!existsSync(dir) && path.dirname(dir) !== dir) dir = path.dirname(dir);
  try {
    const s = await probeStorage(dir);
    return { name: 'storage', verdict: s.clone ? 'ok' : 'warn', detail: `${dir}: ${s.detail}` };
  } catch (err) {
    return { name: 'storage', verdict: 'fail', detail: `${dir}: cannot probe (${(err as Error).message}); is it writable?` };
  }
}

/**
 * The tightest cgroup memory limit over this process's cgroup and its ancestors (v2 memory.max, v1
 * memory.limit_in_bytes), as the runtime reads it: its memory limits derive from it.
 */
async function checkMemoryLimit(): Promise<Check> {
  const limit = await cgroupLimit();
  if (limit !== null) {
    return { name: 'memory', verdict: 'ok', detail: `cgroup memory limit ${Math.round(limit.bytes / 1048576)} MB (cgroup v${limit.version}, ${limit.dir})` };
  }
  if (existsSync('/sys/fs/cgroup/memory.max') || existsSync('/sys/fs/cgroup/memory') || existsSync('/proc/self/cgroup')) {
    return { name: 'memory', verdict: 'ok', detail: 'no cgroup memory limit on this process or its parents' };
  }
  return { name: 'memory', verdict: 'warn', detail: 'no cgroup memory controller found; the runtime cannot see a container limit' };
}

async function checkPsql(): Promise<Check> {
  try {
    const { stdout } = await run('psql', ['--version']);
    return { name: 'psql', verdict: 'ok', detail: stdout.trim() };
  } catch {
    return { name: 'psql', verdict: 'warn', detail: 'psql is not on PATH (pgx psql NAME and the quickstart use it): apt-get install postgresql-client' };
  }
}

const NEWER_PG_DUMP = `for pg_dump imports of newer sources install postgresql-client-${PG_MAJOR} from the PostgreSQL apt repository (apt.postgresql.org; Debian's own stops at 15 on bookworm)`;

/**
 * Which sources `template import` reads: those up to the local pg_dump's major through pg_dump, newer
 * ones (from LOGICAL_COPY_MIN_MAJOR) through the logical copy, which carries less (docs/operations.md).
 */
async function checkImport(): Promise<Check> {
  const tools = findDumpToolsOrNone();
  const logical = (from: number): string => `PostgreSQL ${from}-${PG_MAJOR} through the logical copy (no pg_dump needed; it refuses sources with partitions, materialized views, policies and other kinds it does not carry)`;
  if (tools === null) {
    return { name: 'import', verdict: 'warn', detail: `no pg_dump found: sources on ${logical(LOGICAL_COPY_MIN_MAJOR)}; older sources and the rest need pg_dump: ${NEWER_PG_DUMP}` };
  }
  const major = dumpMajor(tools);
  const through = `sources up to PostgreSQL ${major} through pg_dump ${major} (${tools.pgDump})`;
  if (major >= PG_MAJOR) return { name: 'import', verdict: 'ok', detail: through };
  return { name: 'import', verdict: 'ok', detail: `${through}; ${logical(Math.max(major + 1, LOGICAL_COPY_MIN_MAJOR))}; ${NEWER_PG_DUMP}` };
}

async function checkRuntime(cmd: Parameters<typeof apiClient>[0]): Promise<Check> {
  const client = apiClient(cmd);
  try {
    const s = await client.status();
    return {
      name: 'runtime',
      verdict: 'ok',
      detail: `pid ${s.runtime.pid}, PostgreSQL ${s.runtime.postgres_version}, ${s.databases.ephemeral} minted databases, storage ${s.storage.filesystem} (${s.storage.clone ? 'clones' : 'no clones'})`,
    };
  } catch (err) {
    return { name: 'runtime', verdict: 'warn', detail: `no runtime answered: ${(err as Error).message}` };
  }
}
