// Who may do what, asked of PostgreSQL's own catalogs (pg_roles, pg_database) so that roles made by any
// means count: who may mint on connect, and who may call a control function on a database.

import { PgxError } from '../../errors.js';
import { quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

/**
 * Who may mint on connect: every role, roles with CREATEDB, named roles, or members of the NOLOGIN
 * group MINTERS_GROUP. Superusers always may. With a list or the group, minting is PGX's right to
 * grant: tenants need no CREATEDB, so PostgreSQL's CREATE DATABASE is not in their hands at all.
 */
export type MintRoles = { kind: 'any' } | { kind: 'createdb' } | { kind: 'list'; roles: string[] } | { kind: 'group' };

/** Under --mint-roles group, members of this role may mint (GRANT pgx_minters TO app). */
export const MINTERS_GROUP = 'pgx_minters';

/** How a warm claim checks the mint rule in its own transaction (see claimSpareSql). */
export type ClaimCheck = 'rename' | 'member';

export interface DatabaseAccess {
  /** The caller's role exists (it may have been dropped while its session lives, or before it logs in). */
  roleExists: boolean;
  /** The caller is a superuser. */
  superuser: boolean;
  /** The database exists. */
  exists: boolean;
  owner: string | null;
  /** The caller owns the database (directly or by membership in the owning role), or is a superuser. */
  ownerOrSuperuser: boolean;
  isTemplate: boolean;
  allowConnections: boolean;
}

export class Permissions {
  constructor(
    private readonly client: () => Promise<SqlClient>,
    private readonly mintRoles: MintRoles,
  ) {}

  /**
   * How a warm claim for `user` checks the mint rule without a catalog lookup first: 'none' when the
   * settings alone allow it (--mint-roles any, or a listed role); 'rename' under --mint-roles createdb,
   * whose rule (superuser, or CREATEDB) is PostgreSQL's own for renaming a database one owns, so the
   * claim renames as that role and PostgreSQL checks (claimSpareSql); 'member' under --mint-roles
   * group, whose claim refuses a role not in MINTERS_GROUP in the same transaction; null when only
   * mayMint can tell.
   */
  claimCheck(user: string): 'none' | ClaimCheck | null {
    if (this.mintRoles.kind === 'any') return 'none';
    if (this.mintRoles.kind === 'list') return this.mintRoles.roles.includes(user) ? 'none' : null;
    if (this.mintRoles.kind === 'group') return 'member';
    return 'rename';
  }

  /** Under --mint-roles group: the group role exists (NOLOGIN, no rights of its own). */
  async ensureMintersGroup(): Promise<void> {
    if (this.mintRoles.kind !== 'group') return;
    const client = await this.client();
    const { rows } = await client.query(`SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(MINTERS_GROUP)}`);
    if (rows.length === 0) await client.query(`CREATE ROLE ${MINTERS_GROUP} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT`).catch(() => undefined);
  }

  /** Whether `user` may create databases by connecting to a name under the prefix. */
  async mayMint(user: string): Promise<boolean> {
    if (this.claimCheck(user) === 'none') return true;
    const { rows } = await (await this.client()).query(
      `SELECT rolsuper, rolcreatedb, coalesce(pg_catalog.pg_has_role(oid, (SELECT g.oid FROM pg_catalog.pg_roles g WHERE g.rolname = ${quoteLiteral(MINTERS_GROUP)}), 'MEMBER'), false) ` +
        `FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(user)}`,
    );
    const row = rows[0];
    if (!row) return false;
    return row[0] === 't' || (this.mintRoles.kind === 'createdb' && row[1] === 't') || (this.mintRoles.kind === 'group' && row[2] === 't');
  }

  /** The caller's standing towards one database, in one catalog query. */
  async access(user: string, database: string): Promise<DatabaseAccess> {
    const { rows } = await (await this.client()).query(
      `SELECT r.rolsuper, d.datname IS NOT NULL, pg_catalog.pg_get_userbyid(d.datdba), ` +
        `r.rolsuper OR (d.datdba IS NOT NULL AND pg_catalog.pg_has_role(r.oid, d.datdba, 'USAGE')), ` +
        `coalesce(d.datistemplate, false), coalesce(d.datallowconn, false) ` +
        `FROM pg_catalog.pg_roles r LEFT JOIN pg_catalog.pg_database d ON d.datname = ${quoteLiteral(database)} ` +
        `WHERE r.rolname = ${quoteLiteral(user)}`,
    );
    const row = rows[0];
    if (!row) {
      // The caller's role is gone (dropped while its session lives): it may do nothing.
      const exists = await this.databaseExists(database);
      return { roleExists: false, superuser: false, exists, owner: null, ownerOrSuperuser: false, isTemplate: false, allowConnections: false };
    }
    return {
      roleExists: true,
      superuser: row[0] === 't',
      exists: row[1] === 't',
      owner: row[2] ?? null,
      ownerOrSuperuser: row[3] === 't',
      isTemplate: row[4] === 't',
      allowConnections: row[5] === 't',
    };
  }

  async databaseExists(database: string): Promise<boolean> {
    const { rows } = await (await this.client()).query(
      `SELECT 1 FROM pg_catalog.pg_database WHERE datname = ${quoteLiteral(database)}`,
    );
    return rows.length > 0;
  }
}

/** 42501 as PostgreSQL words it for a function, with who may call it. */
export function functionDenied(fn: string, database: string | null): PgxError {
  return new PgxError('INSUFFICIENT_PRIVILEGE', `permission denied for function ${fn}`, {
    hint: database === null ? 'Only a superuser may call it.' : `Only a superuser or the owner of database "${database}" may call it.`,
  });
}

/**
 * 42501 for a copy of a snapshot by a role that does not own it, as PostgreSQL words a copy of a
 * database one may not copy: a snapshot holds its database's data, not a template's shared schema.
 */
export function snapshotDenied(name: string): PgxError {
  return new PgxError('INSUFFICIENT_PRIVILEGE', `permission denied to copy database "${name}"`, {
    detail: `"${name}" is a snapshot of another role's database.`,
    hint: 'Only its owner (or a superuser) copies a snapshot, by restoring or minting from it: mint from a template, or snapshot a database of your own.',
  });
}
