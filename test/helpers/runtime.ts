// Starts real PGX runtimes for tests: a real PostgreSQL 18 under the real engine, on a random TCP port
// and a private Unix socket directory. The first call runs initdb once into a cached cluster; each
// runtime gets a copy of it, so tests do not pay initdb every time.

import { execFileSync } from 'node:child_process';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startRuntime, type RunningRuntime } from '../../src/cli/start.js';
import { parseConfig, type RuntimeConfig } from '../../src/cli/config.js';
import { createLogger, silentLogger, type Logger } from '../../src/log.js';
import { scratchDir, testCacheDir } from './scratch.js';

export interface TestRuntime {
  runtime: RunningRuntime;
  config: RuntimeConfig;
  port: number;
  host: string;
  socketDir: string;
  dataDir: string;
  /** Connection settings for node-postgres / postgres.js. */
  connection(database?: string, user?: string): { host: string; port: number; user: string; database: string };
  /** Environment for psql/pgbench against the engine. */
  env(database?: string, user?: string): NodeJS.ProcessEnv;
  stop(): Promise<void>;
}

export function testLogger(): Logger {
  return process.env.PGX_TEST_LOG ? createLogger({ format: 'text', level: 'debug' }) : silentLogger;
}

/** The cluster initialised once per machine that test runtimes start from. */
function seedDataDir(): string {
  return path.join(testCacheDir(), 'seed-data');
}

/** Copies the seed cluster to `dataDir` if there is one yet (else pgx runs initdb there). */
export function copySeed(dataDir: string): void {
  const seed = seedDataDir();
  if (fs.existsSync(path.join(seed, 'PG_VERSION'))) execFileSync('cp', ['-a', seed, dataDir]);
}

/** A fresh data directory for a test under `parent`: a copy of a cluster initialised once per machine. */
export async function freshDataDir(parent = os.tmpdir()): Promise<string> {
  const cacheRoot = testCacheDir();
  const seed = seedDataDir();
  if (!fs.existsSync(path.join(seed, 'PG_VERSION'))) {
    fs.mkdirSync(cacheRoot, { recursive: true });
    const staging = fs.mkdtempSync(path.join(cacheRoot, 'init-'));
    fs.chmodSync(staging, 0o755);
    const rt = await startRuntime(
      parseConfig({ dataDir: path.join(staging, 'data'), port: 0, socketDir: null }, 'test'),
      testLogger(),
    );
    await rt.stop();
    try {
      // Each runtime writes its own disk reserve (disk-guard.ts): copying it would cost 64 MB a test.
      fs.rmSync(path.join(staging, 'data', 'pgx-disk-reserve'), { force: true });
      fs.renameSync(path.join(staging, 'data'), seed);
    } catch {
      // Another test process made the seed meanwhile; theirs is as good as ours.
    }
    fs.rmSync(staging, { recursive: true, force: true });
  }
  const dir = scratchDir('pgx-test-', parent);
  copySeed(path.join(dir, 'data'));
  return path.join(dir, 'data');
}

/**
 * `logger`: defaults to testLogger(); pass one to read what the runtime logs. The runtime owns its
 * socket directory, and its data directory unless `overrides.dataDir` names one: stop() removes
 * them, and so does a start that fails.
 */
export async function startTestRuntime(overrides: Partial<Record<keyof RuntimeConfig, unknown>> = {}, logger: Logger = testLogger()): Promise<TestRuntime> {
  const dataDir = (overrides.dataDir as string | undefined) ?? (await freshDataDir());
  const socketDir = scratchDir('pgx-sock-');
  const removeOwned = (): void => {
    fs.rmSync(socketDir, { recursive: true, force: true });
    if (!overrides.dataDir) fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
  };
  let config: RuntimeConfig;
  let runtime: RunningRuntime;
  try {
    config = parseConfig({ dataDir, port: 0, socketDir, auth: 'trust', ...overrides }, 'test');
    runtime = await startRuntime(config, logger);
  } catch (err) {
    removeOwned();
    throw err;
  }
  const port = runtime.engine.port;
  const host = config.host;
  return {
    runtime,
    config,
    port,
    host,
    socketDir,
    dataDir,
    connection: (database = 'postgres', user = 'postgres') => ({ host, port, user, database }),
    env: (database = 'postgres', user = 'postgres') => ({
      ...process.env,
      PGHOST: host,
      PGPORT: String(port),
      PGUSER: user,
      PGDATABASE: database,
      PGAPPNAME: '',
      PGCONNECT_TIMEOUT: '10',
    }),
    async stop() {
      await runtime.stop();
      removeOwned();
    },
  };
}
