// The MCP tools: each a zod input schema (the JSON schema agents see, and the check before any call),
// a one-line description an agent can act on, and a handler that talks to the runtime's HTTP API via
// ApiClient (run_sql goes to the database itself, as the database's own scoped role: scoped-roles.ts). Handlers never throw to the SDK: every failure is a
// tool error with a hint (results.ts). Field errors carry their own hint too, because the SDK answers a
// schema failure with the zod messages alone.

import type { McpServer } from '@modelcontextprotocol/sdk/server/mcp.js';
import type { CallToolResult, ToolAnnotations } from '@modelcontextprotocol/sdk/types.js';
import { z } from 'zod';
import type { ApiClient } from '../api/client.js';
import { DATABASE_PAGE } from '../api/paths.js';
import { parseSeconds } from '../durations.js';
import type { HintsByCode } from '../errors.js';
import { toolError, toolResult } from './results.js';
import type { ScopedRoles } from './scoped-roles.js';
import { DEFAULT_MAX_ROWS, DEFAULT_TIMEOUT_SECONDS, MAX_MAX_ROWS, runSql } from './sql.js';

export interface ToolContext {
  api: ApiClient;
  /** The credential each database is touched with: never the admin role. */
  roles: ScopedRoles;
}

interface PgxTool {
  name: string;
  register(server: McpServer, ctx: ToolContext): void;
}

/** A string field whose errors say what it is and where to find a valid value. */
function name(field: string, what: string): z.ZodString {
  return z
    .string({ error: (iss) => `${field} ${iss.input === undefined ? 'is required' : 'must be a string'}: ${what}` })
    .min(1, { error: `${field} must not be empty: ${what}` })
    .max(63, { error: `${field} is longer than 63 bytes, PostgreSQL's limit for a name: ${what}` })
    .describe(what);
}

function flag(field: string, what: string): z.ZodBoolean {
  return z.boolean({ error: `${field} must be true or false: ${what}` }).describe(what);
}

const DATABASE = 'the name of a minted database, e.g. tdb_tpl_app__3f9c0a1b (create_database returns it; list_databases shows them)';
const FORCE = 'end the database\'s open sessions (they get FATAL 57P01) instead of failing while any is open; default false';

/** A strict object: an unknown argument (a typo) is an error naming the arguments the tool takes. */
function args<S extends z.ZodRawShape>(shape: S): z.ZodObject<S, z.core.$strict> {
  const known = Object.keys(shape);
  return z.strictObject(shape, {
    error: (iss) =>
      iss.code === 'unrecognized_keys'
        ? `unknown argument${iss.keys.length > 1 ? 's' : ''} ${iss.keys.join(', ')}: this tool takes ${known.length > 0 ? known.join(', ') : 'no arguments'}`
        : iss.code === 'invalid_type'
          ? `the arguments must be an object${known.length > 0 ? ` with ${known.join(', ')}` : ''}`
          : undefined,
  });
}

/**
 * The API's hints name HTTP paths and SQL functions; an agent here has tools. Each tool says, for the
 * errors it meets, what to do with the tools instead.
 */
const UNKNOWN_DB_HINT = 'list_databases shows the live databases (an idle unpinned one is dropped after the grace period, any at its ttl); create_database makes a new one.';
const IN_USE_HINT = 'Sessions are open on the database (yours or another client\'s): close them, or call again with force: true to end them.';
const DROPPED_HINT = 'PGX keeps a dropped name for a while rather than mint it again empty: create_database with this name makes it again, or use a new one.';
const DATABASE_HINTS: HintsByCode = { UNKNOWN_DATABASE: UNKNOWN_DB_HINT, DATABASE_DROPPED: DROPPED_HINT };
const TEMPLATES_HINT = 'list_templates shows the templates and snapshots.';

function tool<S extends z.ZodObject>(
  toolName: string,
  description: string,
  annotations: ToolAnnotations,
  schema: S,
  run: (input: z.infer<S>, ctx: ToolContext) => Promise<CallToolResult>,
  hints: HintsByCode = DATABASE_HINTS,
): PgxTool {
  return {
    name: toolName,
    register(server, ctx) {
      // Widened to a plain object schema: the SDK's callback type cannot be resolved for a generic S;
      // the SDK has parsed the input with `schema` itself before calling, so the cast below holds.
      const inputSchema: z.ZodObject = schema;
      server.registerTool(toolName, { description, inputSchema, annotations }, async (input) => {
        try {
          return await run(input as z.infer<S>, ctx);
        } catch (err) {
          return toolError(err, hints);
        }
      });
    },
  };
}

