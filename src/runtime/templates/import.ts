// Templates from a source database: pg_dump of the source (schema and data), pg_restore into the
// template's scratch database as its owner, a masking script that overwrites personal data, a check
// that no value still matches a masking rule (mask-rules.ts), then the usual rename and seal
// (templates.ts). An import runs as a job: the HTTP API answers at once with its id, and the job's
// progress (phase, bytes dumped, tables restored) is read while it runs. A source newer than the
// local pg_dump (or a machine without one) is copied over the protocol instead (logical-copy.ts).
//
// The source URL carries a password (user:password@ or ?password=): it is given to pg_dump through
// PGPASSWORD, never on a command line (other users can read those in ps), and never logged; other
// query values are masked where the source is shown (postgres-url.ts).

import { execFileSync, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { createWriteStream, existsSync, promises as fsp, readdirSync, realpathSync } from 'node:fs';
import path from 'node:path';
import type { Clock } from '../../clock.js';
import { PgxError } from '../../errors.js';
import { parsePostgresUrl, type PostgresUrl } from '../../postgres-url.js';
import type { Logger } from '../../log.js';
import { logicalCopy, sourceMajor } from './logical-copy.js';
import { checkMaskRules, parseMaskRules } from './mask-rules.js';
import type { TemplateRecord } from '../databases/records.js';
import type { SqlClient } from '../postgres/sql-client.js';
import { runScript } from './script-build.js';

export type ImportPhase = 'queued' | 'dumping' | 'restoring' | 'masking' | 'checking' | 'sealing' | 'done' | 'failed';

export interface ImportRequest {
  /** The template to make. */
  name: string;
  /** postgresql://user:password@host:port/database of the source. */
  sourceUrl: string;
  /** SQL that masks personal data, with `-- pgx:forbid` rules (mask-rules.ts); none: copied as is. */
  mask?: string | undefined;
  owner?: string | undefined;
  unprivileged?: boolean | undefined;
  seal?: boolean | undefined;
  replace?: boolean | undefined;
}

export interface ImportJob {
  id: string;
  template: string;
  /** The source without its password. */
  source: string;
  phase: ImportPhase;
  /** Bytes of dump written so far. */
  bytes: number;
  tablesDone: number;
  /** Known once the dump is complete (0 before). */
  tablesTotal: number;
  startedAt: number;
  finishedAt: number | null;
  result: TemplateRecord | null;
  error: PgxError | null;
}

export interface ImportTarget {
  /** Where PostgreSQL listens (its private socket) for pg_restore. */
  socketDir: string;
  port: number;
  /** Room for the dump file while it is restored (the data directory: same disk, same owner). */
  workDir: string;
  connectAs: (database: string, user: string) => Promise<SqlClient>;
}

/** Jobs kept for reading after they finished. */
const KEEP_JOBS = 100;

export class TemplateImports {
  private readonly jobs = new Map<string, ImportJob>();

  constructor(
    private readonly target: ImportTarget,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {}

  get(id: string): ImportJob | undefined {
    return this.jobs.get(id);
  }

  /**
   * Starts an import; `build` is Templates.build with the fill step this module provides. Bad
   * requests (no pg_dump, bad URL, bad rules) are refused here, before a job exists.
   */
  start(req: ImportRequest, build: (fill: (database: string, owner: string) => Promise<void>) => Promise<TemplateRecord>): ImportJob {
    const source = parseSource(req.sourceUrl, this.target.socketDir);
    const rules = parseMaskRules(req.mask ?? '');
    const tools = findDumpToolsOrNone();
    const job: ImportJob = {
      id: randomBytes(8).toString('hex'),
      template: req.name,
      source: source.display,
      phase: 'queued',
      bytes: 0,
      tablesDone: 0,
      tablesTotal: 0,
      startedAt: this.clock.now(),
      finishedAt: null,
      result: null,
      error: null,
    };
    this.remember(job);
    const log = this.log.child({ import: job.id, template: req.name, source: source.display });
    const fill = async (database: string, owner: string): Promise<void> => {
      const file = path.join(this.target.workDir, `pgx-import-${job.id}.dump`);
      try {
        job.phase = 'dumping';
        if (await needsLogicalCopy(tools, req.sourceUrl)) {
          log.info('import-logical-copy', { pg_dump: tools?.version ?? 'none' });
          job.phase = 'restoring';
          const progress = { tablesTotal: (n: number) => (job.tablesTotal = n), tableDone: () => job.tablesDone++, bytes: (n: number) => (job.bytes += n) };
          await logicalCopy(req.sourceUrl, { socketDir: this.target.socketDir, port: this.target.port, database, user: owner }, progress);
        } else await this.dumpAndRestore(tools!, source, file, database, owner, job, log);
      } finally {
        await fsp.rm(file, { force: true });
      }
      if (req.mask !== undefined) {
        job.phase = 'masking';
        await runScript(this.target.connectAs, database, owner, req.mask, `the masking script for template "${req.name}"`);
      }
      job.phase = 'checking';
      await this.check(database, owner, rules);
      job.phase = 'sealing';
    };
    log.info('import-started', {});
    build(fill).then(
      (record) => {
        Object.assign(job, { phase: 'done', result: record, finishedAt: this.clock.now() });
        log.info('import-done', { bytes: job.bytes, tables: job.tablesTotal, ms: job.finishedAt! - job.startedAt });
      },
      (err: unknown) => {
        const error = err instanceof PgxError ? err : new PgxError('INTERNAL', `import failed: ${(err as Error).message}`, { cause: err });
        Object.assign(job, { phase: 'failed', error, finishedAt: this.clock.now() });
        log.warn('import-failed', { phase: job.phase, err: error.message });
      },
    );
    return job;
  }

  private remember(job: ImportJob): void {
    this.jobs.set(job.id, job);
    for (const [id, j] of this.jobs) {
      if (this.jobs.size <= KEEP_JOBS) break;
      if (j.finishedAt !== null) this.jobs.delete(id);
    }
  }

  private async dumpAndRestore(tools: DumpTools, source: Source, file: string, database: string, owner: string, job: ImportJob, log: Logger): Promise<void> {
    await this.dump(tools, source, file, job);
    job.tablesTotal = await countTableData(tools, file);
    log.info('import-dumped', { bytes: job.bytes, tables: job.tablesTotal });
    job.phase = 'restoring';
    await this.restore(tools, file, database, owner, job);
  }

  private async dump(tools: DumpTools, source: Source, file: string, job: ImportJob): Promise<void> {
    const args = ['--format=custom', '--no-owner', '--no-privileges', '--dbname', source.url];
    const out = createWriteStream(file, { mode: 0o600 });
    const { code, stderr } = await runTool(tools.pgDump, args, source.env, (child) => {
      child.stdout!.on('data', (chunk: Buffer) => (job.bytes += chunk.length));
      child.stdout!.pipe(out);
    });
    await new Promise<void>((resolve) => (out.closed ? resolve() : out.once('close', () => resolve())));
    if (code !== 0) {
      throw new PgxError('INVALID_PARAMETER', `pg_dump of ${source.display} failed: ${lastLines(scrub(stderr, source))}`, {
        hint: `Check the source URL and that ${tools.pgDump} (${tools.version}) is at least the source server's version.`,
      });
    }
  }

  private async restore(tools: DumpTools, file: string, database: string, owner: string, job: ImportJob): Promise<void> {
    const args = ['--no-owner', '--no-privileges', '--exit-on-error', '--verbose', '--host', this.target.socketDir, '--port', String(this.target.port), '--username', owner, '--dbname', database, file];
    let pending = '';
    const { code, stderr } = await runTool(tools.pgRestore, args, { PGAPPNAME: 'pgx-import' }, (child) => {
      child.stderr!.on('data', (chunk: Buffer) => {
        const lines = (pending + chunk.toString('utf8')).split('\n');
        pending = lines.pop() ?? '';
        for (const line of lines) if (/processing data for table/.test(line)) job.tablesDone++;
      });
    });
    if (code !== 0) {
      throw new PgxError('SCRIPT_FAILED', `restoring the dump into template "${job.template}" failed: ${lastLines(stderr.split('\n').filter((l) => !/^pg_restore: (processing|creating|executing|connecting|implied)/.test(l)).join('\n'))}`, {
        sqlstate: '58000',
        hint: 'The source may use an extension or feature this runtime lacks; `pgx check` lists them.',
      });
    }
  }

  private async check(database: string, owner: string, rules: ReturnType<typeof parseMaskRules>): Promise<void> {
    if (rules.length === 0) return;
    const client = await this.target.connectAs(database, owner);
    try {
      const violations = await checkMaskRules(client, rules);
      if (violations.length > 0) {
        throw new PgxError('SCRIPT_FAILED', `masking left data that a rule forbids: ${violations.map((v) => `${v.column} (${v.rows} rows)`).join(', ')}`, {
          sqlstate: '23514',
          detail: violations.map((v) => `${v.column}: ${v.rows} rows match ${v.rule}`).join('\n'),
          hint: 'Extend the masking script to overwrite those values; nothing was imported.',
        });
      }
    } finally {
      await client.close();
    }
  }
}

interface Source {
  /** The URL without its password (userinfo or ?password=): pg_dump's command line. */
  url: string;
  /** Without its password, other query values masked: for the job, logs and messages. */
  display: string;
  env: Record<string, string>;
}

function parseSource(text: string, ownSocketDir: string): Source {
  const parsed = parsePostgresUrl(text, 'the source');
  refuseOwnServer(parsed, ownSocketDir);
  const { display, password, withoutPassword, secretParameters } = parsed;
  // A secret libpq takes only from the connection string would sit on pg_dump's command line.
  if (secretParameters.length > 0) {
    throw new PgxError('INVALID_PARAMETER', `the source: ${secretParameters.join(', ')} in the URL would reach pg_dump's command line, which every user of the machine can read`, {
      hint: 'Leave it out of the URL (for sslpassword: a client key without a passphrase). A password may stay: user:password@ or ?password= reaches pg_dump in PGPASSWORD.',
    });
  }
  const env: Record<string, string> = { PGCONNECT_TIMEOUT: '15' };
  if (password !== null) env.PGPASSWORD = password;
  return { url: withoutPassword, display, env };
}

/**
 * The runtime's own PostgreSQL lets in every local connection as any role (its socket is private to
 * the runtime's user, so pg_hba trusts it): a source naming that socket would dump any database of
 * the runtime into a template its requester can read. Refused however it is named: a host, ?host=,
 * or PGHOST when the URL names none, that is the socket's directory (through symlinks and `..`); a
 * pg_service.conf entry, which may name any host, is refused too. PostgreSQL listens on no TCP port.
 */
function refuseOwnServer(source: PostgresUrl, ownSocketDir: string): void {
  const refuse = (why: string): never => {
    throw new PgxError('INSUFFICIENT_PRIVILEGE', `the source ${why}`, { hint: 'Import from another server; a database of this runtime is copied with a snapshot.' });
  };
  if (source.parameterNames.some((p) => p === 'service' || p === 'servicefile')) refuse('names a pg_service.conf entry, which may lead to this runtime\'s own PostgreSQL: name its host and port in the URL');
  const hosts = source.hosts.length > 0 ? source.hosts : (process.env.PGHOST ?? '').split(',');
  const own = realPath(ownSocketDir);
  if (hosts.some((h) => h.startsWith('/') && realPath(h) === own)) refuse("is this runtime's own PostgreSQL");
}

function realPath(dir: string): string {
  try {
    return realpathSync(dir);
  } catch {
    return path.resolve(dir);
  }
}

/**
 * Whether the source is newer than the local pg_dump (which refuses it) or there is no pg_dump: then
 * the import copies logically (logical-copy.ts). When the source cannot be reached and a pg_dump
 * exists, pg_dump runs and reports why, as it always has.
 */
async function needsLogicalCopy(tools: DumpTools | null, sourceUrl: string): Promise<boolean> {
  if (tools === null) return true;
  const major = await sourceMajor(sourceUrl).catch(() => null);
  return major !== null && major > dumpMajor(tools);
}

/** pg_dump's major version, from `pg_dump (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)`. */
export function dumpMajor(tools: DumpTools): number {
  return Number(/\(PostgreSQL\)\s+(\d+)/.exec(tools.version)?.[1] ?? 0);
}

/** The local pg_dump, or null when there is none (imports then copy logically). */
export function findDumpToolsOrNone(): DumpTools | null {
  try {
    return findDumpTools();
  } catch {
    return null;
  }
}

export interface DumpTools {
  pgDump: string;
  pgRestore: string;
  version: string;
}

/** The newest pg_dump with its pg_restore: Debian's /usr/lib/postgresql/N/bin, else the PATH's. */
function findDumpTools(): DumpTools {
  const dirs: string[] = [];
  const debian = '/usr/lib/postgresql';
  if (existsSync(debian)) {
    const majors = readdirSync(debian).filter((d) => /^\d+$/.test(d)).sort((a, b) => Number(b) - Number(a));
    dirs.push(...majors.map((m) => path.join(debian, m, 'bin')));
  }
  dirs.push(...(process.env.PATH ?? '').split(path.delimiter).filter(Boolean));
  for (const dir of dirs) {
    const pgDump = path.join(dir, 'pg_dump');
    const pgRestore = path.join(dir, 'pg_restore');
    if (existsSync(pgDump) && existsSync(pgRestore)) return { pgDump, pgRestore, version: execFileSync(pgDump, ['--version'], { encoding: 'utf8' }).trim() };
  }
  throw new PgxError('CONFIG_INVALID', 'no pg_dump and pg_restore found on this machine', {
    hint: 'Install the PostgreSQL client tools of the source version or newer (apt-get install postgresql-client), or put them on PATH.',
  });
}

async function countTableData(tools: DumpTools, file: string): Promise<number> {
  const { code, stdout, stderr } = await runTool(tools.pgRestore, ['--list', file], {});
  if (code !== 0) throw new PgxError('INTERNAL', `pg_restore --list failed: ${lastLines(stderr)}`);
  return stdout.split('\n').filter((l) => / TABLE DATA /.test(l)).length;
}

function runTool(
  command: string,
  args: string[],
  env: Record<string, string>,
  attach?: (child: ReturnType<typeof spawn>) => void,
  input?: Buffer,
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { env: { ...process.env, ...env }, stdio: [input ? 'pipe' : 'ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    if (input) {
      // A tool that exits early (a broken archive) closes the pipe; its exit code says why.
      child.stdin!.on('error', () => {});
      child.stdin!.end(input);
    }
    attach?.(child);
    if (child.stdout!.listenerCount('data') === 0) child.stdout!.on('data', (c: Buffer) => (stdout += c.toString('utf8')));
    child.stderr!.on('data', (c: Buffer) => (stderr += c.toString('utf8')));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code: code ?? 1, stdout, stderr }));
  });
}

