// The CLI's hints: what to do next as a `pgx` command line (`pgx template seal tpl_raw`, `--replace`,
// `--force`, `pgx db list`), chosen by the error's code for the command that ran. The API answers with
// hints in HTTP terms (api/hints.ts) and the runtime in SQL's; neither is what a shell user types.

import type { HintsByCode } from '../errors.js';

/** For every command that talks to the API (main.ts gives them to any error of these codes). */
export const COMMON_HINTS: HintsByCode = {
  INVALID_AUTHORIZATION: "Pass --token TOKEN or set PGX_API_TOKEN: the runtime's token is in DATA_DIR/pgx-api.token unless it was started with --api-token-file.",
};

/** Any command on minted database `name`. */
export function databaseHints(name: string): HintsByCode {
  return {
    UNKNOWN_DATABASE: `pgx db list shows the live databases; pgx db create TEMPLATE --name ${name} makes one of that name again.`,
    DATABASE_DROPPED: `PGX keeps a dropped name for a while (--tombstone) rather than mint it again empty: pgx db create TEMPLATE --name ${name} makes it again.`,
  };
}

/** `pgx db create TEMPLATE`. */
export function createHints(template: string): HintsByCode {
  return {
    UNKNOWN_TEMPLATE: `pgx template list shows the templates; pgx template seal ${template} makes one of a database, pgx template create ${template} --file schema.sql builds one.`,
    TEMPLATE_NOT_SEALED: `Seal it: pgx template seal ${template}`,
    DUPLICATE_DATABASE: 'Pass another --name, or leave it out for a random one.',
  };
}

/** `pgx db drop NAME`: only minted databases; templates and snapshots have their own drop. */
export function dropHints(name: string): HintsByCode {
  return { ...databaseHints(name), INVALID_PARAMETER: `pgx db drop drops minted databases; pgx template drop ${name} drops a template or snapshot.` };
}

/** `pgx db snapshot|restore NAME SNAPSHOT`: open sessions are ended only with --force. */
export function snapshotHints(name: string, snapshot: string): HintsByCode {
  return {
    UNKNOWN_DATABASE: `pgx db list shows the databases and pgx template list the snapshots; pgx db snapshot ${name} ${snapshot} takes one.`,
    OBJECT_IN_USE: 'Close its sessions, or pass --force to end them (they get 57P01).',
    DUPLICATE_DATABASE: `That name is taken by a template or snapshot (pgx template list shows them): pick another.`,
  };
}

/** `pgx template create|import NAME`. */
export function buildHints(): HintsByCode {
  return { DUPLICATE_DATABASE: 'Pass --replace to rebuild it, or pick another name.' };
}

/** `pgx template seal|unseal NAME`. */
export function sealHints(name: string): HintsByCode {
  return {
    UNKNOWN_DATABASE: `pgx template list shows the templates. To make one: pgx template create ${name} --file schema.sql, or CREATE DATABASE ${name} over psql, fill it, then pgx template seal ${name}.`,
  };
}

/** `pgx template drop NAME`. */
export function dropTemplateHints(name: string): HintsByCode {
  return {
    UNKNOWN_DATABASE: 'pgx template list shows the templates and snapshots.',
    NOT_A_TEMPLATE: `pgx template list shows the templates and snapshots; pgx db drop ${name} drops a database PGX minted, DROP DATABASE over psql any other.`,
    OBJECT_IN_USE: `Drop those databases first (pgx db list), or drop it anyway: pgx template drop ${name} --force (they keep their data).`,
  };
}

/** `pgx template rename NAME NEW`. */
export function renameTemplateHints(name: string): HintsByCode {
  return {
    UNKNOWN_DATABASE: 'pgx template list shows the templates and snapshots.',
    NOT_A_TEMPLATE: 'pgx template list shows the templates and snapshots; an ordinary database is renamed over psql (ALTER DATABASE ... RENAME TO).',
    OBJECT_IN_USE: `Drop the databases minted from it first (pgx db list, pgx db drop NAME), or close the sessions on ${name}.`,
    DUPLICATE_DATABASE: 'That name is taken (pgx template list shows the templates): pick another.',
  };
}

/** `pgx template keep NAME [--release]`. */
export function keepSnapshotHints(): HintsByCode {
  return {
    UNKNOWN_DATABASE: 'pgx template list shows the snapshots (SNAPSHOT OF names their database); pgx db snapshot DB NAME --keep takes a kept one.',
    NOT_A_TEMPLATE: 'Only snapshots belong to a database; templates are always kept (pgx template list: SNAPSHOT OF is -).',
  };
}
