// The HTTP API's contract: request bodies as zod schemas (the server parses every body through them)
// and the response shapes. Clients (the future operator) import this file; field names are a contract:
// add fields, never rename or remove one.

import { z } from 'zod';
import { BOUNDS, type Bound } from '../runtime/databases/records.js';
import type { RuntimeStatus } from '../runtime/status.js';

export { BOUNDS } from '../runtime/databases/records.js';

/** The range text of each bounded number schema, for the hint parseBody (handlers.ts) gives. */
const RANGES = new WeakMap<z.ZodType, string>();

/** A number within `bound`; outside it, the message says "<value> is out of range (<range>)". */
function bounded(bound: Bound): z.ZodNumber {
  const error = (iss: { input?: unknown }): string => `${String(iss.input)} is out of range (${bound.text})`;
  let n = z.number({ error: `expected ${bound.text}` });
  if (bound.int) n = n.int({ error });
  n = bound.exclusiveMin ? n.gt(bound.min, { error }) : n.min(bound.min, { error });
  n = n.max(bound.max, { error });
  RANGES.set(n, bound.text);
  return n;
}

/** The range of the bounded number at `path` in `schema` (through objects, optional and nullable), if it is one. */
export function rangeAt(schema: z.ZodType, path: readonly PropertyKey[]): string | undefined {
  const unwrap = (t: z.ZodType): z.ZodType => (t instanceof z.ZodOptional || t instanceof z.ZodNullable ? unwrap(t.unwrap() as z.ZodType) : t);
  let at: z.ZodType | undefined = schema;
  for (const key of path) {
    const object = unwrap(at);
    at = object instanceof z.ZodObject && typeof key === 'string' ? (object.shape as Record<string, z.ZodType>)[key] : undefined;
    if (at === undefined) return undefined;
  }
  return RANGES.get(unwrap(at));
}

/** A PostgreSQL name as PGX mints them: lower-case letters, digits, underscores; at most 63 bytes. */
const pgName = z.string().min(1).max(63);
const requestId = z.string().min(1).max(200);

export const createCredentialRequest = z
  .object({
    /** The role's CONNECTION LIMIT; -1 (the default) for none. */
    connection_limit: bounded(BOUNDS.credentialConnectionLimit).optional(),
  })
  .strict();
export type CreateCredentialRequest = z.infer<typeof createCredentialRequest>;

export const createDatabaseRequest = z
  .object({
    /** A sealed template. */
    template: pgName,
    /** Defaults to <prefix><template>__<random token>. */
    name: pgName.optional(),
    /** Hard TTL: dropped this many seconds after creation whatever its sessions or pin; null for none. */
    ttl_seconds: bounded(BOUNDS.ttlSeconds).nullable().optional(),
    /** Pinned databases are not dropped when idle. */
    pinned: z.boolean().optional(),
    /** Client sessions allowed on it at once (beyond it 53300); null or absent: the runtime's default. */
    connection_limit: bounded(BOUNDS.connectionLimit).nullable().optional(),
    /** MB its backends may hold together (beyond it a statement gets 53200); null or absent: the runtime's default. */
    memory_limit_mb: bounded(BOUNDS.memoryLimitMb).nullable().optional(),
    /**
     * Also make a per-database credential, as POST /v1/databases/{name}/credentials with this body would,
     * in the same call: the answer's `credential`. If it cannot be made, the database is dropped again.
     */
    credential: createCredentialRequest.optional(),
    /** Same as the Idempotency-Key header; one of them makes the create safe to retry. */
    request_id: requestId.optional(),
  })
  .strict();
export type CreateDatabaseRequest = z.infer<typeof createDatabaseRequest>;

/** A template built from a SQL script; large scripts are why this body may be up to 16 MiB. */
export const buildTemplateRequest = z
  .object({
    name: pgName,
    /** Run in a new database, as `owner`, as psql runs a file (runtime/psql-script.ts). */
    sql: z.string().min(1),
    /** The script's file name, for error messages ("schema.sql ... failed at line 12: ..."). */
    script_name: z.string().min(1).max(255).optional(),
    /** The role that owns the template and runs the script; default postgres. */
    owner: pgName.optional(),
    /**
     * Never run the script as a role with privileges (superuser, CREATEROLE, CREATEDB, REPLICATION,
     * BYPASSRLS, a predefined role): a named owner with any is refused (42501); without an owner the
     * template gets a role of its own, named like it (runtime/templates/build-owner.ts).
     */
    unprivileged: z.boolean().optional(),
    /** Seal it when the script has run (default true). */
    seal: z.boolean().optional(),
    /** Rebuild a template that exists; without it an existing name is 42P04. */
    replace: z.boolean().optional(),
  })
  .strict();
export type BuildTemplateRequest = z.infer<typeof buildTemplateRequest>;

/** A template imported from a source database: dump, restore, mask, check, seal (a job; see GET /v1/imports/{id}). */
export const importTemplateRequest = z
  .object({
    name: pgName,
    /** postgresql://user:password@host:port/database; the password is never logged or returned. */
    source_url: z.string().min(1).max(4096),
    /** SQL that overwrites personal data, with `-- pgx:forbid table.column ~ 'regex'` rules checked after it. */
    mask: z.string().min(1).optional(),
    owner: pgName.optional(),
    /** As for a script build: the restore and the masking never run as a role with privileges. */
    unprivileged: z.boolean().optional(),
    seal: z.boolean().optional(),
    replace: z.boolean().optional(),
  })
  .strict();
export type ImportTemplateRequest = z.infer<typeof importTemplateRequest>;

export const setTtlRequest = z
  .object({
    /** Seconds from now; null clears the TTL. */
    ttl_seconds: bounded(BOUNDS.ttlSeconds).nullable(),
  })
  .strict();
