// The PostgreSQL child process: initdb on first start, the PGX profile, start, readiness (a `SELECT 1`
// answered, not a live pid), restart with backoff when it dies, and a stop that escalates. It also
// cleans up after a predecessor that was killed without stopping its PostgreSQL.

import { spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { spawnProtected, UNPROTECTED_CHILD_OOM_SCORE } from './oom.js';
import { EventEmitter } from 'node:events';
import { existsSync } from 'node:fs';
import { appendFile, chmod, chown, lchown, mkdir, readdir, readFile, readlink, realpath, rm, stat, writeFile } from 'node:fs/promises';
import { dirname, join, resolve } from 'node:path';
import { createInterface } from 'node:readline';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';

import type { Clock } from '../clock.js';
import { asPgxError, PgxError } from '../errors.js';
import type { Logger } from '../log.js';
import { assertReachable, type OsUser } from './os-user.js';
import { SqlClient } from './sql-client.js';

export type SupervisorState = 'stopped' | 'starting' | 'ready' | 'restarting' | 'stopping';

export interface SupervisorOptions {
  dataDir: string;
  binDir: string;
  /** PostgreSQL's private socket directory; created mode 0700, owned by the OS user. */
  socketDir: string;
  /** Names the socket `.s.PGSQL.<port>`; PostgreSQL listens on no TCP port. */
  port: number;
  maxConnections: number;
  /** User overrides (`pgx start -c name=value`), passed last so they win over the profile. */
  settings: Record<string, string>;
  logger: Logger;
  clock: Clock;
  osUser: OsUser;
  /**
   * Awaited before each restart of a PostgreSQL that died: resolves once it may start (the disk guard
   * waits here for room for crash recovery's WAL). Absent: restart after the backoff alone.
   */
  restartGate?: (signal: AbortSignal) => Promise<void>;
}

interface SupervisorEvents {
  state: [state: SupervisorState, previous: SupervisorState];
}

interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

function releasePipes(child: Child): void {
  child.proc.stdout?.destroy();
  child.proc.stderr?.destroy();
}

interface Child {
  proc: ChildProcess;
  pid: number;
  exited: Promise<void>;
  /** Set when the process has exited. */
  exit?: Exit;
  /** Clock.monotonic() when `SELECT 1` first answered. */
  readyAt?: number;
}

const READY_TIMEOUT_MS = 60_000;
/** Readiness and process-exit polls: PostgreSQL is usually ready tens of milliseconds after spawning. */
const POLL_MS = 25;
/** Fast shutdown (SIGINT) rolls back open transactions; it gets this long before SIGQUIT. */
const STOP_FAST_MS = 15_000;
/** SIGQUIT is immediate shutdown; SIGKILL if even that hangs. */
const STOP_QUIT_MS = 5_000;
/** An orphaned postmaster (not our child) gets this long for fast shutdown before SIGQUIT. */
const ORPHAN_FAST_MS = 10_000;
/** Backends of a dead postmaster notice its death at once; this long is generous. */
const ORPHAN_BACKENDS_MS = 10_000;
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;
/** A PostgreSQL that stayed up this long before dying restarts without the accumulated backoff. */
const STABLE_MS = 60_000;
const KEEP_LINES = 30;
/** sun_path holds 108 bytes including the terminating NUL. */
const MAX_SOCKET_PATH = 107;
/** Settings the supervisor relies on; overriding them would make PostgreSQL unreachable to it. */
const OWN_SETTINGS = new Set(['port', 'unix_socket_directories', 'data_directory', 'config_file']);
/** Our marker in the data directory: which runtime process (pid and start time) owns it. */
const OWNER_FILE = 'pgx-owner.pid';
const PROFILE_FILE = 'pgx.conf';

export class PostgresSupervisor extends EventEmitter<SupervisorEvents> {
  private readonly opts: SupervisorOptions;
  private readonly log: Logger;
  private readonly dataDir: string;
  private readonly socketDir: string;
  /** Whether to spawn as another user: only root can, and PostgreSQL refuses to run as root. */
  private readonly switchUser: boolean;
  private current: SupervisorState = 'stopped';
  private child: Child | undefined;
  /** Aborted by stop(): cancels sleeps, polls and initdb of the start or restart in progress. */
  private abort = new AbortController();
  /** The start() or restart loop in progress; stop() waits for it to unwind. */
  private work: Promise<void> | undefined;
  private stopping: Promise<void> | undefined;
  private backoffMs = BACKOFF_MIN_MS;
  /** The last lines PostgreSQL (or initdb) printed, for error messages. */
  private lastLines: string[] = [];
  /** Level of the last postgres log line, for its DETAIL/HINT/continuation lines. */
  private lastLevel: Level = 'info';
  /** The postmaster that died last, while its restart is pending: its children may still hold its pipes. */
  private crashed: Child | undefined;
  /** The running postmaster was started with oom_score_adj -1000 (oom.ts). */
  oomProtected = false;

  constructor(opts: SupervisorOptions) {
    super();
    this.opts = opts;
    this.log = opts.logger;
    this.dataDir = resolve(opts.dataDir);
    this.socketDir = resolve(opts.socketDir);
    this.switchUser = process.getuid?.() === 0 && opts.osUser.uid !== 0;
    const socketPath = `${this.socketDir}/.s.PGSQL.${opts.port}`;
    if (Buffer.byteLength(socketPath) > MAX_SOCKET_PATH) {
      throw new PgxError('CONFIG_INVALID', `the PostgreSQL socket path ${socketPath} is longer than ${MAX_SOCKET_PATH} bytes`, {
        hint: 'Choose a shorter --data-dir (or --socket-dir); Unix socket paths are limited to 107 bytes.',
      });
    }
    for (const name of Object.keys(opts.settings)) {
      if (!/^[A-Za-z_][A-Za-z0-9_.]*$/.test(name)) {
        throw new PgxError('CONFIG_INVALID', `-c ${name}: not a PostgreSQL setting name`, { hint: 'Pass settings as -c name=value, e.g. -c work_mem=8MB.' });
      }
      if (OWN_SETTINGS.has(name.toLowerCase())) {
        throw new PgxError('CONFIG_INVALID', `-c ${name}: pgx sets this itself`, {
          hint: 'Use pgx start --data-dir / --socket-dir / --port instead; PostgreSQL listens only on a private socket.',
        });
      }
    }
  }

  get state(): SupervisorState {
    return this.current;
  }

  /** The postmaster's pid while one runs. */
  /** PostgreSQL's private socket directory (client tools such as pg_restore connect there). */
  get socketDirectory(): string {
    return this.socketDir;
  }

  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Starts PostgreSQL and resolves once it answers `SELECT 1`; from then on it is kept running. */
  start(): Promise<void> {
    switch (this.current) {
      case 'ready':
      case 'restarting':
        return Promise.resolve();
      case 'starting':
        return this.work ?? Promise.resolve();
      case 'stopping':
        return Promise.reject(new PgxError('ADMIN_SHUTDOWN', 'the PostgreSQL supervisor is stopping', { hint: 'Wait for stop() before starting again.' }));
      case 'stopped':
        break;
    }
    this.abort = new AbortController();
    this.backoffMs = BACKOFF_MIN_MS;
    this.setState('starting');
    const signal = this.abort.signal;
    this.work = this.launch(signal).then(
      () => this.setState('ready'),
      async (err: unknown) => {
        if (signal.aborted) {
          throw new PgxError('ADMIN_SHUTDOWN', 'the PostgreSQL supervisor was stopped while starting', { hint: 'Start it again if that was not intended.', cause: err });
        }
        await this.terminate(this.child);
        await this.releaseOwnership();
        this.setState('stopped');
        throw asPgxError(err);
      },
    );
    return this.work;
  }

  /** Stops PostgreSQL (fast shutdown, escalating) and every timer and child owned here. Idempotent. */
  stop(): Promise<void> {
    if (this.current === 'stopped') return Promise.resolve();
    this.stopping ??= this.shutdown();
    return this.stopping;
  }

  /** A new admin connection over the private socket (trust authentication). */
  connect(database = 'postgres', user = 'postgres'): Promise<SqlClient> {
    return SqlClient.connect({ socketDir: this.socketDir, port: this.opts.port, user, database, applicationName: 'pgx-runtime' });
  }

  /** The one place the state changes. */
  private setState(next: SupervisorState): void {
    const previous = this.current;
    if (previous === next) return;
    this.current = next;
    this.log.debug('postgres-supervisor-state', { state: next, previous });
    this.emit('state', next, previous);
  }

  private async shutdown(): Promise<void> {
    this.setState('stopping');
    this.abort.abort();
    await this.work?.catch(() => undefined);
    await this.terminate(this.child);
    // A stop while a restart is pending: the dead postmaster's children (exiting on their own) may
    // still hold its pipes; do not wait for them.
    if (this.crashed) releasePipes(this.crashed);
    this.crashed = undefined;
    await this.releaseOwnership();
    // The private socket directory is ours alone; PostgreSQL removed its socket, leave no empty dir.
    await rm(this.socketDir, { recursive: true, force: true });
    this.work = undefined;
    this.stopping = undefined;
    this.setState('stopped');
  }

  /** Everything from an empty or existing data directory to a PostgreSQL answering `SELECT 1`. */
  private async launch(signal: AbortSignal): Promise<void> {
    await this.prepareDirectories();
    if (!existsSync(join(this.dataDir, 'PG_VERSION'))) await this.initdb(signal);
    await this.installProfile();
    await this.claimOwnership();
    await this.clearLeftovers(signal);
    signal.throwIfAborted();
    const child = this.spawnPostgres();
    await this.waitReady(child, signal);
    if (child.exit) throw this.exitedError(child, 'right after it became ready');
    child.readyAt = this.opts.clock.monotonic();
    this.log.info('postgres-ready', { pid: child.pid, socket: `${this.socketDir}/.s.PGSQL.${this.opts.port}` });
  }

  // --- Directories, initdb, profile --------------------------------------------------------------

  private async prepareDirectories(): Promise<void> {
    const { osUser } = this.opts;
    const dirs = [
      [this.dataDir, 'data-dir'],
      [this.socketDir, 'socket-dir'],
    ] as const;
    for (const [dir, purpose] of dirs) {
      // Before creating anything: a path the OS user cannot reach is the user's to move, not ours to fix.
      await assertReachable(dir, osUser, purpose);
      try {
        await mkdir(dirname(dir), { recursive: true, mode: 0o755 });
        await mkdir(dir, { recursive: true, mode: 0o700 });
        if (this.switchUser) {
          const st = await stat(dir);
          if (st.uid !== osUser.uid || st.gid !== osUser.gid) {
            // Ours to fix: e.g. a data dir initialised earlier for another user (postgres vs pgx).
            this.log.info('postgres-chown', { dir, user: osUser.name });
            await chownTree(dir, osUser.uid, osUser.gid);
          }
        }
        // PostgreSQL insists on 0700 (or 0750) for the data directory; the socket dir is private.
        await chmod(dir, 0o700);
      } catch (err) {
        throw new PgxError('CONFIG_INVALID', `cannot prepare ${dir}: ${(err as Error).message}`, {
          hint: purpose === 'data-dir' ? 'Choose a --data-dir this process can create and own.' : 'Choose a --socket-dir this process can create and own.',
          cause: err,
        });
      }
      await assertReachable(dir, osUser, purpose);
    }
    await assertReachable(join(this.opts.binDir, 'postgres'), osUser, 'pg-bin');
    await assertReachable(join(this.opts.binDir, 'initdb'), osUser, 'pg-bin');
  }

  private async initdb(signal: AbortSignal): Promise<void> {
    const started = this.opts.clock.monotonic();
    this.log.info('initdb', { dataDir: this.dataDir, user: this.opts.osUser.name });
    const args = [
      '-D', this.dataDir, '-U', 'postgres', '--encoding=UTF8', '--no-locale', '--auth=trust',
      // The profile turns fsync off anyway; syncing a fresh cluster would only cost seconds.
      '--no-sync', '--no-instructions',
      // PostgreSQL 18 enables checksums by default. With fsync off we have already accepted that a
      // machine crash can corrupt this disposable cluster; checksums would cost CPU on every page
      // moved between shared buffers and the OS and protect nothing we keep.
      '--no-data-checksums',
    ];
    const proc = spawn(join(this.opts.binDir, 'initdb'), args, this.spawnOptions(signal));
    this.pipeLines(proc, (line) => this.log.debug('initdb', { line }));
    const exit = await new Promise<Exit & { error?: Error }>((res) => {
      proc.once('error', (error) => res({ code: null, signal: null, error }));
      proc.once('close', (code, sig) => res({ code, signal: sig }));
    });
    signal.throwIfAborted();
    if (exit.code !== 0) {
      throw new PgxError('POSTGRES_FAILED', `initdb failed (${describeExit(exit)}): ${this.tail(8)}`, {
        hint: `initdb needs an empty --data-dir; remove ${this.dataDir} if it is the leftover of a failed first start.`,
        cause: exit.error,
      });
    }
    this.log.info('initdb-done', { dataDir: this.dataDir, ms: Math.round(this.opts.clock.monotonic() - started) });
  }

  /** Copies the profile in at every start (so updates apply) and includes it from postgresql.conf once. */
  private async installProfile(): Promise<void> {
    const target = join(this.dataDir, PROFILE_FILE);
    await writeFile(target, await readFile(profilePath()), { mode: 0o600 });
    if (this.switchUser) await chown(target, this.opts.osUser.uid, this.opts.osUser.gid);
    const conf = join(this.dataDir, 'postgresql.conf');
    if (!/^\s*include_if_exists\s*=\s*'pgx\.conf'/m.test(await readFile(conf, 'utf8'))) {
      await appendFile(conf, `\n# Added by pgx: its PostgreSQL profile, refreshed from the pgx package at every start.\ninclude_if_exists = '${PROFILE_FILE}'\n`);
    }
  }

  // --- Leftovers of a predecessor ----------------------------------------------------------------

  /**
   * Refuses a data directory that another live pgx runtime owns (it would stop our PostgreSQL and we
   * its), else records this process as the owner. A pid alone could be recycled; pid + start time is not.
   */
  private async claimOwnership(): Promise<void> {
    const file = join(this.dataDir, OWNER_FILE);
    const [pidText, startText] = (await readFile(file, 'utf8').catch(() => '')).trim().split(' ');
    const pid = Number(pidText);
    if (pid > 0 && pid !== process.pid) {
      const st = await procStat(pid);
      if (st && st.state !== 'Z' && String(st.startTime) === startText) {
        throw new PgxError('CONFIG_INVALID', `data directory ${this.dataDir} is in use by another pgx runtime (pid ${pid})`, {
          hint: 'Stop that runtime first, or give this one its own --data-dir.',
        });
      }
    }
    const me = await procStat(process.pid);
    await writeFile(file, `${process.pid} ${me?.startTime ?? 0}\n`);
  }

  private async releaseOwnership(): Promise<void> {
    const file = join(this.dataDir, OWNER_FILE);
    const pid = Number((await readFile(file, 'utf8').catch(() => '')).split(' ')[0]);
    if (pid === process.pid) await rm(file, { force: true });
  }

  /**
   * A postmaster.pid left behind means our predecessor died without stopping PostgreSQL (its postgres
   * may still run: stop it), or PostgreSQL itself was killed (its backends may still be exiting: wait),
   * or the pid was recycled by an unrelated process (PostgreSQL would refuse to start: remove the file).
   */
  private async clearLeftovers(signal: AbortSignal): Promise<void> {
    const pidFile = join(this.dataDir, 'postmaster.pid');
    const pidText = await readFile(pidFile, 'utf8').catch(() => undefined);
    if (pidText !== undefined) {
      const pid = Number(pidText.split('\n')[0]);
      if (pid > 0 && (await this.isOurPostmaster(pid))) await this.stopOrphan(pid, signal);
      // postmaster.pid is PostgreSQL's interlock against backends still attached to the old shared
      // memory; remove it only once no postgres process works in this data directory any more.
      await this.waitForOrphanedBackends(signal);
      if (existsSync(pidFile)) {
        this.log.warn('postgres-stale-pid-removed', { pid, reason: (await isAlive(pid)) ? 'pid now belongs to another process' : 'process is gone' });
        await rm(pidFile, { force: true });
      }
    }

    // The socket lock names its postmaster too; a recycled pid there also stops PostgreSQL starting.
    const lock = `${this.socketDir}/.s.PGSQL.${this.opts.port}.lock`;
    const lockText = await readFile(lock, 'utf8').catch(() => undefined);
    if (lockText !== undefined) {
      const pid = Number(lockText.split('\n')[0]);
      if (pid > 0 && (await isAlive(pid)) && (await commOf(pid)) === 'postgres') {
        throw new PgxError('CONFIG_INVALID', `${this.socketDir} is in use by another PostgreSQL (pid ${pid})`, {
          hint: 'Give each pgx runtime its own --data-dir and --socket-dir.',
        });
      }
      this.log.warn('postgres-stale-socket-lock-removed', { lock, pid });
      await rm(lock, { force: true });
      await rm(`${this.socketDir}/.s.PGSQL.${this.opts.port}`, { force: true });
    }
  }

  /** A live postgres whose command line or working directory is this data directory. */
  private async isOurPostmaster(pid: number): Promise<boolean> {
    if (!(await isAlive(pid)) || (await commOf(pid)) !== 'postgres') return false;
    const dirs = new Set([this.dataDir, await realpath(this.dataDir)]);
    const args = (await readFile(`/proc/${pid}/cmdline`, 'utf8').catch(() => '')).split('\0');
    if (args.some((a) => dirs.has(a))) return true;
    const cwd = await readlink(`/proc/${pid}/cwd`).catch(() => undefined);
    return cwd !== undefined && dirs.has(cwd);
  }

  private async stopOrphan(pid: number, signal: AbortSignal): Promise<void> {
    this.log.warn('postgres-orphan-found', { pid, dataDir: this.dataDir, reason: 'a previous pgx process died without stopping it' });
    const steps: [NodeJS.Signals, number, string][] = [
      ['SIGINT', ORPHAN_FAST_MS, 'fast shutdown'],
      ['SIGQUIT', STOP_QUIT_MS, 'immediate shutdown'],
      ['SIGKILL', STOP_QUIT_MS, 'kill'],
    ];
    for (const [sig, ms, mode] of steps) {
      this.log.warn('postgres-orphan-stop', { pid, signal: sig, mode });
      sendSignal(pid, sig);
      if (await this.waitGone(async () => ((await isAlive(pid)) ? [pid] : []), ms, signal)) {
        this.log.info('postgres-orphan-stopped', { pid });
        return;
      }
    }
    throw new PgxError('POSTGRES_FAILED', `an orphaned PostgreSQL (pid ${pid}) on ${this.dataDir} survived SIGKILL`, {
      hint: `Stop process ${pid} by hand, then start pgx again.`,
    });
  }

  /** Waits for, then kills, postgres processes still working in the data directory. */
  private async waitForOrphanedBackends(signal: AbortSignal): Promise<void> {
    const find = (): Promise<number[]> => postgresProcessesIn(this.dataDir);
    const found = await find();
    if (found.length === 0) return;
    this.log.warn('postgres-orphan-backends', { pids: found, reason: 'their postmaster is gone; waiting for them to exit' });
    if (await this.waitGone(find, ORPHAN_BACKENDS_MS, signal)) return;
    const left = await find();
    this.log.warn('postgres-orphan-backends-kill', { pids: left, signal: 'SIGKILL' });
    for (const pid of left) sendSignal(pid, 'SIGKILL');
    if (!(await this.waitGone(find, STOP_QUIT_MS, signal))) {
      throw new PgxError('POSTGRES_FAILED', `postgres processes ${left.join(', ')} still run in ${this.dataDir}`, {
        hint: 'Stop them by hand, then start pgx again.',
      });
    }
  }

  /** Polls `alive` until it returns nothing (true) or `ms` pass (false). */
  private async waitGone(alive: () => Promise<number[]>, ms: number, signal: AbortSignal): Promise<boolean> {
    const deadline = this.opts.clock.monotonic() + ms;
    for (;;) {
      if ((await alive()).length === 0) return true;
      if (this.opts.clock.monotonic() >= deadline) return false;
      await sleep(POLL_MS, undefined, { signal });
    }
  }

  // --- The postgres child ------------------------------------------------------------------------

  private spawnPostgres(): Child {
    const { port, maxConnections, settings } = this.opts;
    const args = [
      '-D', this.dataDir,
      '-k', this.socketDir,
      '-p', String(port),
      '-c', 'listen_addresses=',
      '-c', `max_connections=${maxConnections}`,
      '-c', 'unix_socket_permissions=0700',
    ];
    for (const [name, value] of Object.entries(settings)) args.push('-c', `${name}=${value}`);
    this.lastLines = [];
    const options = this.spawnOptions();
    const { child: proc, protectedChild } = spawnProtected((childEnv) => spawn(join(this.opts.binDir, 'postgres'), args, { ...options, env: { ...options.env, ...childEnv } }));
    this.oomProtected = protectedChild;
    let markExited!: () => void;
    const child: Child = { proc, pid: proc.pid ?? 0, exited: new Promise((res) => (markExited = res)) };
    const onExit = (exit: Exit): void => {
      if (child.exit) return;
      child.exit = exit;
      markExited();
      this.onChildExit(child);
    };
    proc.once('exit', (code, sig) => onExit({ code, signal: sig }));
    proc.once('error', (err) => {
      // Only a failed spawn (no pid) ends the child; later errors are failed signals, logged.
      if (proc.pid === undefined) {
        this.remember(`spawn failed: ${err.message}`);
        onExit({ code: null, signal: null });
      } else {
        this.log.warn('postgres-signal-failed', { pid: proc.pid, error: err });
      }
    });
    this.pipeLines(proc, (line) => this.logPostgresLine(line));
    this.child = child;
    this.log.info('postgres-spawned', { pid: child.pid, dataDir: this.dataDir, user: this.opts.osUser.name, oomProtected: protectedChild });
    if (!protectedChild) {
      this.log.warn('postmaster-not-oom-protected', {
        reason: 'lowering oom_score_adj needs root (CAP_SYS_RESOURCE)',
        backendsOomScoreAdj: UNPROTECTED_CHILD_OOM_SCORE,
        detail: `PostgreSQL's children raise their oom_score_adj to ${UNPROTECTED_CHILD_OOM_SCORE} instead, so the OOM killer takes one of them before the postmaster or the runtime.`,
        hint: 'Run the runtime as root with CAP_SYS_RESOURCE (it runs PostgreSQL as an unprivileged user) for the postmaster at -1000 and backends at 0.',
      });
    }
    return child;
  }

  private spawnOptions(signal?: AbortSignal): SpawnOptions {
    return {
      // Never our own cwd: the OS user may not be able to enter it.
      cwd: '/',
      // A clean environment: C locale keeps log lines English (we parse their severity) and sorting
      // byte-wise; nothing of ours (tokens, PG* variables) leaks into PostgreSQL.
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', LC_ALL: 'C', LANG: 'C', ...(process.env.TZ ? { TZ: process.env.TZ } : {}) },
      stdio: ['ignore', 'pipe', 'pipe'],
      // Its own process group, so a terminal's Ctrl-C reaches only us and stop() shuts PostgreSQL down
      // in order instead of racing it.
      detached: true,
      ...(this.switchUser ? { uid: this.opts.osUser.uid, gid: this.opts.osUser.gid } : {}),
      ...(signal ? { signal } : {}),
    };
  }

  private onChildExit(child: Child): void {
    if (child !== this.child) return;
    this.child = undefined;
    this.crashed = child;
    // Starting or stopping: whoever is waiting on this child reports it.
    if (this.current !== 'ready') return;
    const uptimeMs = child.readyAt === undefined ? 0 : Math.round(this.opts.clock.monotonic() - child.readyAt);
    this.log.error('postgres-died', { pid: child.pid, exit: describeExit(child.exit), uptimeMs, lastLines: this.tail(10) });
    if (uptimeMs >= STABLE_MS) this.backoffMs = BACKOFF_MIN_MS;
    this.setState('restarting');
    this.work = this.restartLoop(this.abort.signal);
  }

  /** Restarts with exponential backoff until PostgreSQL is ready again or stop() is called. Never rejects. */
  private async restartLoop(signal: AbortSignal): Promise<void> {
    while (!signal.aborted) {
      const delayMs = this.backoffMs;
      this.backoffMs = Math.min(delayMs * 2, BACKOFF_MAX_MS);
      this.log.warn('postgres-restart', { inMs: delayMs });
      try {
        await sleep(delayMs, undefined, { signal });
        await this.opts.restartGate?.(signal);
        await this.launch(signal);
        this.setState('ready');
        return;
      } catch (err) {
        if (signal.aborted) return;
        this.log.error('postgres-restart-failed', { error: err });
        await this.terminate(this.child);
      }
    }
  }

  private async waitReady(child: Child, signal: AbortSignal): Promise<void> {
    const deadline = this.opts.clock.monotonic() + READY_TIMEOUT_MS;
    let lastError: unknown;
    for (;;) {
      if (child.exit) throw this.exitedError(child, 'before it was ready');
      try {
        const client = await SqlClient.connect({
          socketDir: this.socketDir, port: this.opts.port, user: 'postgres', database: 'postgres',
          applicationName: 'pgx-supervisor', timeoutMs: 5_000,
        });
        try {
          await client.query('SELECT 1');
        } finally {
          await client.close();
        }
        return;
      } catch (err) {
        lastError = err;
      }
      if (this.opts.clock.monotonic() >= deadline) {
        throw new PgxError('POSTGRES_FAILED', `PostgreSQL did not answer SELECT 1 within ${READY_TIMEOUT_MS / 1000} s: ${(lastError as Error).message}`, {
          hint: 'Read the postgres log lines above; a slow disk or a setting passed with -c may be the cause.',
          detail: this.tail(10),
          cause: lastError,
        });
      }
      await sleep(POLL_MS, undefined, { signal });
    }
  }

  private exitedError(child: Child, when: string): PgxError {
    return new PgxError('POSTGRES_FAILED', `PostgreSQL exited ${when} (${describeExit(child.exit)}): ${this.tail(10)}`, {
      hint: 'The lines above are PostgreSQL\'s own; a setting passed with -c or a data directory from another PostgreSQL version are common causes.',
    });
  }

  /** Fast shutdown, then immediate, then SIGKILL; resolves when the process has exited. */
  private async terminate(child: Child | undefined): Promise<void> {
    if (!child) return;
    const started = this.opts.clock.monotonic();
    const steps: [NodeJS.Signals, number, string][] = [
      ['SIGINT', STOP_FAST_MS, 'fast shutdown'],
      ['SIGQUIT', STOP_QUIT_MS, 'immediate shutdown'],
      ['SIGKILL', STOP_QUIT_MS, 'kill'],
    ];
    for (const [sig, ms, mode] of steps) {
      if (child.exit) break;
      this.log[sig === 'SIGINT' ? 'info' : 'warn']('postgres-stop', { pid: child.pid, signal: sig, mode });
      child.proc.kill(sig);
      await this.waitExit(child, ms);
    }
    await child.exited;
    this.log.info('postgres-stopped', { pid: child.pid, exit: describeExit(child.exit), ms: Math.round(this.opts.clock.monotonic() - started) });
    // Our pipes: if a killed postmaster's children still hold them, do not wait for them.
    releasePipes(child);
  }

  /** Resolves after exit or `ms`, whichever is first; the timer never outlives the call. */
  private async waitExit(child: Child, ms: number): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([child.exited, new Promise<void>((res) => (timer = setTimeout(res, ms)))]);
    clearTimeout(timer);
  }

  // --- Logs --------------------------------------------------------------------------------------

  private pipeLines(proc: ChildProcess, onLine: (line: string) => void): void {
    for (const stream of [proc.stdout, proc.stderr]) {
      if (!stream) continue;
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (line) => {
        this.remember(line);
        onLine(line);
      });
    }
  }

  private remember(line: string): void {
    this.lastLines.push(line);
    if (this.lastLines.length > KEEP_LINES) this.lastLines.shift();
  }

  private tail(n: number): string {
    return this.lastLines.slice(-n).join('\n') || '(no output)';
  }

  /** One postgres log line at the level its severity deserves. */
  private logPostgresLine(line: string): void {
    const m = LINE.exec(line);
    if (!m) {
      // Continuation lines of a multi-line message start with a tab; other odd lines (the dynamic
      // linker, early startup) are rare and worth seeing.
      this.log[line.startsWith('\t') ? this.lastLevel : 'info']('postgres', { text: line });
      return;
    }
    const [, pid, severity = 'LOG', text = ''] = m;
    const level = levelOf(severity, text, this.lastLevel);
    this.lastLevel = level;
    this.log[level]('postgres', { severity, ...(pid ? { pid: Number(pid) } : {}), text });
  }
}