const TTL_WHAT = `how long until it is dropped whatever its sessions or pin: a duration such as "1h", "6h", "24h", "7d", "1h30m", or a number of seconds`;

/** Seconds in a ttl: a number, or a string in the one duration grammar (src/durations.ts); NaN if neither. */
function ttlSeconds(ttl: string | number): number {
  return typeof ttl === 'number' ? ttl : (parseSeconds(ttl) ?? NaN);
}

// One check with one message (a pattern plus a refine would report twice for "soon").
const ttl = z
  .union([z.string(), z.number()], { error: `ttl must be ${TTL_WHAT}` })
  .refine((v) => ttlSeconds(v) > 0, { error: `ttl must be ${TTL_WHAT}` })
  .describe(TTL_WHAT);

/** A minted database, or a tool error saying it is unknown: drop_database uses it so a typo is not a silent success. */
async function mustExist(ctx: ToolContext, database: string): Promise<void> {
  await ctx.api.getDatabase(database);
}

export const TOOLS: PgxTool[] = [
  tool(
    'create_database',
    'Create a disposable PostgreSQL database copied from a sealed template; returns its name and postgresql:// URL (connect to it, or pass the name to run_sql).',
    { title: 'Create a database', readOnlyHint: false, destructiveHint: false },
    args({
      template: name('template', 'the sealed template to copy (list_templates shows them)'),
      name: name('name', 'optional database name; must be tdb_<template>__<token> (default: a random token)').optional(),
      ttl: ttl.optional(),
      pinned: flag('pinned', 'keep it while idle (otherwise it is dropped a grace period after its last session); default false').optional(),
    }),
    async (input, ctx) => {
      const created = await ctx.api.createDatabase({
        template: input.template,
        ...(input.name !== undefined ? { name: input.name } : {}),
        ...(input.ttl !== undefined ? { ttl_seconds: ttlSeconds(input.ttl) } : {}),
        ...(input.pinned !== undefined ? { pinned: input.pinned } : {}),
      });
      return toolResult({ ...created });
    },
    {
      UNKNOWN_TEMPLATE: 'There is no template of that name: list_templates shows the ones create_database can copy.',
      TEMPLATE_NOT_SEALED: 'The template is unsealed (open for changes): create_database copies only sealed ones, which list_templates shows (sealed: true).',
      DUPLICATE_DATABASE: 'A database of that name exists: pass another name, or leave it out for a random one.',
    },
  ),
  tool(
    'list_databases',
    `List the minted databases by name, a page at a time (${DATABASE_PAGE.defaultLimit} unless limit says otherwise): name, template, in use, pinned, expires_at and connection URL of each; next, when not null, is the cursor of the next page.`,
    { title: 'List databases', readOnlyHint: true },
    args({
      limit: z
        .number({ error: `limit must be a whole number from 1 to ${DATABASE_PAGE.maxLimit}` })
        .int({ error: `limit must be a whole number from 1 to ${DATABASE_PAGE.maxLimit}` })
        .min(1, { error: `limit must be a whole number from 1 to ${DATABASE_PAGE.maxLimit}` })
        .max(DATABASE_PAGE.maxLimit, { error: `limit must be a whole number from 1 to ${DATABASE_PAGE.maxLimit}` })
        .describe(`how many databases at most in this page, 1 to ${DATABASE_PAGE.maxLimit}; default ${DATABASE_PAGE.defaultLimit}`)
        .optional(),
      cursor: z
        .string({ error: 'cursor must be a string: the next of the previous page' })
        .max(63, { error: 'cursor must be the next of the previous page (a database name)' })
        .describe('the next of the previous list_databases page; leave it out for the first page')
        .optional(),
    }),
    async (input, ctx) => toolResult({ ...(await ctx.api.listDatabasesPage({ limit: input.limit, after: input.cursor ?? null })) }),
  ),
  tool(
    'database_status',
    'Show one minted database: template, owner, created_at, in_use, pinned, expires_at, connection URL.',
    { title: 'Database status', readOnlyHint: true },
    args({ database: name('database', DATABASE) }),
    async (input, ctx) => toolResult({ ...(await ctx.api.getDatabase(input.database)) }),
  ),
  tool(
    'snapshot_database',
    'Save a database\'s current state as a named snapshot before a risky change; restore_database puts it back.',
    { title: 'Snapshot a database', readOnlyHint: false, destructiveHint: false },
    args({
      database: name('database', DATABASE),
      snapshot: name('snapshot', 'a new name for the snapshot (lower-case letters, digits, underscores), e.g. agent42_before_migration'),
      force: flag('force', FORCE).optional(),
      keep: flag('keep', 'keep the snapshot after the database is dropped (otherwise it goes with it, and the runtime may cap how many a database keeps); default false').optional(),
    }),
    async (input, ctx) => {
      const { name: snapshot, ...t } = await ctx.api.snapshot(input.database, input.snapshot, input.force ?? false, input.keep ?? false);
      return toolResult({ database: input.database, snapshot, ...t });
    },
    {
      UNKNOWN_DATABASE: UNKNOWN_DB_HINT,
      DATABASE_DROPPED: DROPPED_HINT,
      OBJECT_IN_USE: IN_USE_HINT,
      DUPLICATE_DATABASE: 'That snapshot name is taken (by a snapshot or template): choose another name; list_templates shows the taken ones.',
    },
  ),
  tool(
    'restore_database',
    'Put a database back to a snapshot taken with snapshot_database; same name and URL, its current contents are discarded.',
    { title: 'Restore a database', readOnlyHint: false, destructiveHint: true, idempotentHint: true },
    args({
      database: name('database', DATABASE),
      snapshot: name('snapshot', 'the snapshot to restore, as given to snapshot_database (list_templates shows snapshots with snapshot_of)'),
      force: flag('force', FORCE).optional(),
    }),
    async (input, ctx) => {
      const d = await ctx.api.restore(input.database, input.snapshot, input.force ?? false);
      return toolResult({ restored_to: input.snapshot, ...d });
    },
    {
      UNKNOWN_DATABASE: 'The message names what is missing: list_databases shows the databases, list_templates the snapshots (snapshot_of names their database); snapshot_database takes one.',
      OBJECT_IN_USE: IN_USE_HINT,
    },
  ),
  tool(
    'drop_database',
    'Drop a minted database now; its open sessions end. An unknown name is an error (nothing dropped).',
    { title: 'Drop a database', readOnlyHint: false, destructiveHint: true },
    args({ database: name('database', DATABASE) }),
    async (input, ctx) => {
      await mustExist(ctx, input.database);
      await ctx.api.dropDatabase(input.database);
      ctx.roles.forget(input.database);
      return toolResult({ name: input.database, dropped: true });
    },
  ),
  tool(
    'pin_database',
    'Pin a database (pinned: true) so it is kept while idle, or unpin it (pinned: false) so it is dropped once idle.',
    { title: 'Pin or unpin a database', readOnlyHint: false, destructiveHint: false, idempotentHint: true },
    args({
      database: name('database', DATABASE),
      pinned: flag('pinned', 'true to keep it while idle, false to let the janitor drop it once idle'),
    }),
    async (input, ctx) => toolResult({ ...(input.pinned ? await ctx.api.pin(input.database) : await ctx.api.unpin(input.database)) }),
  ),
  tool(
    'list_templates',
    'List the templates create_database can copy (snapshots are templates too, with snapshot_of naming their database), each with its size on disk (disk.apparent_bytes; disk.shared_bytes: shared with clones).',
    { title: 'List templates', readOnlyHint: true },
    args({}),
    async (_input, ctx) => toolResult({ items: await ctx.api.listTemplates() }),
  ),
  tool(
    'drop_template',
    'Drop a template or snapshot (list_templates shows them); databases minted from it keep their data. Refused while such databases are alive unless force: true.',
    { title: 'Drop a template or snapshot', readOnlyHint: false, destructiveHint: true },
    args({
      template: name('template', 'the template or snapshot to drop, as list_templates shows it'),
      force: flag('force', 'drop it although databases minted from it are alive (they keep their data); default false').optional(),
    }),
    async (input, ctx) => {
      await ctx.api.dropTemplate(input.template, input.force ?? false);
      return toolResult({ name: input.template, dropped: true });
    },
    {
      UNKNOWN_DATABASE: TEMPLATES_HINT,
      NOT_A_TEMPLATE: `${TEMPLATES_HINT} A database that is not one is dropped with drop_database (minted ones).`,
      OBJECT_IN_USE: 'Databases minted from it are alive (list_databases shows them): drop them first, or call again with force: true (they keep their data).',
    },
  ),
  tool(
    'keep_snapshot',
    'Keep a snapshot after its database is dropped (keep: true, the default), or give it back to its database (keep: false) so it goes with it.',
    { title: 'Keep a snapshot', readOnlyHint: false, destructiveHint: false, idempotentHint: true },
    args({
      snapshot: name('snapshot', 'the snapshot, as list_templates shows it (snapshot_of names its database)'),
      keep: flag('keep', 'true to keep it past its database (default), false to let it go with it').optional(),
    }),
    async (input, ctx) => toolResult({ ...(await ctx.api.keepSnapshot(input.snapshot, input.keep ?? true)) }),
    {
      UNKNOWN_DATABASE: TEMPLATES_HINT,
      NOT_A_TEMPLATE: 'That is a template, not a snapshot: templates belong to no database and are always kept.',
    },
  ),
  tool(
    'rename_template',
    'Rename a template or snapshot (list_templates shows them); refused while databases minted from it are alive.',
    { title: 'Rename a template or snapshot', readOnlyHint: false, destructiveHint: false, idempotentHint: false },
    args({
      template: name('template', 'the template or snapshot to rename, as list_templates shows it'),
      new_name: name('new_name', 'its new name (lower-case letters, digits, single underscores)'),
    }),
    async (input, ctx) => toolResult({ ...(await ctx.api.renameTemplate(input.template, input.new_name)), renamed_from: input.template }),
    {
      UNKNOWN_DATABASE: TEMPLATES_HINT,
      NOT_A_TEMPLATE: TEMPLATES_HINT,
      OBJECT_IN_USE: 'Databases minted from it are alive (list_databases shows them): drop them first, or build a new template under the new name.',
      DUPLICATE_DATABASE: 'That name is taken: choose another; list_templates shows the taken ones.',
    },
  ),
  tool(
    'runtime_status',
    'Show the PGX runtime: memory, sessions, database counts, warm pools per template, mints, janitor, storage; with disk_usage: true also disk used by templates, snapshots and databases (slow with many databases).',
    { title: 'Runtime status', readOnlyHint: true },
    args({
      // Measuring reads every database's size (pg_database_size): about 20 s at 10,000 databases, so
      // it is asked for, as `pgx status --disk` asks.
      disk_usage: flag('disk_usage', "also measure disk used by templates, snapshots, databases and spares, and the filesystem's free space: it reads every database's size, seconds at thousands of databases; default false (disk_usage is then null)").optional(),
    }),
    async (input, ctx) => toolResult({ ...(await ctx.api.status(input.disk_usage === true)) }),
  ),
  tool(
    'run_sql',
    `Run one SQL statement on a minted database as that database's own role (never a superuser); returns columns, rows (at most max_rows, default ${DEFAULT_MAX_ROWS}; truncated: true when cut), rowCount and command.`,
    { title: 'Run SQL', readOnlyHint: false, destructiveHint: true, openWorldHint: false },
    args({
      database: name('database', DATABASE),
      sql: z
        .string({ error: (iss) => `sql ${iss.input === undefined ? 'is required' : 'must be a string'}: one SQL statement` })
        .min(1, { error: 'sql must not be empty: one SQL statement' })
        .describe('exactly one SQL statement (no trailing second statement); each call is a new session, so no transaction spans calls'),
      max_rows: z
        .number({ error: `max_rows must be a whole number from 1 to ${MAX_MAX_ROWS}` })
        .int({ error: `max_rows must be a whole number from 1 to ${MAX_MAX_ROWS}` })
        .min(1, { error: `max_rows must be at least 1` })
        .max(MAX_MAX_ROWS, { error: `max_rows is at most ${MAX_MAX_ROWS}; add LIMIT/OFFSET to page through more` })
        .describe(`rows returned at most (default ${DEFAULT_MAX_ROWS}, max ${MAX_MAX_ROWS}); more are cut and truncated is true`)
        .optional(),
      timeout_seconds: z
        .number({ error: 'timeout_seconds must be a number of seconds from 0.1 to 300' })
        .min(0.1, { error: 'timeout_seconds must be at least 0.1' })
        .max(300, { error: 'timeout_seconds is at most 300' })
        .describe(`statement_timeout for the statement (default ${DEFAULT_TIMEOUT_SECONDS})`)
        .optional(),
    }),
    async (input, ctx) => {
      // Not reaching the database is CANNOT_CONNECT_NOW from runSql (sql.ts), not the statement's fault.
      const result = await ctx.roles.withUrl(input.database, (url) =>
        runSql(url, input.sql, {
          maxRows: input.max_rows ?? DEFAULT_MAX_ROWS,
          timeoutSeconds: input.timeout_seconds ?? DEFAULT_TIMEOUT_SECONDS,
        }),
      );
      return toolResult({ database: input.database, ...result });
    },
    // The scoped roles' own messages and hints (scoped-roles.ts) say what to do for a database without a credential.
    {},
  ),
];
