// Starts the HTTP API for a running runtime (used by src/cli/start.ts).

import type { Clock } from '../clock.js';
import { PgxError } from '../errors.js';
import type { Logger } from '../log.js';
import { BearerToken, isLoopbackHost } from './auth.js';
import type { CreatedDatabaseBody } from './contract.js';
import type { ApiContext } from './handlers.js';
import { IdempotencyStore } from './idempotency.js';
import { ApiMetrics } from './metrics.js';
import { ApiServer } from './server.js';

export interface StartApiOptions {
  host: string;
  port: number;
  /** null: no token (refused unless the host is loopback). */
  token: string | null;
  ctx: Omit<ApiContext, 'creates' | 'metrics' | 'logger'>;
  clock: Clock;
  logger: Logger;
}

/** Checks the token rule before anything starts: a non-loopback API needs a token. */
export function checkApiExposure(host: string, token: string | null, logger: Logger): void {
  if (token !== null) return;
  if (!isLoopbackHost(host)) {
    throw new PgxError('CONFIG_INVALID', `the HTTP API would listen on ${host} without a token`, {
      hint: 'Give a token with --api-token-file FILE or PGX_API_TOKEN, or listen on 127.0.0.1 (--api-host).',
    });
  }
  logger.warn('api-without-token', { host, hint: 'anyone on this machine may use the API; set --api-token-file or PGX_API_TOKEN' });
}

/** Starts the API; call checkApiExposure first (before the runtime starts, so a refusal costs nothing). */
export async function startApi(opts: StartApiOptions): Promise<ApiServer> {
  const metrics = new ApiMetrics();
  // The API lives as long as the runtime's databases: the listener needs no removal.
  opts.ctx.databases.onMint((source, ms) => metrics.observeMint(source, ms));
  const server = new ApiServer({
    host: opts.host,
    port: opts.port,
    token: opts.token === null ? null : new BearerToken(opts.token),
    ctx: { ...opts.ctx, creates: new IdempotencyStore<CreatedDatabaseBody>(opts.clock), metrics, logger: opts.logger },
    clock: opts.clock,
    logger: opts.logger,
  });
  await server.start();
  return server;
}