/** "[123] user@db ERROR:  text", our log_line_prefix; early lines use PostgreSQL's default prefix. */
const LINE = /^(?:.*?\[(\d+)\] )?(?:.*? )?(DEBUG[1-5]|LOG|INFO|NOTICE|WARNING|ERROR|FATAL|PANIC|DETAIL|HINT|QUERY|CONTEXT|LOCATION|STATEMENT):  (.*)$/;
/** LOG lines worth info level: the server's own lifecycle. */
const LIFECYCLE = /starting PostgreSQL|ready to accept connections|shutdown request|shutting down|database system is shut down|database system was (interrupted|not properly shut down)|terminated by signal|exited with exit code|all server processes terminated|redo (starts|done)|listening on/;
/** FATAL lines that are expected traffic, not trouble: our readiness probe, sessions ended on stop. */
const ROUTINE_FATAL = /the database system is (starting up|shutting down|not yet accepting connections|in recovery mode)|terminating connection due to administrator command/;

type Level = 'error' | 'warn' | 'info' | 'debug';

function levelOf(severity: string, text: string, previous: Level): Level {
  switch (severity) {
    case 'PANIC':
      return 'error';
    // A FATAL ends one session (a wrong database name, a client gone); PANIC is the server's trouble.
    case 'FATAL':
      return ROUTINE_FATAL.test(text) ? 'debug' : 'warn';
    case 'ERROR':
    case 'WARNING':
      return 'warn';
    case 'LOG':
      return LIFECYCLE.test(text) ? 'info' : 'debug';
    case 'DETAIL':
    case 'HINT':
    case 'QUERY':
    case 'CONTEXT':
    case 'LOCATION':
    case 'STATEMENT':
      return previous;
    default:
      return 'debug';
  }
}

