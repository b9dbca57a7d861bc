// The API's handlers: (input, ctx) -> result, no HTTP in sight (server.ts does the sockets). The API is
// the runtime's admin: operations run as role postgres for the permission checks.

import { PgxError, withHints } from '../errors.js';
import type { Logger } from '../log.js';
import type { EngineStats } from '../engine/listener.js';
import type { DatabaseOperations as DisposableDatabases } from '../runtime/databases/operations.js';
import { COPY_STRATEGY } from '../runtime/databases/create-database.js';
import { isUnderPrefix } from '../runtime/databases/names.js';
import type { ImportJob } from '../runtime/templates/import.js';
import { clampTime, type DatabaseRecord, type TemplateRecord } from '../runtime/databases/records.js';
import {
  buildTemplateRequest,
  importTemplateRequest,
  rangeAt,
  createCredentialRequest,
  createDatabaseRequest,
  keepSnapshotRequest,
  renameTemplateRequest,
  restoreRequest,
  setConnectionLimitRequest,
  setMemoryLimitRequest,
  snapshotRequest,
  setTtlRequest,
  type CreateCredentialRequest,
  type CreatedDatabaseBody,
  type CredentialBody,
  type DatabaseBody,
  type DatabasePageBody,
  type ImportJobBody,
  type ListBody,
  type ReadyBody,
  type TemplateBody,
} from './contract.js';
import { ApiError, errorBody } from './errors.js';
import { DATABASE_PAGE } from './paths.js';
import { buildHints, createHints, databaseHints, listDatabasesHints, dropTemplateHints, keepSnapshotHints, renameTemplateHints, sealHints, snapshotHints } from './hints.js';
import type { IdempotencyStore } from './idempotency.js';
import type { ApiMetrics } from './metrics.js';
import type { z } from 'zod';

/** The role the API acts as. */
const API_ROLE = 'postgres';

export interface ApiContext {
  databases: DisposableDatabases;
  engineStats(): EngineStats;
  /** PostgreSQL is up (the supervisor says so); /readyz also asks it a query. */
  postgresUp(): boolean;
  engineListening(): boolean;
  /** postgresql:// URL of a database through the engine. */
  connectionUrl(database: string): string;
  creates: IdempotencyStore<CreatedDatabaseBody>;
  metrics: ApiMetrics;
  logger: Logger;
}

export interface ApiInput {
  params: Record<string, string>;
  /** The parsed JSON body, undefined when there was none. */
  body: unknown;
  /** The Idempotency-Key header. */
  idempotencyKey: string | undefined;
  /** The query string's parameters (?force=true). */
  query?: URLSearchParams;
}

export interface ApiResult {
  status: number;
  /** JSON body; or text with its content type (metrics). */
  body?: unknown;
  text?: string;
  contentType?: string;
}

export type Handler = (input: ApiInput, ctx: ApiContext) => Promise<ApiResult>;

const ok = (body: unknown, status = 200): ApiResult => ({ status, body });

export const healthz: Handler = async () => ok({ alive: true });

export const readyz: Handler = async (_input, ctx) => {
  let postgres = false;
  if (ctx.postgresUp()) postgres = await ctx.databases.ping().catch(() => false);
  const engine = ctx.engineListening();
  const body: ReadyBody = { ready: postgres && engine, postgres, engine };
  return ok(body, body.ready ? 200 : 503);
};

export const metrics: Handler = async (_input, ctx) => {
  const text = await ctx.metrics.render(await ctx.databases.status(), ctx.engineStats());
  return { status: 200, text, contentType: ctx.metrics.contentType };
};

/** ?disk=true measures disk_usage too (every database's size): pgx status asks for it, the operator does not. */
export const status: Handler = async ({ query }, ctx) => ok(await ctx.databases.status({ diskUsage: flagParam(query, 'disk') }));

/** Each with what it costs on disk (it reads the files). */
export const listTemplates: Handler = async (_input, ctx) => {
  const body: ListBody<TemplateBody> = { items: (await ctx.databases.listTemplatesWithUse()).map((t) => ({ ...templateBody(t), disk: { ...t.use } })) };
  return ok(body);
};

/** 200 with the snapshot, kept past its database or given back to it ({"keep": false}). */
export const keepSnapshot: Handler = async ({ params, body }, ctx) => {
  const req = parseBody(keepSnapshotRequest, body);
  return ok(templateBody(await withHints(keepSnapshotHints(), ctx.databases.keepSnapshot(param(params), req.keep ?? true, API_ROLE))));
};