export type SetTtlRequest = z.infer<typeof setTtlRequest>;

export const setConnectionLimitRequest = z
  .object({
    /** Client sessions at once; null: the runtime's default (--max-sessions-per-db). */
    connection_limit: bounded(BOUNDS.connectionLimit).nullable(),
  })
  .strict();
export type SetConnectionLimitRequest = z.infer<typeof setConnectionLimitRequest>;

export const setMemoryLimitRequest = z
  .object({
    /** MB the database's backends may hold together; null: the runtime's default (--database-memory-limit). */
    memory_limit_mb: bounded(BOUNDS.memoryLimitMb).nullable(),
  })
  .strict();
export type SetMemoryLimitRequest = z.infer<typeof setMemoryLimitRequest>;

export const snapshotRequest = z
  .object({
    /** The snapshot's name: a new sealed template. */
    name: pgName,
    /** End the database's open sessions (57P01) instead of failing with 55006. */
    force: z.boolean().optional(),
    /** Keep it when the database is dropped, and out of --snapshot-retention's count (default false). */
    keep: z.boolean().optional(),
  })
  .strict();
export type SnapshotRequest = z.infer<typeof snapshotRequest>;

/** POST /v1/templates/{name}/keep: keep a snapshot past its database (true, the default), or give it back (false). */
export const keepSnapshotRequest = z.object({ keep: z.boolean().optional() }).strict();
export type KeepSnapshotRequest = z.infer<typeof keepSnapshotRequest>;

/** POST /v1/templates/{name}/rename: the template's (or snapshot's) new name. */
export const renameTemplateRequest = z.object({ name: pgName }).strict();
export type RenameTemplateRequest = z.infer<typeof renameTemplateRequest>;

export const restoreRequest = z
  .object({
    /** The snapshot (a sealed template) to put the database back to. */
    snapshot: pgName,
    /** End the database's open sessions (57P01) instead of failing with 55006. */
    force: z.boolean().optional(),
  })
  .strict();
export type RestoreRequest = z.infer<typeof restoreRequest>;

/**
 * GET /v1/status: the runtime's status document (runtime/status.ts), its keys kept forever. Named for
 * what the API answers, apart from the Runtime object's status in the operator's CRD.
 */
export type StatusBody = RuntimeStatus;

/** Every error: `code` is PGX's (src/errors.ts), `sqlstate` what a PostgreSQL client would see. */
export interface ErrorBody {
  code: string;
  sqlstate: string;
  message: string;
  hint: string | null;
  /** More about what happened (PostgreSQL's DETAIL), when there is more; absent otherwise. */
  detail?: string;
}

/** The database as GET /v1/databases/{name} would answer it right after the create, and how it was made. */
export interface CreatedDatabaseBody extends DatabaseBody {
  /** warm: a spare from the pool was claimed; cold: the template was copied. */
  source: 'warm' | 'cold';
  mint_ms: number;
  /**
   * Present when the request asked for `credential`: the new credential, its password given this once.
   * null in the answer to a repeat of the request (same request id): the first answer carried it, and
   * a password is never kept; make another with POST /v1/databases/{name}/credentials.
   */
  credential?: CredentialBody | null;
}

/** A per-database credential: the password is returned here once and never again. */
export interface CredentialBody {
  /** The login role; it can connect to this database only. */
  user: string;
  password: string;
  /** postgresql://user:password@host:port/database for the engine. */
  url: string;
}

export interface DatabaseBody {
  name: string;
  template: string;
  owner: string;
  created_at: string;
  last_session_end: string | null;
  in_use: boolean;
  pinned: boolean;
  expires_at: string | null;
  /** Its own session cap, or null for the runtime's default. */
  connection_limit: number | null;
  /** Its own memory limit in MB, or null for the runtime's default. */
  memory_limit_mb: number | null;
  url: string;
}

export interface TemplateBody {
  name: string;
  sealed: boolean;
  sealed_at: string | null;
  generation: number;
  /** How CREATE DATABASE copies it for a mint: always FILE_COPY (a clone where the filesystem can). */
  strategy: 'FILE_COPY';
  /** The database this is a snapshot of, or null for a template sealed as such. */
  snapshot_of: string | null;
  /** A snapshot kept past its database (taken with keep); false: it goes when its database is dropped. Templates: true. */
  kept: boolean;
  /** What it costs on disk: in GET /v1/templates only (it reads the files). */
  disk?: TemplateDiskBody;
}

/** A template's files (base/<oid>): apparent size, blocks allocated, and of those the bytes shared with clones. */
export interface TemplateDiskBody {
  /** What pg_database_size counts. */
  apparent_bytes: number;
  allocated_bytes: number;
  /** Bytes in extents shared with another database (copy-on-write); null where the filesystem does not clone or it cannot be read. */
  shared_bytes: number | null;
}

/** An import job: `phase` goes queued, dumping, restoring, masking, checking, sealing, then done or failed. */
export interface ImportJobBody {
  id: string;
  template: string;
  /** The source URL without its password. */
  source: string;
  phase: string;
  bytes: number;
  tables_done: number;
  /** 0 until the dump is complete. */
  tables_total: number;
  started_at: string;
  finished_at: string | null;
  /** The template, once done. */
  result: TemplateBody | null;
  /** Why it failed, once failed. */
  error: ErrorBody | null;
}

export interface ListBody<T> {
  items: T[];
}

/** A page of databases: `next` is the `after` of the next page, null on the last one. */
export interface DatabasePageBody extends ListBody<DatabaseBody> {
  next: string | null;
}

export interface ReadyBody {
  ready: boolean;
  postgres: boolean;
  engine: boolean;
}
