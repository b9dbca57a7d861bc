// Database names PGX owns: minted names `<prefix><template>__<token>`, the warm pool's spares and the
// control database. Pure functions, no I/O: routing calls them on every connect.
//
// Minted names admit only lower-case ASCII letters, digits and underscores. That set needs no quoting
// in SQL, cannot smuggle SQL into a statement, is one byte per character (so the 63-byte limit is a
// character count), and is case-stable: PostgreSQL folds unquoted identifiers to lower case, so
// `tdb_app__x` means the same database quoted or not, in psql, ORMs and URLs alike.

import type { ControlFunction } from '../../engine/ports.js';
import { PgxError } from '../../errors.js';

/** Where PGX keeps its metadata. Never routable: route() refuses it as if it did not exist. */
export const CONTROL_DATABASE = 'pgx_control';
/** Warm-pool spares are `pgx_spare_<n>`: outside every mint prefix, never routable, hidden from users. */
export const SPARE_PREFIX = 'pgx_spare_';
/** A template being built from a script is `pgx_build_<n>` until it is renamed into place. */
export const BUILD_PREFIX = 'pgx_build_';
/**
 * A dropped database waiting for its DROP DATABASE is `pgx_trash_<oid>` (trash.ts): the name is free
 * for a new mint at once, and the oid makes the trash name unique for as long as the database exists.
 */
export const TRASH_PREFIX = 'pgx_trash_';
/** PostgreSQL's NAMEDATALEN - 1: longer names are truncated by PostgreSQL, so we refuse them. */
export const MAX_NAME_BYTES = 63;
/** Splits template from token: the first occurrence after the prefix. */
const SEPARATOR = '__';
const NAME_CHARS = /^[a-z0-9_]+$/;

export interface MintName {
  /** The whole database name, e.g. tdb_tpl_app__agent42. */
  name: string;
  template: string;
  token: string;
}

/** Databases the runtime keeps connections to (postgres) or PostgreSQL keeps pristine: never sealed, snapshotted, restored or dropped through PGX. */
export function isSystemDatabase(name: string): boolean {
  return name === 'postgres' || name === 'template0' || name === 'template1';
}

/** The control database, a spare, a template being built or a dropped database: names tenants must never reach or see. */
export function isReservedName(name: string): boolean {
  return name === CONTROL_DATABASE || name.startsWith(SPARE_PREFIX) || name.startsWith(BUILD_PREFIX) || name.startsWith(TRASH_PREFIX);
}

export function spareName(n: number): string {
  return `${SPARE_PREFIX}${n}`;
}

export function isSpareName(name: string): boolean {
  return name.startsWith(SPARE_PREFIX) && /^[0-9]+$/.test(name.slice(SPARE_PREFIX.length));
}

export function buildName(n: number): string {
  return `${BUILD_PREFIX}${n}`;
}

/** A scratch database of a template build (see script-build.ts). */
export function isBuildName(name: string): boolean {
  return name.startsWith(BUILD_PREFIX) && /^[0-9]+$/.test(name.slice(BUILD_PREFIX.length));
}

export function trashName(oid: number | string): string {
  return `${TRASH_PREFIX}${oid}`;
}

/** A dropped database whose DROP DATABASE has not run yet (see trash.ts). */
export function isTrashName(name: string): boolean {
  return name.startsWith(TRASH_PREFIX) && /^[0-9]+$/.test(name.slice(TRASH_PREFIX.length));
}

export function isUnderPrefix(name: string, prefix: string): boolean {
  return name.startsWith(prefix);
}

/** The error PostgreSQL gives for a missing database, word for word, so clients handle it as usual. */
export function databaseDoesNotExist(name: string, opts: { hint?: string; detail?: string } = {}): PgxError {
  return new PgxError('UNKNOWN_DATABASE', `database "${name}" does not exist`, opts);
}

