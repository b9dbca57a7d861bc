// The HTTP listener: the only file in PGX that touches node:http. It admits a request on its head alone
// (route, token, declared size: router.ts) before reading a byte of its body, reads admitted bodies up to
// their route's cap within a budget shared by all requests, hands them to run(), writes the answer and
// logs one line per request. A metrics-only listener (pgx start --metrics-port) admits only the probes and
// /metrics, without a token: Prometheus scrapes it without holding control rights. A refused request is answered at once; its unread body is drained without
// being kept (a moment, then the connection closes), so a client still sending still reads the answer.
// A listener on loopback (or the control API without a token) first refuses a request naming another Host or
// carrying a foreign Origin (loopback.ts): a web page could reach it otherwise, by DNS rebinding or a
// cross-site POST, and the browser needs no token to send where there is none.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Clock } from '../clock.js';
import { PgxError } from '../errors.js';
import type { Logger } from '../log.js';
import type { BearerToken } from './auth.js';
import { ApiError } from './errors.js';
import type { ApiContext } from './handlers.js';
import { isLoopback, refuseForeign } from './loopback.js';
import { PATHS } from './paths.js';
import { admit, bodyTooLarge, errorAnswer, run, type Admission, type ApiResponse, type RequestHead } from './router.js';

export interface ApiServerOptions {
  host: string;
  port: number;
  token: BearerToken | null;
  /** Serve only METRICS_LISTENER_PATHS, without a token (the token is then not asked for). */
  metricsOnly?: boolean;
  ctx: ApiContext;
  clock: Clock;
  logger: Logger;
  requestTimeoutMs?: number;
  headersTimeoutMs?: number;
}

export class ApiServer {
  private readonly server: http.Server;
  port = 0;
  /** Answers only loopback callers: bound there, or the control API without a token (checkApiExposure binds that to loopback too). */
  private readonly loopbackOnly: boolean;

