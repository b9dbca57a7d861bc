// What the engine needs from the rest of the runtime. The CLI wires real implementations in; the
// engine never imports runtime/, and runtime/ imports nothing of the engine but these types, which its
// parts implement (test/architecture.test.ts holds both to that). Types only: nothing here runs.

import type { SecureContext } from 'node:tls';
import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';
import type { ControlFunction } from './control-functions.js';

/** Where the supervised PostgreSQL listens: its private Unix socket. */
export interface BackendAddress {
  socketDir: string;
  port: number;
}

export interface BackendStatus {
  /** True while PostgreSQL answers; false while it starts, restarts or stops. */
  accepting(): boolean;
}

export interface Credentials {
  /** The SCRAM-SHA-256 verifier stored for a role, or null if the role has none (or does not exist). */
  scramVerifier(user: string): Promise<string | null>;
  /**
   * Whether `user` is a superuser: asked only when a session would exceed its database's cap, since
   * PostgreSQL lets superusers past a database's connection limit. Absent: nobody is exempt.
   */
  isSuperuser?(user: string): Promise<boolean>;
}

export type AuthMode = 'trust' | 'scram';

export interface EngineOptions {
  host: string;
  port: number;
  /** Directory for the engine's own Unix socket (.s.PGSQL.<port>), or null for TCP only. */
  socketDir: string | null;
  backend: BackendAddress;
  backendStatus: BackendStatus;
  credentials: Credentials;
  /**
   * What unknown roles' mock SCRAM salts derive from; kept across restarts (the data directory's
   * secret), so a salt cannot tell a real role from an unknown one. Absent: random per engine.
   */
  mockAuthSecret?: Buffer;
  /** trust: loopback and Unix socket connections need no password; others use SCRAM. */
  auth: AuthMode;
  /** Client sessions at once; beyond it 53300. */
  maxClients: number;
  /** Client sessions per database unless the router sets another limit; null for none. Beyond it 53300. */
  maxSessionsPerDatabase?: number | null;
  /**
   * Sessions per database with a transaction in progress at once (active-slots.ts); the next waits its
   * turn, up to activeWaitTimeoutMs, then 53300. null or absent: no cap.
   */
  maxActivePerDatabase?: number | null;
  activeWaitTimeoutMs?: number;
  /** PostgreSQL backends the engine may hold open (active and idle). */
  maxBackends: number;
  /** Of maxBackends, kept for the admin (adminRoles, the Unix socket). Default: 3, at most a quarter. */
  reservedBackends?: number;
  /** Sessions one role / one database may hold at once (backend-shares.ts). Default: half of the unreserved backends. */
  maxBackendsPerRole?: number;
  maxBackendsPerDatabase?: number;
  /** The runtime's own roles: sessions as them take no share and may use the reserved backends. */
  adminRoles?: string[];
  /** Idle pooled backends kept at most (default 10); the least recently used beyond it are closed. */
  maxIdleBackends?: number;
  /** How long an idle pooled backend is kept. */
  backendIdleTimeoutMs: number;
  /** How long a client may wait for a backend when all are busy. */
  backendWaitTimeoutMs: number;
  /**
   * Failed logins per (source address, user) within a minute, past which that pair's attempts take
   * turns at a growing delay, and are refused (28000) when their turn is too far off; null: no limit.
   * Default 20.
   */
  loginFailureLimit?: number | null;
  /** The runtime's superuser (default postgres): over the Unix socket its logins are never throttled. */
  adminUser?: string;
  /** How long a client may take from connect to authenticated. */
  loginTimeoutMs: number;
  /** Memory limits on tenant backends (memory-watchdog.ts); absent: none. */
  memoryLimits?: MemoryLimits;
  /** TLS for TCP clients (SSLRequest answered 'S'); absent: SSLRequest is answered 'N'. */
  tls?: EngineTls;
  /** Mint-on-connect and other routing; absent: every name goes to PostgreSQL as it is. */
  router?: Router;
  sessionObserver?: SessionObserver;
  /** Control functions; absent: calls go to PostgreSQL, which does not know them. */
  control?: ControlFunctions;
  logger: Logger;
  clock: Clock;
}

/** Memory limits on tenant backends, enforced by memory-watchdog.ts (53200). */
export interface MemoryLimits {
  /** MB one backend may hold; null: no limit. */
  sessionMb: number | null;
  /** MB a database's backends may hold together, unless databaseOverride says otherwise; null: none. */
  databaseMb: number | null;
  /** MB every tenant backend may hold together; null: none. */
  runtimeMb: number | null;
  /** A database's own limit (null: none; undefined: databaseMb applies). */
  databaseOverride?: (database: string) => number | null | undefined;
  /** How often backends are measured; a runaway query allocates hundreds of MB a second. */
  intervalMs: number;
  /** The cgroup guard: its limit and a reader of the memory charged to it that cannot be reclaimed. */
  cgroup?: { limitMb: number; usedMb: () => Promise<number | null> };
}

export interface EngineTls {
  /** The certificate and key in use now (read per handshake, so a reload takes effect at once). */
  secureContext(): SecureContext;
  /** Refuse TCP clients that do not encrypt (28000), as a hostssl-only pg_hba.conf does. */
  require: boolean;
}

/** Who is asking, for permission checks by the runtime. */
export interface Caller {
  user: string;
  database: string;
}

/**
 * Turns a database name from a startup packet into a database PostgreSQL has: for a name under the
 * mint prefix (`tdb_<template>__<token>`) it creates the database from its sealed template, once even
 * when many clients ask at the same moment. Resolves when the client may be connected to `database`;
 * rejects with a PgxError (3D000 unknown or unsealed template, 53400 database cap, 57P03 mint queue
 * full or timed out) that the engine shows the client as FATAL.
 */
export interface Router {
  /** `early`: resolve as soon as the client's login may go out beside the mint (Route.made). */
  route(caller: Caller, early?: boolean): Promise<Route | void>;
}

/** What the router says about a database it let the client through to. */
export interface Route {
  /** Client sessions allowed on it at once (null: no limit); overrides maxSessionsPerDatabase. */
  maxSessions?: number | null;
  /**
   * The login baseline's rows for the connecting role (login-check.ts settingsRowsSql), read in the
   * transaction that gave the database its name (a warm mint's claim), so before any login to it: the
   * new backend sends no baseline query of its own. Only ever for the role they were read for.
   */
  loginBaselineRows?: (string | null)[][];
  /**
   * The database is still being given its name (a warm mint's claim, sent): the client's login may go
   * out now, beside it, but the backend serves the client only once this resolves. A login that looked
   * the name up before the claim committed (3D000) is made again; if this rejects (the mint failed,
   * with the error the client is to see), the backend is closed unserved, whatever it logged into.
   */
  made?: Promise<unknown>;
}

/** Told when client sessions on a database begin and end (the janitor's grace clock). */
export interface SessionObserver {
  sessionStarted(database: string): void;
  sessionEnded(database: string): void;
}

/** A control function's key (control-functions.ts declares each, with its names and arguments). */
export type { ControlFunction } from './control-functions.js';

export interface ControlFunctions {
  /**
   * Runs a control function and returns its text result (JSON for runtime_status). Rejects with a
   * PgxError (42501 not allowed, 3D000 unknown database, 22023 bad argument, ...) that the client sees
   * as an ordinary ERROR: its session goes on.
   */
  call(fn: ControlFunction, args: (string | null)[], caller: Caller): Promise<string>;
}
