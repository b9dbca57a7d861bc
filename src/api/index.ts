// Starts the HTTP API for a running runtime (used by src/cli/start.ts): the control API (--api-port,
// with its token) and, on a port of its own, the metrics-only listener (--metrics-port, no token), both
// answering from one context, so /metrics reads the same counters on either.

import type { Clock } from '../clock.js';
import { PgxError } from '../errors.js';
import type { Logger } from '../log.js';
import { BearerToken } from './auth.js';
import type { CreatedDatabaseBody } from './contract.js';
import type { ApiContext } from './handlers.js';
import { IdempotencyStore } from './idempotency.js';
import { isLoopback } from './loopback.js';
import { ApiMetrics, type PoolBounds } from './metrics.js';
import { ApiServer } from './server.js';

export interface StartApiOptions {
  host: string;
  /** null: no control API (the metrics listener alone, when given). */
  port: number | null;
  /** The metrics-only listener (/metrics, /healthz, /readyz, no token); null: none. */
  metrics: { host: string; port: number } | null;
  /** null: no token (refused unless the host is loopback). */
  token: string | null;
  /** The warm pool's settings, for the metrics of its bounds. */
  pool: PoolBounds;
  ctx: Omit<ApiContext, 'creates' | 'metrics' | 'logger'>;
  clock: Clock;
  logger: Logger;
}

/** Checks the token rule before anything starts: a non-loopback API needs a token (a loopback one answers only loopback callers: server.ts). */
export function checkApiExposure(host: string, token: string | null, logger: Logger): void {
  if (token !== null) return;
  if (!isLoopback(host)) {
    throw new PgxError('CONFIG_INVALID', `the HTTP API would listen on ${host} without a token`, {
      hint: 'Give a token with --api-token-file FILE or PGX_API_TOKEN, or listen on 127.0.0.1 (--api-host).',
    });
  }
  logger.warn('api-without-token', { host, hint: 'anyone on this machine may use the API; set --api-token-file or PGX_API_TOKEN' });
}

/** The listeners started: each null when not asked for. */
export interface ApiListeners {
  api: ApiServer | null;
  metrics: ApiServer | null;
  stop(): Promise<void>;
}

/** Starts the API and the metrics listener; call checkApiExposure first (before the runtime starts, so a refusal costs nothing). */
export async function startApi(opts: StartApiOptions): Promise<ApiListeners> {
  const metrics = new ApiMetrics(opts.pool);
  // The API lives as long as the runtime's databases: the listener needs no removal.
  opts.ctx.databases.onMint((source, ms) => metrics.observeMint(source, ms));
  const ctx = { ...opts.ctx, creates: new IdempotencyStore<CreatedDatabaseBody>(opts.clock), metrics, logger: opts.logger };
  const started: ApiServer[] = [];
  const listen = async (host: string, port: number, metricsOnly: boolean): Promise<ApiServer> => {
    const token = metricsOnly || opts.token === null ? null : new BearerToken(opts.token);
    const server = new ApiServer({ host, port, token, metricsOnly, ctx, clock: opts.clock, logger: opts.logger });
    await server.start();
    started.push(server);
    return server;
  };
  const stop = async (): Promise<void> => {
    for (const server of started.splice(0)) await server.stop();
  };
  try {
    const api = opts.port === null ? null : await listen(opts.host, opts.port, false);
    const metricsServer = opts.metrics === null ? null : await listen(opts.metrics.host, opts.metrics.port, true);
    return { api, metrics: metricsServer, stop };
  } catch (err) {
    await stop();
    throw err;
  }
}