export const renameTemplate: Handler = async ({ params, body }, ctx) => {
  const req = parseBody(renameTemplateRequest, body);
  return ok(templateBody(await withHints(renameTemplateHints(param(params)), ctx.databases.renameTemplate(param(params), req.name, API_ROLE))));
};

export const buildTemplate: Handler = async ({ body }, ctx) => {
  const req = parseBody(buildTemplateRequest, body);
  const { script_name: scriptName, ...build } = req;
  // The script's own error is SCRIPT_FAILED, 422: the request could not be processed as sent.
  return ok(templateBody(await withHints(buildHints(), ctx.databases.buildTemplate({ ...build, scriptName }, API_ROLE))), 201);
};

/** 202 with the job; the work goes on after the answer (poll GET /v1/imports/{id}). */
export const importTemplate: Handler = async ({ body }, ctx) => {
  const req = parseBody(importTemplateRequest, body);
  const job = ctx.databases.importTemplate(
    { name: req.name, sourceUrl: req.source_url, mask: req.mask, owner: req.owner, unprivileged: req.unprivileged, seal: req.seal, replace: req.replace },
    API_ROLE,
  );
  return ok(importJobBody(job), 202);
};

export const getImportJob: Handler = async ({ params }, ctx) => {
  const job = ctx.databases.importJob(params.id!);
  if (!job) throw new ApiError(404, new PgxError('INVALID_PARAMETER', `no import job ${params.id}`, { hint: 'Jobs are kept in memory for the runtime\'s life (the last 100).' }));
  return ok(importJobBody(job));
};

/** 204 once the template (or snapshot) is gone; ?force=true drops it although databases were minted from it. */
export const deleteTemplate: Handler = async ({ params, query }, ctx) => {
  await withHints(dropTemplateHints(param(params)), ctx.databases.dropTemplate(param(params), API_ROLE, flagParam(query, 'force')));
  return { status: 204 };
};

/** A query-string flag: absent or false is false; anything but true or false is 22023. */
function flagParam(query: URLSearchParams | undefined, name: string): boolean {
  const value = query?.get(name);
  if (value !== null && value !== undefined && value !== 'true' && value !== 'false') {
    throw new PgxError('INVALID_PARAMETER', `${name} must be true or false, not "${value}"`, { hint: `?${name}=true` });
  }
  return value === 'true';
}

export const sealTemplate: Handler = async ({ params }, ctx) => ok(templateBody(await withHints(sealHints(), ctx.databases.seal(param(params), API_ROLE))));

export const unsealTemplate: Handler = async ({ params }, ctx) => ok(templateBody(await withHints(sealHints(), ctx.databases.unseal(param(params), API_ROLE))));

export const createDatabase: Handler = async ({ body, idempotencyKey }, ctx) => {
  const req = parseBody(createDatabaseRequest, body);
  if (idempotencyKey !== undefined && req.request_id !== undefined && idempotencyKey !== req.request_id) {
    throw new PgxError('INVALID_PARAMETER', 'request_id differs from the Idempotency-Key header', { hint: 'Send one of them, or the same id in both.' });
  }
  const key = idempotencyKey ?? req.request_id;
  const { request_id: _, ...fingerprint } = req;
  // The credential reaches only the caller whose request made it: the result kept for repeats of the
  // request id has none (a password is handed out once and kept nowhere).
  let credential: CredentialBody | undefined;
  const work = async (): Promise<CreatedDatabaseBody> => {
    const settings = { ttlSeconds: req.ttl_seconds, pinned: req.pinned, connectionLimit: req.connection_limit, memoryLimitMb: req.memory_limit_mb };
    const asked = req.credential === undefined ? undefined : { connectionLimit: req.credential.connection_limit };
    const created = await withHints(createHints(req.template), ctx.databases.create(req.template, { name: req.name, user: API_ROLE, settings, credential: asked }));
    if (created.credential !== null) credential = credentialBody(ctx, created.name, created.credential);
    return { ...databaseBody(minted(created.name, ctx), ctx), source: created.source, mint_ms: created.mint_ms };
  };
  const created = await (key === undefined ? work() : ctx.creates.run(key, fingerprint, work));
  return ok(req.credential === undefined ? created : { ...created, credential: credential ?? null }, 201);
};

/**
 * A keyset page (?limit=N&after=NAME, docs/api.md "Listing databases"): at 10,000 databases the whole
 * list is megabytes of JSON, so a request without a limit gets the first DATABASE_PAGE.defaultLimit.
 */
