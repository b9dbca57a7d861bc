// A small typed client for the HTTP control API (docs/api.md), used by the `pgx` CLI commands, the MCP
// server and the operator. Paths come from paths.ts and every request and answer shape from contract.ts,
// so the client and the server cannot drift apart silently. Every failure is an ApiClientError (a
// PgxError): an API error carries the body's code, sqlstate, message and hint; no runtime at the URL is
// CANNOT_CONNECT_NOW with a hint.

import { isErrorCode, PgxError } from '../errors.js';
import type {
  BuildTemplateRequest,
  CreateCredentialRequest,
  CreatedDatabaseBody,
  CreateDatabaseRequest,
  CredentialBody,
  DatabaseBody,
  DatabasePageBody,
  ErrorBody,
  ImportJobBody,
  ImportTemplateRequest,
  ListBody,
  KeepSnapshotRequest,
  RenameTemplateRequest,
  RestoreRequest,
  SetConnectionLimitRequest,
  SetMemoryLimitRequest,
  SetTtlRequest,
  SnapshotRequest,
  StatusBody,
  TemplateBody,
} from './contract.js';
import { exchange, type Answer } from './exchange.js';
import { DATABASE_PAGE, PATHS, pathFor, type PathPattern } from './paths.js';

export interface ApiClientOptions {
  /** Base URL of the API, e.g. http://127.0.0.1:7432 (a trailing /v1 or / is ignored). */
  url: string;
  /** Bearer token; null or undefined sends none. */
  token?: string | null;
  /** Per request, connect to last byte. Default 30 s. */
  timeoutMs?: number;
}

/**
 * An error from the API (or from reaching it): a PgxError with the body's code, SQLSTATE, message, hint
 * and detail (a code this client does not know yet is INTERNAL, its SQLSTATE kept). `status` is the
 * HTTP status, 0 when no answer came.
 */
export class ApiClientError extends PgxError {
  readonly status: number;

  constructor(status: number, body: ErrorBody, cause?: unknown) {
    super(isErrorCode(body.code) ? body.code : 'INTERNAL', body.message, { hint: body.hint ?? undefined, detail: body.detail, cause, sqlstate: body.sqlstate });
    this.name = 'ApiClientError';
    this.status = status;
  }
}

/** Every body the client sends is one of the contract's request types (api/contract.ts), which the server parses. */
type RequestBody =
  | BuildTemplateRequest
  | ImportTemplateRequest
  | CreateDatabaseRequest
  | CreateCredentialRequest
  | SetTtlRequest
  | SnapshotRequest
  | RenameTemplateRequest
  | KeepSnapshotRequest
  | RestoreRequest
  | SetConnectionLimitRequest
  | SetMemoryLimitRequest;

export class ApiClient {
  readonly url: string;
  private readonly token: string | null;
  private readonly timeoutMs: number;

  constructor(opts: ApiClientOptions) {
    this.url = opts.url.replace(/\/+$/, '').replace(/\/v1$/, '');
    this.token = opts.token ?? null;
    this.timeoutMs = opts.timeoutMs ?? 30_000;
  }

  /** `diskUsage`: with disk_usage measured (it reads every database's size). */
  status(diskUsage = false): Promise<StatusBody> {
    return this.request('GET', PATHS.status, {}, undefined, diskUsage ? { query: 'disk=true' } : {});
  }

  /** Keeps a snapshot past its database (keep true), or gives it back to it (false). */
  keepSnapshot(name: string, keep = true): Promise<TemplateBody> {
    const body: KeepSnapshotRequest = { keep };
    return this.request('POST', PATHS.templateKeep, { name }, body);
  }

  /** Renames a template or snapshot. */
  renameTemplate(name: string, to: string): Promise<TemplateBody> {
    const body: RenameTemplateRequest = { name: to };
    return this.request('POST', PATHS.templateRename, { name }, body);
  }

  /** Drops a template or snapshot; `force` even though databases were minted from it. */
  async dropTemplate(name: string, force = false): Promise<void> {
    await this.request<undefined>('DELETE', PATHS.template, { name }, undefined, force ? { query: 'force=true' } : {});
  }

  async listTemplates(): Promise<TemplateBody[]> {
    return (await this.request<ListBody<TemplateBody>>('GET', PATHS.templates)).items;
  }

  seal(name: string): Promise<TemplateBody> {
    return this.request('POST', PATHS.templateSeal, { name });
  }