function describeExit(exit: Exit | undefined): string {
  if (!exit) return 'still running';
  if (exit.signal) return `killed by ${exit.signal}`;
  return exit.code === null ? 'did not start' : `exit code ${exit.code}`;
}

// --- Processes, as /proc shows them (PostgreSQL and this runtime are Linux-only) --------------------

interface ProcStat {
  state: string;
  startTime: number;
}

/** State and start time (clock ticks since boot) of a process, or undefined if there is none. */
async function procStat(pid: number): Promise<ProcStat | undefined> {
  const text = await readFile(`/proc/${pid}/stat`, 'utf8').catch(() => undefined);
  if (text === undefined) return undefined;
  // "pid (comm) state ppid ..." where comm may hold spaces and parentheses: split after the last ')'.
  const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
  return { state: fields[0] ?? '', startTime: Number(fields[19]) };
}

/** Alive and not a zombie: an orphan re-parented to a PID 1 that does not reap stays a zombie. */
async function isAlive(pid: number): Promise<boolean> {
  const st = await procStat(pid);
  return st !== undefined && st.state !== 'Z' && st.state !== 'X';
}

async function commOf(pid: number): Promise<string> {
  return (await readFile(`/proc/${pid}/comm`, 'utf8').catch(() => '')).trim();
}

