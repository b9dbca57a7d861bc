// DisposableDatabases against a real test runtime, with the settings a test needs (a short
// grace, a given pool size). The runtime's own, if `pgx start` wired them in (exposed as
// `runtime.disposableDatabases`), are stopped first: two sets must not share pgx_control. `wire: true` sets
// the test's facade on the running engine's options (which the engine reads per connection), so tests
// go end to end through a real client; without it the engine routes no names at all.

import { settingsRowsSql } from '../../src/engine/login-check.js';
import pg from 'pg';
import { systemClock, type Clock } from '../../src/clock.js';
import type { ControlFunctions, Router, SessionObserver } from '../../src/engine/ports.js';
import type { DatabaseSettings } from '../../src/runtime/databases/settings.js';
import { DisposableDatabases } from '../../src/runtime/databases/disposable-databases.js';
import type { EngineSessions } from '../../src/runtime/databases/dropper.js';
import type { Logger } from '../../src/log.js';
import type { SqlClient } from '../../src/runtime/postgres/sql-client.js';
import { testLogger, startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import type { DiskRoom } from '../../src/runtime/postgres/disk-guard.js';
import { probeStorage, type StorageCapability } from '../../src/runtime/postgres/storage-probe.js';

export interface Termination {
  database: string;
  message: string;
  hint: string | undefined;
}

export interface Harness {
  rt: TestRuntime;
  dbs: DisposableDatabases;
  /** Every terminateSessions call the facade made on the engine. */
  terminations: Termination[];
  /** A superuser connection straight to PostgreSQL (not through the engine). */
  admin: SqlClient;
  /** Stops the facade only (the runtime keeps running). */
  stopDatabases(): Promise<void>;
  /** Stops facade and runtime. */
  stop(): Promise<void>;
}

/** Settings that make the janitor act within a test's patience. */
export const FAST: Partial<DatabaseSettings> = {
  graceSeconds: 1,
  protectSeconds: 0.3,
  janitorIntervalMs: 100,
};

export async function startHarness(
  opts: {
    settings?: Partial<DatabaseSettings>;
    wire?: boolean;
    rt?: TestRuntime;
    runtime?: Parameters<typeof startTestRuntime>[0];
    clock?: Clock;
    logger?: Logger;
    /** What the data filesystem can do; default probed (tests run on a tmpfs: no clones). */
    storage?: StorageCapability;
    /** A disk guard; default none (free space not watched). */
    disk?: DiskRoom;
  } = {},
): Promise<Harness> {
  const rt = opts.rt ?? (await startTestRuntime(opts.runtime));
  const { engine, supervisor } = rt.runtime;
  await stopBuiltInDatabases(rt);
  const terminations: Termination[] = [];
  const engineSessions: EngineSessions = {
    terminateSessions: (database, message, hint) => {
      terminations.push({ database, message, hint });
      return engine.terminateSessions(database, message, hint);
    },
    sessionsPerDatabase: () => engine.sessionsPerDatabase(),
    closeIdleBackends: (database) => engine.closeIdleBackends(database),
    loginBaselineSql: settingsRowsSql,
  };
  const dbs = new DisposableDatabases({
    connect: (database, user = 'postgres', settings) => supervisor.connect(database, user, settings),
    storage: opts.storage ?? (await probeStorage(rt.dataDir)),
    ...(opts.disk ? { disk: opts.disk } : {}),
    postgres: { socketDir: rt.runtime.supervisor.socketDirectory, port: 5432, dataDir: rt.dataDir },
    removeAsOsUser: (dir) => supervisor.removeAsOsUser(dir),
    engine: engineSessions,
    settings: opts.settings ?? {},
    version: 'test',
    postgresVersion: rt.runtime.pgVersion,
    postgresPid: () => supervisor.pid,
    clock: opts.clock ?? systemClock,
    logger: opts.logger ?? testLogger(),
  });
  // The parts fit the engine's ports as they are declared: this fails to compile if they drift.
  const router: Router = dbs.router;
  const observer: SessionObserver = dbs.sessions;
  const control: ControlFunctions = dbs.control;
  if (opts.wire) {
    engine.options.router = router;
    engine.options.sessionObserver = observer;
    engine.options.control = control;
  }
  await dbs.start();
  const admin = await supervisor.connect('postgres', 'postgres');
  let dbsStopped = false;
  const stopDatabases = async (): Promise<void> => {
    if (dbsStopped) return;
    dbsStopped = true;
    if (opts.wire) {
      delete engine.options.router;
      delete engine.options.sessionObserver;
      delete engine.options.control;
    }
    await dbs.stop();
  };
  return {
    rt,
    dbs,
    terminations,
    admin,
    stopDatabases,
    async stop() {
      await admin.close();
      await stopDatabases();
      await rt.stop();
    },
  };
}

/** Stops the facade `pgx start` wired into the runtime, if it has one, and unhooks it from the engine. */
export async function stopBuiltInDatabases(rt: TestRuntime): Promise<void> {
  const builtIn = (rt.runtime as { disposableDatabases?: { stop(): Promise<void> } }).disposableDatabases;
  await builtIn?.stop();
  const { options } = rt.runtime.engine;
  delete options.router;
  delete options.sessionObserver;
  delete options.control;
}

/** Makes `name` with a users table and seals nothing: the seed quickstart's first two steps. */
export async function createTemplateDatabase(h: Harness, name: string, owner = 'postgres'): Promise<void> {
  await h.admin.query(`CREATE DATABASE ${name} OWNER ${owner}`);
  const c = await h.rt.runtime.supervisor.connect(name, 'postgres');
  try {
    await c.query(`CREATE TABLE users (id bigserial PRIMARY KEY, email text UNIQUE); ALTER TABLE users OWNER TO ${owner}`);
  } finally {
    await c.close();
  }
}

/** A node-postgres client through the engine. */
export async function connectClient(h: Harness, database: string, user = 'postgres'): Promise<pg.Client> {
  const client = new pg.Client(h.rt.connection(database, user));
  client.on('error', () => {});
  await client.connect();
  return client;
}

export async function databaseExists(h: Harness, name: string): Promise<boolean> {
  const { rows } = await h.admin.query(`SELECT 1 FROM pg_database WHERE datname = '${name}'`);
  return rows.length > 0;
}

/** The error a promise rejects with (fails the test if it resolves). */
export async function rejection(p: Promise<unknown>): Promise<Error & { code?: string; sqlstate?: string; hint?: string }> {
  try {
    await p;
  } catch (err) {
    return err as Error;
  }
  throw new Error('expected a rejection, but it resolved');
}

/**
 * The warm pool's refill backends: a refill's last statement after each spare reads whether any
 * database has a login event trigger (login-triggers.ts), and nothing else runs that query.
 */
export const REFILL_BACKENDS_SQL = "SELECT pid FROM pg_stat_activity WHERE state = 'idle' AND query LIKE '%pg_database WHERE dathasloginevt)'";