  unseal(name: string): Promise<TemplateBody> {
    return this.request('POST', PATHS.templateUnseal, { name });
  }

  /** Runs the script in a new database and seals it; waits as long as the script runs (up to an hour). */
  buildTemplate(body: BuildTemplateRequest): Promise<TemplateBody> {
    return this.request('POST', PATHS.templates, {}, body, { timeoutMs: 3_600_000 });
  }

  /** Starts an import job; poll it with importJob(id), or use waitForImport. */
  importTemplate(body: ImportTemplateRequest): Promise<ImportJobBody> {
    return this.request('POST', PATHS.templateImport, {}, body);
  }

  importJob(id: string): Promise<ImportJobBody> {
    return this.request('GET', PATHS.importJob, { id });
  }

  /** Polls an import until it is done or failed, calling `progress` at each poll. */
  async waitForImport(id: string, progress: (job: ImportJobBody) => void = () => undefined, intervalMs = 250): Promise<ImportJobBody> {
    for (;;) {
      const job = await this.importJob(id);
      progress(job);
      if (job.phase === 'done' || job.phase === 'failed') return job;
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }

  /** With body.request_id set the create is safe to retry (it is also sent as Idempotency-Key). */
  createDatabase(body: CreateDatabaseRequest): Promise<CreatedDatabaseBody> {
    return this.request('POST', PATHS.databases, {}, body, { idempotencyKey: body.request_id });
  }

  /**
   * Every minted database, paging through GET /v1/databases at the largest page. A database minted or
   * dropped meanwhile may or may not be in it; every other one is in it once.
   */
  async listDatabases(): Promise<DatabaseBody[]> {
    const all: DatabaseBody[] = [];
    let after: string | null = null;
    do {
      const page: DatabasePageBody = await this.listDatabasesPage({ limit: DATABASE_PAGE.maxLimit, after });
      all.push(...page.items);
      after = page.next;
    } while (after !== null);
    return all;
  }

  /** One page: up to `limit` databases (the server's default without one) after name `after`; `next` is the following page's `after`. */
  async listDatabasesPage({ limit, after }: { limit?: number | undefined; after?: string | null | undefined } = {}): Promise<DatabasePageBody> {
    const query = new URLSearchParams();
    if (limit !== undefined) query.set('limit', String(limit));
    if (after !== undefined && after !== null) query.set('after', after);
    const page = await this.request<DatabasePageBody>('GET', PATHS.databases, {}, undefined, query.size > 0 ? { query: query.toString() } : {});
    // A runtime from before paging answers every database and no `next`: that is the last page.
    return { items: page.items, next: page.next ?? null };
  }

  getDatabase(name: string): Promise<DatabaseBody> {
    return this.request('GET', PATHS.database, { name });
  }

  /** Idempotent: a database already gone is not an error. */
  async dropDatabase(name: string): Promise<void> {
    await this.request<undefined>('DELETE', PATHS.database, { name });
  }

  pin(name: string): Promise<DatabaseBody> {
    return this.request('POST', PATHS.databasePin, { name });
  }

  unpin(name: string): Promise<DatabaseBody> {
    return this.request('POST', PATHS.databaseUnpin, { name });
  }

  /** Seconds from now; null clears the TTL. */
  setTtl(name: string, seconds: number | null): Promise<DatabaseBody> {
    const body: SetTtlRequest = { ttl_seconds: seconds };
    return this.request('PUT', PATHS.databaseTtl, { name }, body);
  }

  /** A snapshot of database `name`: a new sealed template `snapshot`. */
  snapshot(name: string, snapshot: string, force = false, keep = false): Promise<TemplateBody> {
    const body: SnapshotRequest = { name: snapshot, force, ...(keep ? { keep } : {}) };
    return this.request('POST', PATHS.databaseSnapshots, { name }, body, { timeoutMs: 3_600_000 });
  }

  /** Puts database `name` back to `snapshot`. */
  restore(name: string, snapshot: string, force = false): Promise<DatabaseBody> {
    const body: RestoreRequest = { snapshot, force };
    return this.request('POST', PATHS.databaseRestore, { name }, body, { timeoutMs: 3_600_000 });
  }

  /** Client sessions allowed at once; null: the runtime's default. */
  setConnectionLimit(name: string, limit: number | null): Promise<DatabaseBody> {
    const body: SetConnectionLimitRequest = { connection_limit: limit };
    return this.request('PUT', PATHS.databaseConnectionLimit, { name }, body);
  }

  setMemoryLimit(name: string, mb: number | null): Promise<DatabaseBody> {
    const body: SetMemoryLimitRequest = { memory_limit_mb: mb };
    return this.request('PUT', PATHS.databaseMemoryLimit, { name }, body);
  }

  /** A login role for `name` only; the password is in the answer and nowhere else. */
  createCredential(name: string, body: CreateCredentialRequest = {}): Promise<CredentialBody> {
    return this.request('POST', PATHS.databaseCredentials, { name }, body);
  }

  /** Idempotent: a credential already gone is not an error. */
  async revokeCredential(name: string, user: string): Promise<void> {
    await this.request<undefined>('DELETE', PATHS.databaseCredential, { name, user });
  }

  /** Revokes every credential of `name`; how many there were. */
  async revokeCredentials(name: string): Promise<number> {
    return (await this.request<{ revoked: number }>('DELETE', PATHS.databaseCredentials, { name })).revoked;
  }

  private async request<T>(
    method: string,
    pattern: PathPattern,
    params: Record<string, string> = {},
    body?: RequestBody,
    { idempotencyKey, timeoutMs = this.timeoutMs, query }: { idempotencyKey?: string | undefined; timeoutMs?: number; query?: string } = {},
  ): Promise<T> {
    const target = this.url + pathFor(pattern, params) + (query === undefined ? '' : `?${query}`);
    const headers: Record<string, string> = { accept: 'application/json' };
    if (this.token !== null) headers.authorization = `Bearer ${this.token}`;
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (idempotencyKey !== undefined) headers['idempotency-key'] = idempotencyKey;
    let response: Answer;
    try {
      response = await exchange(target, { method, headers, ...(body !== undefined ? { body: JSON.stringify(body) } : {}), timeoutMs });
    } catch (err) {
      throw this.unreachable(err);
    }
    const { text } = response;
    if (response.status >= 200 && response.status < 300) {
      if (text.trim().length === 0) return undefined as T;
      try {
        return JSON.parse(text) as T;
      } catch {
        throw new ApiClientError(response.status, {
          code: 'PROTOCOL_VIOLATION',
          sqlstate: '08P01',
          message: `the API at ${this.url} answered ${method} ${pattern} with a body that is not JSON`,
          hint: 'Is --url pointing at a PGX runtime?',
        });
      }
    }
    throw new ApiClientError(response.status, errorBody(response.status, text, this.url));
  }

  private unreachable(err: unknown): ApiClientError {
    const { code, name } = (err ?? {}) as { code?: string; name?: string };
    const hint = `Start the runtime with \`pgx start --api-port N\` (npm start uses --api-port 7432), or pass --url (or set PGX_URL) to where its API listens.`;
    if (name === 'TimeoutError') {
      return new ApiClientError(0, { code: 'CANNOT_CONNECT_NOW', sqlstate: '57P03', message: `no answer from the PGX API at ${this.url} within ${this.timeoutMs} ms`, hint }, err);
    }
    const why = code ?? (err instanceof Error ? err.message : String(err));
    return new ApiClientError(0, { code: 'CANNOT_CONNECT_NOW', sqlstate: '57P03', message: `cannot reach the PGX API at ${this.url} (${why})`, hint }, err);
  }
}

/** The error body of a failed answer; something that is not one (a proxy's page) becomes a generic error. */
function errorBody(status: number, text: string, url: string): ErrorBody {
  try {
    const parsed = JSON.parse(text) as Partial<ErrorBody>;
    if (typeof parsed.code === 'string' && typeof parsed.message === 'string') {
      return {
        code: parsed.code,
        sqlstate: typeof parsed.sqlstate === 'string' ? parsed.sqlstate : 'XX000',
        message: parsed.message,
        hint: typeof parsed.hint === 'string' ? parsed.hint : null,
        ...(typeof parsed.detail === 'string' ? { detail: parsed.detail } : {}),
      };
    }
  } catch {
    // not JSON: below
  }
  return { code: 'INTERNAL', sqlstate: 'XX000', message: `the API at ${url} answered HTTP ${status}: ${text.slice(0, 200).trim()}`, hint: 'Is --url pointing at a PGX runtime?' };
}