function validNameHint(prefix: string): string {
  return (
    `A database minted on connect is named ${prefix}<template>__<token>, e.g. ${prefix}tpl_app__agent42: ` +
    `lower-case letters, digits and underscores only, at most ${MAX_NAME_BYTES} bytes, with a sealed template ` +
    `before the first "__" and a non-empty token after it.`
  );
}

/**
 * Splits a name under the prefix into template and token, or refuses it with 3D000 and a hint saying
 * what a valid name looks like (the detail says what is wrong with this one).
 */
export function parseMintName(name: string, prefix: string): MintName {
  const problem = mintNameProblem(name, prefix);
  if (problem !== null) throw databaseDoesNotExist(name, { hint: validNameHint(prefix), detail: sentence(problem) });
  const rest = name.slice(prefix.length);
  const at = rest.indexOf(SEPARATOR);
  return { name, template: rest.slice(0, at), token: rest.slice(at + SEPARATOR.length) };
}

/** Why `name` is not a valid minted name, or null when it is one. */
export function mintNameProblem(name: string, prefix: string): string | null {
  if (!name.startsWith(prefix)) return `the name does not start with the mint prefix "${prefix}"`;
  const bytes = Buffer.byteLength(name, 'utf8');
  if (bytes > MAX_NAME_BYTES) return `the name is ${bytes} bytes long; PostgreSQL names hold at most ${MAX_NAME_BYTES}`;
  if (!NAME_CHARS.test(name)) return 'the name may contain only lower-case ASCII letters, digits and underscores';
  const rest = name.slice(prefix.length);
  const at = rest.indexOf(SEPARATOR);
  if (at < 0) return `there is no "${SEPARATOR}" between template and token`;
  if (at === 0) return 'the template part before the first "__" is empty';
  if (at + SEPARATOR.length === rest.length) return 'the token after the first "__" is empty';
  return null;
}

/**
 * Why a database cannot serve as a template under this prefix (its name could never be reached by a
 * minted name), or null when it can. Sealing refuses such names rather than seal something unusable.
 */
export function templateNameProblem(template: string, prefix: string): string | null {
  if (!NAME_CHARS.test(template)) return 'a template name may contain only lower-case ASCII letters, digits and underscores';
  // Connecting to it (to change it after an unseal) would be read as a mint request and refused.
  if (template.startsWith(prefix)) return `a template name cannot start with the mint prefix "${prefix}"`;
  if (template.includes(SEPARATOR)) return `a template name cannot contain "${SEPARATOR}", which separates template from token`;
  // `app_` followed by `__x` reads as template `app` and token `_x`.
  if (template.endsWith('_')) return 'a template name cannot end with "_": the minted name would split before it';
  const shortest = `${prefix}${template}${SEPARATOR}x`;
  if (Buffer.byteLength(shortest) > MAX_NAME_BYTES) {
    return `${prefix}${template}__<token> would exceed ${MAX_NAME_BYTES} bytes even with a one-character token`;
  }
  return null;
}

/**
 * Why a mint prefix is unusable, or null. It must itself be a valid name start and must not overlap
 * the reserved names, or minted and internal databases could be confused.
 */
export function prefixProblem(prefix: string): string | null {
  if (prefix.length === 0) return 'the prefix is empty';
  if (!/^[a-z][a-z0-9_]*$/.test(prefix)) return 'the prefix must start with a lower-case letter and hold only lower-case letters, digits and underscores';
  if (Buffer.byteLength(prefix) > MAX_NAME_BYTES - 4) return 'the prefix leaves no room for template and token';
  if (prefix.startsWith('pgx_') || 'pgx_'.startsWith(prefix)) return 'prefixes overlapping "pgx_" are reserved for PGX\'s own databases';
  return null;
}

/** A problem fragment as the DETAIL of an error: a capitalised sentence, as PostgreSQL writes them. */
function sentence(fragment: string): string {
  return `${fragment[0]!.toUpperCase()}${fragment.slice(1)}.`;
}

/** A control function's SQL name, as error messages and hints name it (engine/control-functions.ts declares each). */
export function controlSqlName(fn: ControlFunction): string {
  return `pgx_${fn}`;
}
