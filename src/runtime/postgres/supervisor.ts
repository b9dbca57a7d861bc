// The PostgreSQL child process: start, readiness (a `SELECT 1` answered, not a live pid), restart with
// backoff when it dies, and a stop that escalates. What comes before a start is elsewhere in this
// folder: the data directory (data-directory.ts: initdb, the profile), the pid files and a
// predecessor's leftovers (pid-files.ts), and PostgreSQL's output (log-pipe.ts).

import { execFile, spawn, type ChildProcess, type SpawnOptions } from 'node:child_process';
import { EventEmitter } from 'node:events';
import { rm } from 'node:fs/promises';
import { join, resolve } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

import type { Clock } from '../../clock.js';
import { asPgxError, PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { socketPath } from '../../wire/socket-path.js';
import { prepareDataDirectory } from './data-directory.js';
import { describeExit, LogPipe, type Exit } from './log-pipe.js';
import { spawnProtected, UNPROTECTED_CHILD_OOM_SCORE } from './oom.js';
import type { OsUser } from './os-user.js';
import { claimOwnership, clearLeftovers, releaseOwnership } from './pid-files.js';
import { SqlClient, type SessionSettings } from './sql-client.js';

const execFileAsync = promisify(execFile);

export type SupervisorState = 'stopped' | 'starting' | 'ready' | 'restarting' | 'stopping';

export interface SupervisorOptions {
  dataDir: string;
  /** Names minted on connect start with it: PostgreSQL's "does not exist" for one is logged at debug (log-pipe.ts). */
  mintPrefix?: string;
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
const BACKOFF_MIN_MS = 500;
const BACKOFF_MAX_MS = 30_000;
/** A PostgreSQL that stayed up this long before dying restarts without the accumulated backoff. */
const STABLE_MS = 60_000;
/** sun_path holds 108 bytes including the terminating NUL. */
const MAX_SOCKET_PATH = 107;
/** Settings the supervisor relies on; overriding them would make PostgreSQL unreachable to it. */
const OWN_SETTINGS = new Set(['port', 'unix_socket_directories', 'data_directory', 'config_file']);

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
  /** PostgreSQL's and initdb's output: logged, and its last lines kept for error messages. */
  private readonly logs: LogPipe;
  /** The postmaster that died last, while its restart is pending: its children may still hold its pipes. */
  private crashed: Child | undefined;
  /** The running postmaster was started with oom_score_adj -1000 (oom.ts). */
  oomProtected = false;

  constructor(opts: SupervisorOptions) {
    super();
    this.opts = opts;
    this.log = opts.logger;
    this.logs = new LogPipe(opts.logger, opts.mintPrefix);
    this.dataDir = resolve(opts.dataDir);
    this.socketDir = resolve(opts.socketDir);
    this.switchUser = process.getuid?.() === 0 && opts.osUser.uid !== 0;
    const socket = socketPath(this.socketDir, opts.port);
    if (Buffer.byteLength(socket) > MAX_SOCKET_PATH) {
      throw new PgxError('CONFIG_INVALID', `the PostgreSQL socket path ${socket} is longer than ${MAX_SOCKET_PATH} bytes`, {
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
        await releaseOwnership(this.dataDir);
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

  /**
   * Removes a directory tree with the rights of PostgreSQL's OS user, not the runtime's. As root, a
   * path in the data directory is one the OS user can rearrange between a check and the removal (a
   * component swapped for a symlink), so the removal must not be able to delete anything that user
   * could not delete itself.
   */
  async removeAsOsUser(dir: string): Promise<void> {
    if (!this.switchUser) return rm(dir, { recursive: true, force: true });
    const { cwd, env } = this.spawnOptions();
    await execFileAsync('rm', ['-rf', '--', dir], { cwd, env, uid: this.opts.osUser.uid, gid: this.opts.osUser.gid });
  }

  /** A new admin connection over the private socket (trust authentication). */
  connect(database = 'postgres', user = 'postgres', settings?: SessionSettings): Promise<SqlClient> {
    return SqlClient.connect({ socketDir: this.socketDir, port: this.opts.port, user, database, applicationName: 'pgx-runtime', settings });
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
    await releaseOwnership(this.dataDir);
    // The private socket directory is ours alone; PostgreSQL removed its socket, leave no empty dir.
    await rm(this.socketDir, { recursive: true, force: true });
    this.work = undefined;
    this.stopping = undefined;
    this.setState('stopped');
  }

  /** Everything from an empty or existing data directory to a PostgreSQL answering `SELECT 1`. */
  private async launch(signal: AbortSignal): Promise<void> {
    const { binDir, osUser, port, clock } = this.opts;
    const { dataDir, socketDir, switchUser, logs, log } = this;
    await prepareDataDirectory({ dataDir, socketDir, binDir, osUser, switchUser, logs, log, clock, spawnOptions: (s) => this.spawnOptions(s) }, signal);
    await claimOwnership(dataDir);
    await clearLeftovers({ dataDir, socketDir, port, log, clock }, signal);
    signal.throwIfAborted();
    const child = this.spawnPostgres();
    await this.waitReady(child, signal);
    if (child.exit) throw this.exitedError(child, 'right after it became ready');
    child.readyAt = this.opts.clock.monotonic();
    this.log.info('postgres-ready', { pid: child.pid, socket: socketPath(this.socketDir, this.opts.port) });
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
        this.logs.remember(`spawn failed: ${err.message}`);
        onExit({ code: null, signal: null });
      } else {
        this.log.warn('postgres-signal-failed', { pid: proc.pid, error: err });
      }
    });
    this.logs.pipePostgres(proc);
    this.child = child;
    this.log.info('postgres-spawned', { pid: child.pid, dataDir: this.dataDir, user: this.opts.osUser.name, oomProtected: protectedChild });
    if (!protectedChild) {
      // Root without CAP_SYS_RESOURCE is a container that dropped it: say what is missing, not "be root".
      const root = process.getuid?.() === 0;
      this.log.warn('postmaster-not-oom-protected', {
        reason: root ? 'this root process lacks CAP_SYS_RESOURCE, which lowering oom_score_adj needs' : 'lowering oom_score_adj needs CAP_SYS_RESOURCE (root has it unless a container drops it)',
        backendsOomScoreAdj: UNPROTECTED_CHILD_OOM_SCORE,
        detail: `PostgreSQL's children raise their oom_score_adj to ${UNPROTECTED_CHILD_OOM_SCORE} instead, so the OOM killer takes one of them before the postmaster or the runtime.`,
        hint: root
          ? 'Give the container CAP_SYS_RESOURCE (docker run --cap-add SYS_RESOURCE; in Kubernetes securityContext.capabilities.add: [SYS_RESOURCE]) for the postmaster at -1000 and backends at 0.'
          : 'Run the runtime as root with CAP_SYS_RESOURCE (it runs PostgreSQL as an unprivileged user) for the postmaster at -1000 and backends at 0.',
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
    this.log.error('postgres-died', { pid: child.pid, exit: describeExit(child.exit), uptimeMs, lastLines: this.logs.tail(10) });
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
          detail: this.logs.tail(10),
          cause: lastError,
        });
      }
      await sleep(POLL_MS, undefined, { signal });
    }
  }

  private exitedError(child: Child, when: string): PgxError {
    return new PgxError('POSTGRES_FAILED', `PostgreSQL exited ${when} (${describeExit(child.exit)}): ${this.logs.tail(10)}`, {
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
}
