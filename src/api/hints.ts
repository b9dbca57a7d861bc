// The HTTP API's hints: what to do next, in the API's own terms (a route, a body field), chosen by the
// error's code for the operation a handler ran. The runtime words its hints for SQL (control functions);
// the CLI (cli/hints.ts) and the MCP tools (mcp/tools.ts) word theirs for their own users.

import type { HintsByCode } from '../errors.js';
import { DATABASE_PAGE } from './paths.js';

const LIST_DATABASES = 'GET /v1/databases lists the live databases; POST /v1/databases with "name" makes one under a name again.';
const DROPPED = 'PGX keeps a dropped name for a while (--tombstone) rather than mint it again empty: POST /v1/databases with "name" makes it again.';

/** Any operation on minted database `name`. */
export function databaseHints(): HintsByCode {
  return { UNKNOWN_DATABASE: LIST_DATABASES, DATABASE_DROPPED: DROPPED };
}

/** GET /v1/databases?limit=N&after=NAME. */
export function listDatabasesHints(): HintsByCode {
  return {
    INVALID_PARAMETER: `limit takes 1 to ${DATABASE_PAGE.maxLimit} (default ${DATABASE_PAGE.defaultLimit}); after takes the "next" of the previous page (docs/api.md, Listing databases).`,
  };
}

/** POST /v1/databases from `template`. */
export function createHints(template: string): HintsByCode {
  return {
    UNKNOWN_TEMPLATE: `GET /v1/templates lists the templates; POST /v1/templates/${template}/seal makes one of a database, POST /v1/templates builds one from a SQL script.`,
    TEMPLATE_NOT_SEALED: `Seal it: POST /v1/templates/${template}/seal.`,
    DUPLICATE_DATABASE: 'Send another "name", or leave it out for a random one.',
  };
}

/** POST /v1/databases/{name}/snapshots and /restore: open sessions are ended only with force. */
export function snapshotHints(database: string): HintsByCode {
  return {
    UNKNOWN_DATABASE: `GET /v1/databases lists the databases and GET /v1/templates the snapshots (snapshot_of names their database); POST /v1/databases/${database}/snapshots takes one.`,
    OBJECT_IN_USE: 'Close its sessions, or send "force": true to end them (they get 57P01).',
    DUPLICATE_DATABASE: 'That name is taken by a template or snapshot (GET /v1/templates lists them): send another "name".',
  };
}

/** POST /v1/templates and /v1/templates/import. */
export function buildHints(): HintsByCode {
  return { DUPLICATE_DATABASE: 'Send "replace": true to rebuild it, or another "name".' };
}

/** POST /v1/templates/{name}/seal and /unseal. */
export function sealHints(): HintsByCode {
  return { UNKNOWN_DATABASE: 'Create the database and fill it over SQL first, or build and seal a template in one call with POST /v1/templates.' };
}

/** DELETE /v1/templates/{name}. */
export function dropTemplateHints(name: string): HintsByCode {
  return {
    UNKNOWN_DATABASE: 'GET /v1/templates lists the templates and snapshots.',
    NOT_A_TEMPLATE: `GET /v1/templates lists the templates and snapshots; DELETE /v1/databases/${name} drops a database PGX minted, DROP DATABASE over SQL any other.`,
    OBJECT_IN_USE: `Drop those databases first, or drop it anyway: DELETE /v1/templates/${name}?force=true (they keep their data).`,
  };
}

/** POST /v1/templates/{name}/rename. */
export function renameTemplateHints(name: string): HintsByCode {
  return {
    UNKNOWN_DATABASE: 'GET /v1/templates lists the templates and snapshots.',
    NOT_A_TEMPLATE: 'GET /v1/templates lists the templates and snapshots; an ordinary database is renamed over SQL (ALTER DATABASE ... RENAME TO).',
    OBJECT_IN_USE: `Drop the databases minted from it first (DELETE /v1/databases/{name}; GET /v1/databases lists them), or close the sessions on ${name}.`,
    DUPLICATE_DATABASE: 'That name is taken (GET /v1/templates lists the templates): send another "name".',
  };
}

/** POST /v1/templates/{name}/keep. */
export function keepSnapshotHints(): HintsByCode {
  return {
    UNKNOWN_DATABASE: 'GET /v1/templates lists the snapshots (snapshot_of names their database); POST /v1/databases/{name}/snapshots with "keep": true takes a kept one.',
    NOT_A_TEMPLATE: 'Only snapshots belong to a database; templates are always kept (GET /v1/templates: snapshot_of is null).',
  };
}
