// What a `pgx start` decides before anything runs: paths, binaries, the OS user, authentication, the
// API token, TLS, the disposable databases' settings, and the memory limits in force. start.ts starts
// the parts with it.

import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { CGROUP_GUARD } from '../engine/memory-watchdog.js';
import { PgxError } from '../errors.js';
import type { Logger } from '../log.js';
import { checkApiExposure } from '../api/index.js';
import type { DatabaseSettings } from '../runtime/databases/settings.js';
import { cgroupLimit, unreclaimableBytes } from '../runtime/postgres/cgroup.js';
import { protectRuntime } from '../runtime/postgres/oom.js';
import { assertReachable, resolvePgOsUser, type OsUser } from '../runtime/postgres/os-user.js';
import { locatePgBinaries, type PgBinaries } from '../runtime/postgres/pg-binaries.js';
import { ADMIN_ROLE } from '../runtime/postgres/role-credentials.js';
import { inContainer, type RuntimeConfig } from './config.js';
import { TlsCertificate } from './tls-certificate.js';

/** Share of the cgroup's memory limit the runtime limit defaults to (PGX advises 70-80%): the rest is
 * shared buffers, node, idle backends and page cache, and margin before the kernel's OOM killer. */
const CGROUP_SHARE = 0.75;
/** What a start decides before anything runs: paths, binaries, the OS user, authentication, TLS. */
export interface StartPlan {
  dataDir: string;
  binaries: PgBinaries;
  osUser: OsUser;
  socketDir: string;
  auth: 'trust' | 'scram';
  token: string | null;
  certificate: TlsCertificate | null;
  databaseSettings: Partial<DatabaseSettings>;
}

export async function planStart(config: RuntimeConfig, logger: Logger): Promise<StartPlan> {
  const dataDir = path.resolve(config.dataDir);
  const binaries = await locatePgBinaries({ ...(config.pgBin ? { pgBin: config.pgBin } : {}), logger });
  const osUser = await resolvePgOsUser(logger);
  await assertReachable(dataDir, osUser, 'data-dir');
  await assertReachable(path.join(binaries.binDir, 'postgres'), osUser, 'pg-bin');
  const auth = config.auth ?? (inContainer() ? 'scram' : 'trust');
  const token = config.apiPort === null ? null : apiToken(config);
  // A scram runtime given no token makes one (keptApiToken, once the data directory exists).
  if (config.apiPort !== null && auth !== 'scram') checkApiExposure(config.apiHost, token, logger.child({ component: 'api' }));
  const certificate = tlsCertificate(config, logger.child({ component: 'tls' }));
  checkConfiguredAdmin(config);
  // With passwords checked (scram), minting is PGX's right to grant (pgx_minters): tenants need no
  // CREATEDB, so PostgreSQL's CREATE DATABASE is not in their hands. Trust mode keeps a developer's
  // CREATEDB habit.
  const mintRoles = config.mintRoles ?? (auth === 'scram' ? 'group' : 'createdb');
  const databaseSettings: Partial<DatabaseSettings> = {
    prefix: config.prefix,
    graceSeconds: config.grace,
    tombstoneSeconds: config.tombstone,
    snapshotRetention: config.snapshotRetention,
    poolSize: config.poolSize,
    poolMax: config.poolMax,
    poolIdleSeconds: config.poolIdle,
    mintRoles: Array.isArray(mintRoles) ? { kind: 'list', roles: mintRoles } : { kind: mintRoles },
    maxDatabases: config.maxDatabases,
    maxDatabasesPerRole: config.maxDatabasesPerRole,
    mintQueueSize: config.mintQueueSize,
    mintTimeoutSeconds: config.mintTimeout,
    ...(config.allowExtensions ? { allowedExtensions: config.allowExtensions } : {}),
  };
  return { dataDir, binaries, osUser, socketDir: privateSocketDir(), auth, token, certificate, databaseSettings };
}

/**
 * PostgreSQL's private socket directory: short (socket paths are limited to 107 bytes), and new for
 * each runtime, made here under a name nobody can guess (mkdtemp), so nobody on the machine can put a
 * directory or a symlink there first (data-directory.ts refuses one it did not make).
 */
function privateSocketDir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'pgx-'));
}

export interface MemorySettings {
  sessionMb: number | null;
  databaseMb: number | null;
  runtimeMb: number | null;
  cgroupMb: number | null;
  /** The cgroup guard, when the runtime limit is derived from the cgroup's (memory-watchdog.ts). */
  cgroup?: { limitMb: number; usedMb: () => Promise<number | null> };
}