  constructor(private readonly opts: ApiServerOptions) {
    this.loopbackOnly = isLoopback(opts.host) || (opts.token === null && !opts.metricsOnly);
    this.server = http.createServer(
      {
        requestTimeout: opts.requestTimeoutMs ?? 60_000,
        headersTimeout: opts.headersTimeoutMs ?? 10_000,
        keepAliveTimeout: 5_000,
        maxHeaderSize: 16 * 1024,
      },
      (req, res) => void this.handle(req, res, false),
    );
    this.server.maxHeadersCount = 100;
    // Expect: 100-continue is answered only once the head is admitted: a refused client never sends its body.
    this.server.on('checkContinue', (req: http.IncomingMessage, res: http.ServerResponse) => void this.handle(req, res, true));
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

  /** Bytes of request bodies held now, by every request being read or run. */
  private bodyBytes = 0;

  private async handle(req: http.IncomingMessage, res: http.ServerResponse, expectsContinue: boolean): Promise<void> {
    const { clock, logger, ctx } = this.opts;
    const started = clock.monotonic();
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0]!;
    const head: RequestHead = {
      method,
      path,
      authorization: req.headers.authorization,
      idempotencyKey: header(req.headers['idempotency-key']),
      contentLength: req.headers['content-length'] === undefined ? undefined : Number(req.headers['content-length']),
    };
    let response: ApiResponse;
    const admission = this.refuseForeign(req, head) ?? (this.opts.metricsOnly ? admitMetricsOnly(head, ctx) : admit(head, ctx, this.opts.token));
    if (!admission.admitted) {
      response = admission.response;
      answerAndDrain(req, res, response);
    } else {
      response = await this.readAndRun(req, res, head, admission, expectsContinue);
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

  /** A refusal (403) of a request a loopback listener must not answer (loopback.ts); null to go on. */
  private refuseForeign(req: http.IncomingMessage, head: RequestHead): Admission | null {
    if (!this.loopbackOnly) return null;
    const bound = isLoopback(this.opts.host) ? this.opts.host : '127.0.0.1';
    const host = bound.includes(':') ? `[${bound}]` : bound;
    const refusal = refuseForeign({ host: req.headers.host, origin: header(req.headers.origin) }, `http://${host}:${this.port}`);
    return refusal === null ? null : { admitted: false, response: errorAnswer(refusal, this.opts.ctx, 'unmatched', head.idempotencyKey) };
  }

  /** Reads the body (holding its bytes against BODY_BUDGET_BYTES until the answer), runs the request, answers. */
  private async readAndRun(
    req: http.IncomingMessage,
    res: http.ServerResponse,
    head: RequestHead,
    admission: Admission & { admitted: true },
    expectsContinue: boolean,
  ): Promise<ApiResponse> {
    const { ctx } = this.opts;
    const route = admission.route.path;
    let held = 0;
    const hold = (bytes: number): boolean => {
      if (this.bodyBytes + bytes > BODY_BUDGET_BYTES) return false;
      this.bodyBytes += bytes;
      held += bytes;
      return true;
    };
    try {
      // Only once admitted and within the budget may the client send the body it announced with Expect: 100-continue.
      const read = await readBody(req, head.contentLength, admission.maxBodyBytes, hold, () => expectsContinue && res.writeContinue());
      if (read !== 'too-large' && read !== 'over-budget' && read !== 'gone') {
        const response = await run(admission, { ...head, contentType: header(req.headers['content-type']), body: read, query: (req.url ?? '').split('?')[1] ?? '' }, ctx);
        answer(res, response);
        return response;
      }
      const refusal =
        read === 'too-large'
          ? bodyTooLarge(head, admission.maxBodyBytes)
          : read === 'over-budget'
            ? new PgxError('TOO_MANY_CONNECTIONS', `request bodies being read or run would exceed ${BODY_BUDGET_BYTES} bytes`, {
                hint: 'Retry shortly: other large requests (template scripts) are in progress.',
              })
            : new PgxError('PROTOCOL_VIOLATION', 'could not read the request body: the client went away');
      const response = errorAnswer(refusal, ctx, route, head.idempotencyKey);
      answerAndDrain(req, res, response);
      return response;
    } finally {
      this.bodyBytes -= held;
    }
  }
}

/** What a metrics-only listener serves: reading them grants no control over the runtime. */
const METRICS_LISTENER_PATHS: ReadonlySet<string> = new Set([PATHS.metrics, PATHS.healthz, PATHS.readyz]);

/** A metrics-only listener's admission: its paths with no token (GET only, as admit() says), any other a 404. */
function admitMetricsOnly(head: RequestHead, ctx: ApiContext): Admission {
  if (METRICS_LISTENER_PATHS.has(head.path)) return admit(head, ctx, null);
  const notHere = new ApiError(
    404,
    new PgxError('FEATURE_NOT_SUPPORTED', `no such path on the metrics port: ${head.path}`, { hint: 'This port serves only /metrics, /healthz and /readyz; the control API is on --api-port.' }),
  );
  return { admitted: false, response: errorAnswer(notHere, ctx, 'unmatched', head.idempotencyKey) };
}

/** Every request's body bytes together, while read and run: 4 template scripts at their cap. */
const BODY_BUDGET_BYTES = 64 * 1024 * 1024;
/**
 * A refused request's body: up to DRAIN_BYTES are read and dropped (a small body to its end, so the
 * connection closes cleanly), then reading stops, so TCP holds the client back at no cost to us, until
 * the client goes or DRAIN_MS pass and the connection closes. Closing at once would reset a client still
 * sending, which may then lose the answer it has not read yet.
 */
const DRAIN_BYTES = 64 * 1024;
const DRAIN_MS = 5_000;

function header(v: string | string[] | undefined): string | undefined {
  return Array.isArray(v) ? v[0] : v;
}

function answer(res: http.ServerResponse, response: ApiResponse, close = false): void {
  if (res.headersSent || res.destroyed) return;
  const headers: Record<string, string | number> = { ...response.headers, 'content-length': Buffer.byteLength(response.body) };
  if (close) headers.connection = 'close';
  res.writeHead(response.status, headers);
  if (close) res.write(response.body);
  else res.end(response.body);
}

/**
 * Answers a refused request now. If its body is still coming, the connection is to close: the answer is
 * written at once, the body is drained (DRAIN_BYTES, DRAIN_MS), then the response ends and node closes
 * the socket.
 */
function answerAndDrain(req: http.IncomingMessage, res: http.ServerResponse, response: ApiResponse): void {
  if (res.destroyed) return;
  const bodyComing = !req.complete && (req.headers['transfer-encoding'] !== undefined || Number(req.headers['content-length'] ?? 0) > 0);
  if (!bodyComing) {
    answer(res, response);
    return;
  }
  answer(res, response, true);
  let dropped = 0;
  const onData = (chunk: Buffer): void => {
    dropped += chunk.length;
    if (dropped > DRAIN_BYTES) req.pause();
  };
  const finish = (): void => {
    clearTimeout(timer);
    req.off('data', onData);
    req.off('end', finish);
    if (!res.writableEnded) res.end();
  };
  const timer = setTimeout(finish, DRAIN_MS);
  timer.unref();
  req.on('data', onData);
  req.resume();
  req.once('end', finish);
  res.once('close', finish);
}

type BodyRead = string | 'too-large' | 'over-budget' | 'gone';

/**
 * The body as text, read into one buffer when its length is declared (no chunk list, no second copy);
 * 'too-large' past maxBytes, 'over-budget' when hold() refuses its bytes, 'gone' if the client left;
 * begin() once a declared length is held.
 * It stops reading at a refusal: answerAndDrain takes the stream from there.
 */
function readBody(req: http.IncomingMessage, declared: number | undefined, maxBytes: number, hold: (bytes: number) => boolean, begin: () => void): Promise<BodyRead> {
  return new Promise((resolve) => {
    if (declared !== undefined && !hold(declared)) return resolve('over-budget');
    begin();
    const whole = declared !== undefined ? Buffer.allocUnsafe(declared) : null;
    const chunks: Buffer[] = [];
    let size = 0;
    const settle = (result: BodyRead): void => {
      req.off('data', onData);
      req.off('end', onEnd);
      req.off('error', onGone);
      req.off('close', onClose);
      resolve(result);
    };
    const onData = (chunk: Buffer): void => {
      if (size + chunk.length > maxBytes) return settle('too-large');
      if (whole !== null) chunk.copy(whole, size);
      else if (hold(chunk.length)) chunks.push(chunk);
      else return settle('over-budget');
      size += chunk.length;
    };
    const onEnd = (): void => settle((whole !== null ? whole.subarray(0, size) : Buffer.concat(chunks)).toString('utf8'));
    const onGone = (): void => settle('gone');
    const onClose = (): void => {
      if (!req.complete) settle('gone');
    };
    req.on('data', onData);
    req.once('end', onEnd);
    req.once('error', onGone);
    req.once('close', onClose);
  });
}