export const listDatabases: Handler = async ({ query }, ctx) => {
  const limit = limitParam(query);
  const after = afterParam(query);
  const page = ctx.databases.listDatabasesAfter(after, limit);
  const items = page.items.map((d) => databaseBody(d, ctx));
  const body: DatabasePageBody = { items, next: page.more ? items.at(-1)!.name : null };
  return ok(body);
};

/** ?limit=N: a whole number from 1 to DATABASE_PAGE.maxLimit; absent, the default. */
function limitParam(query: URLSearchParams | undefined): number {
  const raw = query?.get('limit');
  if (raw === null || raw === undefined) return DATABASE_PAGE.defaultLimit;
  const n = /^[0-9]{1,7}$/.test(raw) ? Number(raw) : NaN;
  if (!(n >= 1 && n <= DATABASE_PAGE.maxLimit)) {
    throw new PgxError('INVALID_PARAMETER', `limit must be a whole number from 1 to ${DATABASE_PAGE.maxLimit}, not "${raw}"`, { hint: listDatabasesHints().INVALID_PARAMETER });
  }
  return n;
}

/** ?after=NAME: the `next` of the page before; absent or empty, the first page. */
function afterParam(query: URLSearchParams | undefined): string | null {
  const raw = query?.get('after');
  if (raw === null || raw === undefined || raw === '') return null;
  if (Buffer.byteLength(raw) > 63) {
    throw new PgxError('INVALID_PARAMETER', 'after must be a database name (at most 63 bytes), as "next" gives it', { hint: listDatabasesHints().INVALID_PARAMETER });
  }
  return raw;
}

export const getDatabase: Handler = async ({ params }, ctx) => ok(databaseBody(minted(param(params), ctx), ctx));

/** Idempotent: a database already gone answers 204 like one dropped now. */
export const deleteDatabase: Handler = async ({ params }, ctx) => {
  const name = param(params);
  if (!isUnderPrefix(name, ctx.databases.settings.prefix)) {
    throw new PgxError('INVALID_PARAMETER', `database "${name}" was not minted by PGX`, {
      hint: `The API drops only databases named ${ctx.databases.settings.prefix}<template>__<token>.`,
    });
  }
  try {
    await ctx.databases.drop(name, { user: API_ROLE, database: 'postgres' });
  } catch (err) {
    if (!(err instanceof PgxError && err.code === 'UNKNOWN_DATABASE')) throw err;
  }
  return { status: 204 };
};

export const pinDatabase: Handler = async ({ params }, ctx) => ok(databaseBody(await withHints(databaseHints(), ctx.databases.setPinned(param(params), true, API_ROLE)), ctx));

export const unpinDatabase: Handler = async ({ params }, ctx) => ok(databaseBody(await withHints(databaseHints(), ctx.databases.setPinned(param(params), false, API_ROLE)), ctx));

export const setDatabaseTtl: Handler = async ({ params, body }, ctx) => {
  const req = parseBody(setTtlRequest, body);
  return ok(databaseBody(await withHints(databaseHints(), ctx.databases.setTtl(param(params), req.ttl_seconds, API_ROLE)), ctx));
};

/** 201 with the snapshot, a sealed template; the database is untouched. */
export const snapshotDatabase: Handler = async ({ params, body }, ctx) => {
  const req = parseBody(snapshotRequest, body);
  return ok(templateBody(await withHints(snapshotHints(param(params)), ctx.databases.snapshot(param(params), req.name, API_ROLE, req.force ?? false, req.keep ?? false))), 201);
};

/** The database, now holding the snapshot's state; a database not minted by PGX is answered by name. */
export const restoreDatabase: Handler = async ({ params, body }, ctx) => {
  const req = parseBody(restoreRequest, body);
  const name = param(params);
  await withHints(snapshotHints(name), ctx.databases.restore(name, req.snapshot, API_ROLE, req.force ?? false));
  const record = ctx.databases.database(name);
  return ok(record ? databaseBody(record, ctx) : { name, restored_from: req.snapshot });
};

export const setDatabaseConnectionLimit: Handler = async ({ params, body }, ctx) => {
  const req = parseBody(setConnectionLimitRequest, body);
  return ok(databaseBody(await withHints(databaseHints(), ctx.databases.setConnectionLimit(param(params), req.connection_limit, API_ROLE)), ctx));
};

