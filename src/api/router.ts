// The route table and dispatch: method + path -> handler, bearer auth, JSON in and out, errors as
// {code, sqlstate, message, hint}. No sockets: server.ts feeds it requests, tests may call it directly.

import { PgxError } from '../errors.js';
import type { BearerToken } from './auth.js';
import { ApiError, toHttpError } from './errors.js';
import * as h from './handlers.js';
import { matchPath, PATHS, type PathPattern } from './paths.js';

export interface ApiRoute {
  method: 'GET' | 'POST' | 'PUT' | 'DELETE';
  path: PathPattern;
  handler: h.Handler;
  /** Probes answer without a token. */
  open?: boolean;
  /** The largest body the route reads (default SMALL_BODY_BYTES); see docs/api.md, "Request bodies". */
  maxBodyBytes?: number;
}

/** Every JSON body but a script's is a handful of fields: names, numbers, flags. */
const SMALL_BODY_BYTES = 64 * 1024;
/** POST /v1/templates carries a whole schema script (the operator's Template with inline SQL). */
const SCRIPT_BODY_BYTES = 16 * 1024 * 1024;
/** POST /v1/templates/import carries a masking script beside the source URL; masks are UPDATEs, not schemas. */
const MASK_BODY_BYTES = 1024 * 1024;

const ROUTES: readonly ApiRoute[] = [
  { method: 'GET', path: PATHS.healthz, handler: h.healthz, open: true },
  { method: 'GET', path: PATHS.readyz, handler: h.readyz, open: true },
  { method: 'GET', path: PATHS.metrics, handler: h.metrics },
  { method: 'GET', path: PATHS.status, handler: h.status },
  { method: 'GET', path: PATHS.templates, handler: h.listTemplates },
  { method: 'POST', path: PATHS.templates, handler: h.buildTemplate, maxBodyBytes: SCRIPT_BODY_BYTES },
  { method: 'POST', path: PATHS.templateImport, handler: h.importTemplate, maxBodyBytes: MASK_BODY_BYTES },
  { method: 'GET', path: PATHS.importJob, handler: h.getImportJob },
  { method: 'POST', path: PATHS.templateSeal, handler: h.sealTemplate },
  { method: 'POST', path: PATHS.templateUnseal, handler: h.unsealTemplate },
  { method: 'POST', path: PATHS.templateRename, handler: h.renameTemplate },
  { method: 'POST', path: PATHS.templateKeep, handler: h.keepSnapshot },
  { method: 'POST', path: PATHS.databases, handler: h.createDatabase },
  { method: 'GET', path: PATHS.databases, handler: h.listDatabases },
  { method: 'GET', path: PATHS.database, handler: h.getDatabase },
  { method: 'DELETE', path: PATHS.database, handler: h.deleteDatabase },
  { method: 'DELETE', path: PATHS.template, handler: h.deleteTemplate },
  { method: 'POST', path: PATHS.databasePin, handler: h.pinDatabase },
  { method: 'POST', path: PATHS.databaseUnpin, handler: h.unpinDatabase },
  { method: 'PUT', path: PATHS.databaseTtl, handler: h.setDatabaseTtl },
  { method: 'POST', path: PATHS.databaseSnapshots, handler: h.snapshotDatabase },
  { method: 'POST', path: PATHS.databaseRestore, handler: h.restoreDatabase },
  { method: 'PUT', path: PATHS.databaseConnectionLimit, handler: h.setDatabaseConnectionLimit },
  { method: 'PUT', path: PATHS.databaseMemoryLimit, handler: h.setDatabaseMemoryLimit },
  { method: 'POST', path: PATHS.databaseCredentials, handler: h.createCredential },
  { method: 'DELETE', path: PATHS.databaseCredential, handler: h.revokeCredential },
  { method: 'DELETE', path: PATHS.databaseCredentials, handler: h.revokeCredentials },
];

export interface ApiRequest {
  method: string;
  /** The path without the query string. */
  path: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  contentType: string | undefined;
  body: string;
  /** The query string without its '?', '' for none. */
  query?: string;
}

export interface ApiResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
  /** The route pattern matched (for metrics), or 'unmatched'. */
  route: string;
  /** Idempotency-Key or request_id, for the log line. */
  requestId: string | undefined;
}

/** What is known of a request before its body is read. */
export interface RequestHead {
  method: string;
  /** The path without the query string. */
  path: string;
  authorization: string | undefined;
  idempotencyKey: string | undefined;
  /** The declared Content-Length; undefined when there is none (no body, or chunked). */
  contentLength: number | undefined;
}

export type Admission =
  | { admitted: true; route: ApiRoute; params: Record<string, string>; maxBodyBytes: number }
  | { admitted: false; response: ApiResponse };

/**
 * Route, token and declared size, from the head alone: server.ts calls it before it reads a byte of the
 * body, so an unauthenticated or oversized request costs no buffer (404, 405, 401, 413).
 */