/**
 * The memory limits in force: as configured, with the runtime's derived from the cgroup's when not
 * given: 75% of it for tenant backends, and the cgroup's unreclaimable memory kept under 90% of it
 * (node, shared buffers and idle backends live in the rest). A limit given is the operator's alone.
 */
export async function memoryLimitSettings(config: RuntimeConfig, logger: Logger): Promise<MemorySettings> {
  const limit = await cgroupLimit();
  const cgroupMb = limit === null ? null : Math.floor(limit.bytes / 2 ** 20);
  const runtimeMb = config.runtimeMemoryLimit ?? (cgroupMb === null ? null : Math.floor(cgroupMb * CGROUP_SHARE));
  const guarded = config.runtimeMemoryLimit === null && limit !== null && cgroupMb !== null;
  const settings = {
    sessionMb: config.sessionMemoryLimit,
    databaseMb: config.databaseMemoryLimit,
    runtimeMb,
    cgroupMb,
    ...(guarded
      ? { cgroup: { limitMb: cgroupMb, usedMb: async () => {
          const bytes = await unreclaimableBytes(limit);
          return bytes === null ? null : bytes / 2 ** 20;
        } } }
      : {}),
  };
  // The OOM killer's last resort among the runtime's processes, where it may lower its score (oom.ts).
  logger.info('memory-limits', {
    sessionMb: settings.sessionMb, databaseMb: settings.databaseMb, runtimeMb, cgroupMb,
    cgroupGuardMb: guarded ? Math.floor(cgroupMb * CGROUP_GUARD) : null, cgroupDir: limit?.dir,
    runtimeOomScoreAdj: protectRuntime(),
  });
  if (config.runtimeMemoryLimit !== null && cgroupMb !== null && config.runtimeMemoryLimit > cgroupMb * 0.8) {
    logger.warn('runtime-memory-limit-near-cgroup-limit', {
      runtimeMb,
      cgroupMb,
      hint: `Leave room for shared buffers, the runtime itself and page cache: at most ${Math.floor(cgroupMb * 0.8)} MB (80%), or the kernel's OOM killer may act first.`,
    });
  }
  return settings;
}

/** The TLS certificate when --tls-cert and --tls-key are given (both or neither); read now, so a bad file stops the start. */
function tlsCertificate(config: RuntimeConfig, logger: Logger): TlsCertificate | null {
  if (config.tlsCert === undefined && config.tlsKey === undefined) {
    if (config.tlsRequire) throw new PgxError('CONFIG_INVALID', '--tls-require needs a certificate', { hint: 'Give --tls-cert FILE and --tls-key FILE.' });
    return null;
  }
  if (config.tlsCert === undefined || config.tlsKey === undefined) {
    throw new PgxError('CONFIG_INVALID', `--tls-${config.tlsCert === undefined ? 'cert' : 'key'} is missing`, { hint: 'TLS needs both --tls-cert FILE and --tls-key FILE.' });
  }
  return new TlsCertificate(config.tlsCert, config.tlsKey, logger);
}

/** The API's token: apiToken, else apiTokenFile's first line, else PGX_API_TOKEN; null for none. */
function apiToken(config: RuntimeConfig): string | null {
  if (config.apiToken !== undefined) return config.apiToken;
  if (config.apiTokenFile !== undefined) {
    let text: string;
    try {
      text = fs.readFileSync(config.apiTokenFile, 'utf8');
    } catch (err) {
      throw new PgxError('CONFIG_INVALID', `cannot read --api-token-file ${config.apiTokenFile}: ${(err as Error).message}`, { cause: err });
    }
    const token = text.split('\n')[0]!.trim();
    if (token.length < 16) throw new PgxError('CONFIG_INVALID', `--api-token-file ${config.apiTokenFile}: the token must be at least 16 characters`);
    return token;
  }
  const env = process.env.PGX_API_TOKEN?.trim();
  if (env !== undefined && env.length > 0) {
    if (env.length < 16) throw new PgxError('CONFIG_INVALID', 'PGX_API_TOKEN: the token must be at least 16 characters');
    return env;
  }
  return null;
}

/** A `postgres` entry in the config's users sets the admin's password; it cannot make the admin a tenant. */
function checkConfiguredAdmin(config: RuntimeConfig): void {
  const entry = config.users.find((u) => u.name === ADMIN_ROLE);
  if (entry !== undefined && (entry.superuser === false || entry.mint === false)) {
    throw new PgxError('CONFIG_INVALID', `users: "${ADMIN_ROLE}" is the runtime's admin, always a superuser; its entry can only set the admin password`, {
      hint: `Drop "superuser"/"mint" from the ${ADMIN_ROLE} entry, or give the tenant a name of its own (e.g. "app").`,
    });
  }
}
