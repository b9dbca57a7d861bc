// The HTTP listener: the only file in PGX that touches node:http. It reads the request (with a size
// cap and timeouts), hands it to dispatch(), writes the answer and logs one line per request.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock } from '../clock.js';
import { PgxError } from '../errors.js';
import type { Logger } from '../log.js';
import type { BearerToken } from './auth.js';
import type { ApiContext } from './handlers.js';
import { bodyLimit, dispatch, type ApiResponse } from './router.js';

export interface ApiServerOptions {
  host: string;
  port: number;
  token: BearerToken | null;
  ctx: ApiContext;
  clock: Clock;
  logger: Logger;
  requestTimeoutMs?: number;
  headersTimeoutMs?: number;
}

export class ApiServer {
  private readonly server: http.Server;
  port = 0;

  constructor(private readonly opts: ApiServerOptions) {
    this.server = http.createServer(
      {
        requestTimeout: opts.requestTimeoutMs ?? 60_000,
        headersTimeout: opts.headersTimeoutMs ?? 10_000,
        keepAliveTimeout: 5_000,
        maxHeaderSize: 16 * 1024,
      },
      (req, res) => void this.handle(req, res),
    );
    this.server.maxHeadersCount = 100;
  }

  async start(): Promise<number> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen({ host: this.opts.host, port: this.opts.port }, () => {
        this.server.off('error', reject);
        resolve();
      });
    });
    this.port = (this.server.address() as AddressInfo).port;
    return this.port;
  }

  async stop(): Promise<void> {
    if (!this.server.listening) return;
    const closed = new Promise<void>((resolve) => this.server.close(() => resolve()));
    this.server.closeIdleConnections();
    // Requests in flight get a moment; then their connections are cut.
    const timer = setTimeout(() => this.server.closeAllConnections(), 2_000);
    await closed;
    clearTimeout(timer);
  }

  private async handle(req: http.IncomingMessage, res: http.ServerResponse): Promise<void> {
    const { clock, logger, ctx } = this.opts;
    const started = clock.monotonic();
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0]!;
    let response: ApiResponse;
    try {
      const body = await readBody(req, bodyLimit(method, path));
      response = await dispatch(
        {
          method,
          path,
          authorization: req.headers.authorization,
          idempotencyKey: header(req.headers['idempotency-key']),
          contentType: header(req.headers['content-type']),
          body,
        },
        ctx,
        this.opts.token,
      );
    } catch (err) {
      // Only reading the body throws here: too large, or the client went away.
      const e = err instanceof PgxError ? err : new PgxError('PROTOCOL_VIOLATION', 'could not read the request body');
      const status = e.message.startsWith('request body exceeds') ? 413 : 400;
      response = {
        status,
        headers: { 'content-type': 'application/json; charset=utf-8', connection: 'close' },
        body: JSON.stringify({ code: e.code, sqlstate: e.sqlstate, message: e.message, hint: e.hint ?? null }),
        route: 'unmatched',
        requestId: header(req.headers['idempotency-key']),
      };
    }
    if (!res.headersSent && !res.destroyed) {
      res.writeHead(response.status, { ...response.headers, 'content-length': Buffer.byteLength(response.body) });
      res.end(response.body);
    }
    ctx.metrics.requests.inc({ method, route: response.route, status: String(response.status) });
    logger.info('api-request', {
      method,
      path,
      status: response.status,
      ms: Math.round((clock.monotonic() - started) * 100) / 100,
      request_id: response.requestId ?? null,
    });
  }
}

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function readBody(req: http.IncomingMessage, maxBytes: number): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (chunk: Buffer) => {
      size += chunk.length;
      if (size > maxBytes) {
        reject(new PgxError('PROTOCOL_VIOLATION', `request body exceeds ${maxBytes} bytes`));
        req.resume();
        return;
      }
      chunks.push(chunk);
    });
    req.on('end', () => resolve(Buffer.concat(chunks).toString('utf8')));
    req.on('error', reject);
  });
}
