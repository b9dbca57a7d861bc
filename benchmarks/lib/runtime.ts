// The PGX runtime under test: one PostgreSQL 18 (the runtime's own, supervised) and the engine in
// front of it, started in this process. For a TCP comparison PostgreSQL also gets a loopback listener
// (listen_addresses as a user setting, which the supervisor passes after its own), so direct clients
// use the same transport as clients of the engine and of PgBouncer.

import { chmodSync, mkdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { startRuntime } from '../../src/cli/start.js';
import { parseConfig } from '../../src/cli/config.js';
import { PgxError } from '../../src/errors.js';
import { silentLogger } from '../../src/log.js';
import type { Cleanup } from './cleanup.js';
import { portInUse } from './ports.js';
import type { Target } from './target.js';

export type Transport = 'tcp' | 'unix';

/** start.ts's PG_PORT: PostgreSQL's socket is .s.PGSQL.5432, and its TCP port when it has one. */
const PG_PORT = 5432;
const MAX_BACKENDS = 100;

export interface BenchRuntime {
  direct: Target;
  pgx: Target;
  /** PostgreSQL's private socket directory (PgBouncer's backend address, pgbench -i). */
  pgSocketDir: string;
  pgPort: number;
  pgVersion: string;
  maxBackends: number;
  pgSettings: Record<string, string>;
}

/**
 * Where a running runtime's PostgreSQL has its private socket: a new directory per runtime
 * (start-plan.ts), which PostgreSQL writes into postmaster.pid (its fifth line).
 */
export function privateSocketDir(dataDir: string): string {
  return readFileSync(path.join(dataDir, 'postmaster.pid'), 'utf8').split('\n')[4]!;
}

export async function startBenchRuntime(workDir: string, transport: Transport, cleanup: Cleanup): Promise<BenchRuntime> {
  const dataDir = path.join(workDir, 'data');
  const socketDir = path.join(workDir, 'pgx-sock');
  mkdirSync(socketDir, { recursive: true });
  chmodSync(socketDir, 0o755);
  const pgSettings: Record<string, string> = {};
  if (transport === 'tcp') {
    if (await portInUse(PG_PORT)) {
      throw new PgxError('CONFIG_INVALID', `127.0.0.1:${PG_PORT} is taken, and the runtime's PostgreSQL can only listen there`, {
        hint: 'Stop the server on port 5432, or run with --transport unix.',
      });
    }
    pgSettings.listen_addresses = '127.0.0.1';
  }
  const config = parseConfig({ dataDir, port: 0, socketDir, auth: 'trust', maxBackends: MAX_BACKENDS, pgSettings }, 'bench');
  const rt = await startRuntime(config, silentLogger);
  cleanup.add('PGX runtime', () => rt.stop());
  const pgSocketDir = rt.supervisor.socketDirectory;
  const enginePort = rt.engine.port;
  return {
    direct: transport === 'tcp' ? { name: 'direct', host: '127.0.0.1', port: PG_PORT } : { name: 'direct', host: pgSocketDir, port: PG_PORT },
    pgx: transport === 'tcp' ? { name: 'pgx', host: '127.0.0.1', port: enginePort } : { name: 'pgx', host: socketDir, port: enginePort },
    pgSocketDir,
    pgPort: PG_PORT,
    pgVersion: rt.pgVersion,
    maxBackends: MAX_BACKENDS,
    pgSettings,
  };
}