export const setDatabaseMemoryLimit: Handler = async ({ params, body }, ctx) => {
  const req = parseBody(setMemoryLimitRequest, body);
  return ok(databaseBody(await withHints(databaseHints(), ctx.databases.setMemoryLimit(param(params), req.memory_limit_mb, API_ROLE)), ctx));
};

/** 201 with the password, once; the response is not logged and the password is stored nowhere. */
export const createCredential: Handler = async ({ params, body }, ctx) => {
  const req = parseBody(createCredentialRequest, body);
  return ok(await newCredential(ctx, param(params), req), 201);
};

async function newCredential(ctx: ApiContext, name: string, req: CreateCredentialRequest): Promise<CredentialBody> {
  return credentialBody(ctx, name, await withHints(databaseHints(), ctx.databases.createCredential(name, { connectionLimit: req.connection_limit })));
}

function credentialBody(ctx: ApiContext, name: string, { user, password }: { user: string; password: string }): CredentialBody {
  const url = new URL(ctx.connectionUrl(name));
  url.username = user;
  url.password = password;
  return { user, password, url: url.toString() };
}

/** Idempotent: a credential already gone (or never there) answers 204 too. */
export const revokeCredential: Handler = async ({ params }, ctx) => {
  await withHints(databaseHints(), ctx.databases.revokeCredential(param(params), params.user!));
  return { status: 204 };
};

/** Every credential of the database: 200 with how many there were (0 too: idempotent). */
export const revokeCredentials: Handler = async ({ params }, ctx) => {
  const revoked = await withHints(databaseHints(), ctx.databases.revokeCredentials(param(params)));
  return ok({ revoked });
};

// --- helpers -----------------------------------------------------------------------------------------

/** Parses a body through its schema; a problem is 22023 naming the field, a number out of range gets its range in the hint. */
export function parseBody<S extends z.ZodType>(schema: S, body: unknown): z.infer<S> {
  const result = schema.safeParse(body ?? {});
  if (result.success) return result.data;
  const problems = new Set<string>();
  const ranges = new Set<string>();
  for (const i of result.error.issues) {
    const field = i.path.length > 0 ? i.path.join('.') : '(body)';
    problems.add(`${field}: ${i.message}`);
    const range = i.code === 'unrecognized_keys' ? undefined : rangeAt(schema, i.path);
    if (range !== undefined) ranges.add(`${field} takes ${range}`);
  }
  const hint = ranges.size > 0 ? `${[...ranges].join('; ')} (docs/api.md, Bounds).` : 'See docs/api.md for the request fields.';
  throw new PgxError('INVALID_PARAMETER', `invalid request body: ${[...problems].join('; ')}`, { hint });
}

function param(params: Record<string, string>): string {
  return params.name!;
}

function minted(name: string, ctx: ApiContext): DatabaseRecord {
  const record = ctx.databases.database(name);
  if (!record) {
    const err = ctx.databases.dropped(name) ?? new PgxError('UNKNOWN_DATABASE', `database "${name}" does not exist`);
    throw err.withHint(databaseHints()[err.code]);
  }
  return record;
}

/** Never throws: a time beyond what a record holds (an absurd stored value) shows as the nearest one it holds. */
const iso = (ms: number | null): string | null => (ms === null ? null : new Date(clampTime(ms)).toISOString());

function databaseBody(d: DatabaseRecord, ctx: ApiContext): DatabaseBody {
  return {
    name: d.name,
    template: d.template,
    owner: d.owner,
    created_at: iso(d.createdAt)!,
    last_session_end: iso(d.lastSessionEnd),
    in_use: d.inUse,
    pinned: d.pinned,
    expires_at: iso(d.expiresAt),
    connection_limit: d.connectionLimit,
    memory_limit_mb: d.memoryLimitMb,
    url: ctx.connectionUrl(d.name),
  };
}

export function templateBody(t: TemplateRecord): TemplateBody {
  return { name: t.name, sealed: t.sealed, sealed_at: iso(t.sealedAt), generation: t.generation, strategy: COPY_STRATEGY, snapshot_of: t.snapshotOf, kept: t.kept };
}

function importJobBody(j: ImportJob): ImportJobBody {
  return {
    id: j.id,
    template: j.template,
    source: j.source,
    phase: j.phase,
    bytes: j.bytes,
    tables_done: j.tablesDone,
    tables_total: j.tablesTotal,
    started_at: iso(j.startedAt)!,
    finished_at: iso(j.finishedAt),
    result: j.result ? templateBody(j.result) : null,
    error: j.error ? errorBody(j.error.withHint(buildHints()[j.error.code])) : null,
  };
}