function scrub(text: string, source: Source): string {
  const password = source.env.PGPASSWORD;
  return password ? text.split(password).join('***') : text;
}

function lastLines(text: string, n = 3): string {
  return text.trim().split('\n').slice(-n).join(' / ') || 'no message';
}

/** The first bytes of pg_dump's custom format (-Fc). */
const CUSTOM_DUMP_MAGIC = 'PGDMP';

/**
 * A script file as SQL text: a plain-format file as it is, a pg_dump custom-format file (-Fc) turned
 * into its plain script by pg_restore (without owners and privileges: they name the source's roles).
 * pg_restore reads the bytes from its standard input, so a dump piped to `--file -` works as well as
 * one on disk; `file` only names it in messages.
 */
export async function scriptFromFile(file: string, bytes: Buffer): Promise<string> {
  if (bytes.subarray(0, CUSTOM_DUMP_MAGIC.length).toString('latin1') !== CUSTOM_DUMP_MAGIC) return bytes.toString('utf8');
  const tools = findDumpTools();
  const { code, stdout, stderr } = await runTool(tools.pgRestore, ['--no-owner', '--no-privileges', '--file', '-'], {}, undefined, bytes);
  if (code !== 0) {
    throw new PgxError('INVALID_PARAMETER', `${file}: pg_restore could not read this custom-format dump: ${lastLines(stderr)}`, {
      hint: `This machine has ${tools.version.replace('pg_dump', 'pg_restore')}; a dump made by a newer pg_dump needs a pg_restore at least as new (or dump it again with --format=plain).`,
    });
  }
  return stdout;
}