export function admit(head: RequestHead, ctx: h.ApiContext, token: BearerToken | null): Admission {
  let route = 'unmatched';
  try {
    const matches = ROUTES.map((r) => ({ r, params: matchPath(r.path, head.path) })).filter((m) => m.params !== null);
    const hit = matches.find((m) => m.r.method === head.method);
    if (!hit) {
      if (matches.length > 0) {
        route = matches[0]!.r.path;
        const allow = matches.map((m) => m.r.method).join(', ');
        throw new ApiError(405, new PgxError('FEATURE_NOT_SUPPORTED', `${head.method} is not allowed on ${head.path}`, { hint: `Allowed: ${allow}.` }));
      }
      throw new ApiError(404, new PgxError('FEATURE_NOT_SUPPORTED', `no such path: ${head.path}`, { hint: 'See docs/api.md for the paths.' }));
    }
    route = hit.r.path;
    if (!hit.r.open && token !== null && !token.accepts(head.authorization)) {
      throw new PgxError('INVALID_AUTHORIZATION', 'missing or wrong bearer token', { hint: 'Send Authorization: Bearer <token> (--api-token-file or PGX_API_TOKEN).' });
    }
    const maxBodyBytes = hit.r.maxBodyBytes ?? SMALL_BODY_BYTES;
    if (head.contentLength !== undefined && head.contentLength > maxBodyBytes) throw bodyTooLarge(head, maxBodyBytes);
    return { admitted: true, route: hit.r, params: hit.params!, maxBodyBytes };
  } catch (err) {
    return { admitted: false, response: errorAnswer(err, ctx, route, head.idempotencyKey) };
  }
}

/** 413: the body of `head` is over what its route reads. */
export function bodyTooLarge(head: Pick<RequestHead, 'method' | 'path'>, maxBodyBytes: number): ApiError {
  return new ApiError(
    413,
    new PgxError('PROTOCOL_VIOLATION', `request body exceeds ${maxBodyBytes} bytes, the most ${head.method} ${head.path} takes`, {
      hint: 'Send a smaller body; the limits per route are in docs/api.md (Request bodies).',
    }),
  );
}

/** Admits the request, then runs it: for callers holding the whole request (tests, in-process clients). */
export async function dispatch(req: ApiRequest, ctx: h.ApiContext, token: BearerToken | null): Promise<ApiResponse> {
  const admission = admit({ ...req, contentLength: Buffer.byteLength(req.body) }, ctx, token);
  if (!admission.admitted) return admission.response;
  return run(admission, req, ctx);
}

/** Runs an admitted request: JSON body through the handler, the answer or the error as JSON. */
export async function run(admission: Admission & { admitted: true }, req: ApiRequest, ctx: h.ApiContext): Promise<ApiResponse> {
  let requestId = req.idempotencyKey;
  const route = admission.route.path;
  try {
    const body = parseJson(req);
    if (body !== null && typeof body === 'object' && typeof (body as { request_id?: unknown }).request_id === 'string') {
      requestId ??= (body as { request_id: string }).request_id;
    }
    const result = await admission.route.handler({ params: admission.params, body, idempotencyKey: req.idempotencyKey, query: new URLSearchParams(req.query ?? '') }, ctx);
    if (result.text !== undefined) {
      return { status: result.status, headers: { 'content-type': result.contentType ?? 'text/plain; charset=utf-8' }, body: result.text, route, requestId };
    }
    if (result.body === undefined) return { status: result.status, headers: {}, body: '', route, requestId };
    return { status: result.status, headers: JSON_HEADERS, body: JSON.stringify(result.body), route, requestId };
  } catch (err) {
    return errorAnswer(err, ctx, route, requestId);
  }
}

/** Any error as the API answers it: JSON {code, sqlstate, message, hint}; 401 says how to authenticate. */
export function errorAnswer(err: unknown, ctx: Pick<h.ApiContext, 'logger'>, route: string, requestId: string | undefined): ApiResponse {
  const { status, body } = toHttpError(err, ctx.logger, requestId);
  const headers: Record<string, string> = { ...JSON_HEADERS };
  if (status === 401) headers['www-authenticate'] = 'Bearer';
  return { status, headers, body: JSON.stringify(body), route, requestId };
}

const JSON_HEADERS = { 'content-type': 'application/json; charset=utf-8' };

function parseJson(req: ApiRequest): unknown {
  if (req.body.trim().length === 0) return undefined;
  // Required, not assumed when absent: a browser may send a body of no type (a Blob) or text/plain across
  // sites without asking first (no CORS preflight), but never application/json.
  if (req.contentType === undefined || !/^application\/json\b/i.test(req.contentType)) {
    const message = req.contentType === undefined ? 'a request body needs Content-Type: application/json; this one has none' : `request bodies are JSON, not ${req.contentType}`;
    throw new ApiError(415, new PgxError('PROTOCOL_VIOLATION', message, { hint: 'Send Content-Type: application/json.' }));
  }
  try {
    return JSON.parse(req.body) as unknown;
  } catch (err) {
    throw new PgxError('PROTOCOL_VIOLATION', `request body is not valid JSON: ${(err as Error).message}`, { hint: 'Send a JSON object.' });
  }
}