/** Live postgres processes whose working directory is `dir` (every PostgreSQL process chdirs there). */
async function postgresProcessesIn(dir: string): Promise<number[]> {
  const dirs = new Set([dir, await realpath(dir)]);
  const found: number[] = [];
  for (const name of await readdir('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const cwd = await readlink(`/proc/${name}/cwd`).catch(() => undefined);
    if (cwd === undefined || !dirs.has(cwd)) continue;
    const pid = Number(name);
    if ((await commOf(pid)) === 'postgres' && (await isAlive(pid))) found.push(pid);
  }
  return found;
}

function sendSignal(pid: number, sig: NodeJS.Signals): void {
  try {
    process.kill(pid, sig);
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err;
  }
}

async function chownTree(dir: string, uid: number, gid: number): Promise<void> {
  await lchown(dir, uid, gid);
  for (const entry of await readdir(dir, { withFileTypes: true })) {
    const p = join(dir, entry.name);
    if (entry.isDirectory()) await chownTree(p, uid, gid);
    else await lchown(p, uid, gid);
  }
}

/** src/runtime/profile/pgx.conf of this package; compiled code runs from dist/src/runtime/. */
export function profilePath(): string {
  let dir = dirname(fileURLToPath(import.meta.url));
  while (!existsSync(join(dir, 'package.json'))) {
    if (dirname(dir) === dir) {
      throw new PgxError('INTERNAL', 'cannot find the pgx package root above ' + fileURLToPath(import.meta.url), {
        hint: 'Reinstall pgx; its package.json and src/runtime/profile/pgx.conf must ship together.',
      });
    }
    dir = dirname(dir);
  }
  return join(dir, 'src', 'runtime', 'profile', PROFILE_FILE);
}
