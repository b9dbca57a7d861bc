// Who a template's build runs as. By default the role the caller names, or postgres: the HTTP API's
// caller holds the runtime's token and may do anything the runtime can anyway. An `unprivileged`
// build is for callers that hand the build to someone they do not trust with that (the operator: a
// Template is written by whoever may create Templates, a script or dump run as a superuser can read
// every database and run programs in the pod). It never runs as a role with privileges:
//
// - a named owner must hold none: no SUPERUSER, CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS, and
//   no membership in a role that does or in a predefined role (pg_execute_server_program,
//   pg_read_all_data, ...), directly or through others;
// - without one, the template gets a role of its own, named like it, made the first time and marked
//   as ours (a comment on the role). It has no password and logs in only while one of its builds
//   runs, over the runtime's private socket; nobody is a member of it. A role of that name that is not
//   ours, or that someone was made a member of, is refused rather than taken over.
//
// The own role is kept when its template is dropped: it owns the tables of every database copied from
// the template, and it cannot log in.

import { PgxError } from '../../errors.js';
import { postgresSqlstate, quoteIdent, quoteLiteral, type SqlClient } from '../postgres/sql-client.js';

/** The comment on every role PGX made for a template's builds. */
const OWN_ROLE_MARK = 'pgx: owner of a template, logs in only while the template is built';
const NO_PRIVILEGES = 'NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS INHERIT';

export interface OwnerRequest {
  /** The role to build as; default postgres (or, unprivileged, the template's own role). */
  owner?: string | undefined;
  /** Never build as a role with privileges (see above). */
  unprivileged?: boolean | undefined;
}

/**
 * Runs `build` as the owner the request asks for (see above). The template's own role can log in
 * for exactly as long as `build` runs.
 */
export async function withBuildOwner<T>(admin: SqlClient, template: string, req: OwnerRequest, build: (owner: string) => Promise<T>): Promise<T> {
  if (!req.unprivileged) return build(req.owner ?? 'postgres');
  if (req.owner !== undefined) {
    await refusePrivileged(admin, req.owner);
    return build(req.owner);
  }
  await openOwnRole(admin, template);
  try {
    return await build(template);
  } finally {
    await admin.query(`ALTER ROLE ${quoteIdent(template)} NOLOGIN PASSWORD NULL`);
  }
}

/** Roles `role` is (itself or through memberships) that make a build run with privileges. */
function privilegedRolesOf(role: string): string {
  return `SELECT r.rolname FROM pg_catalog.pg_roles r
    WHERE (r.rolsuper OR r.rolcreaterole OR r.rolcreatedb OR r.rolreplication OR r.rolbypassrls
           OR (r.oid < 16384 AND r.rolname <> 'pg_database_owner'))
      AND pg_catalog.pg_has_role(${quoteLiteral(role)}, r.oid, 'MEMBER')`;
}

async function refusePrivileged(admin: SqlClient, owner: string): Promise<void> {
  const { rows: exists } = await admin.query(`SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(owner)}`);
  if (exists.length === 0) return; // buildScratch says it does not exist
  const { rows } = await admin.query(privilegedRolesOf(owner));
  if (rows.length === 0) return;
  const names = rows.map((r) => r[0]);
  // A superuser is a member of every role: name the roles it is given through only when it is not one itself.
  const through = names.includes(owner) ? [] : names;
  throw new PgxError('INSUFFICIENT_PRIVILEGE', `role "${owner}" has privileges ${through.length > 0 ? `(through ${through.map((r) => `"${r}"`).join(', ')}) ` : ''}that an unprivileged build may not run with`, {
    detail: 'A script or dump run as a role with SUPERUSER, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS or a predefined role (pg_execute_server_program, pg_read_all_data, ...) could reach other databases or the server itself.',
    hint: 'Leave the owner out (the template gets a role of its own), or name a role without those privileges.',
  });
}

/** Makes the template's own role, or checks that the one of that name is ours and untouched, and lets it log in. */
async function openOwnRole(admin: SqlClient, role: string): Promise<void> {
  const { rows } = await admin.query(
    `SELECT pg_catalog.shobj_description(oid, 'pg_authid'),
            EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m WHERE m.roleid = r.oid),
            EXISTS (${privilegedRolesOf(role)})
       FROM pg_catalog.pg_roles r WHERE rolname = ${quoteLiteral(role)}`,
  );
  if (rows.length === 0) {
    await admin.query(`CREATE ROLE ${quoteIdent(role)} NOLOGIN ${NO_PRIVILEGES}; COMMENT ON ROLE ${quoteIdent(role)} IS ${quoteLiteral(OWN_ROLE_MARK)}`).catch((err: unknown) => {
      // pg_*, public, none: names PostgreSQL keeps for itself.
      if (postgresSqlstate(err) !== '42939') throw err;
      throw new PgxError('INVALID_PARAMETER', `template "${role}" cannot have a role of its own: PostgreSQL reserves the role name "${role}"`, {
        hint: 'Name an unprivileged owner for it, or give the template another name.',
      });
    });
  } else {
    const [mark, hasMembers, privileged] = rows[0]!;
    if (mark !== OWN_ROLE_MARK || hasMembers !== 'f' || privileged !== 'f') {
      const why = mark !== OWN_ROLE_MARK ? 'it was not made by PGX for the template' : hasMembers !== 'f' ? 'other roles are members of it' : 'it was given privileges';
      throw new PgxError('INSUFFICIENT_PRIVILEGE', `role "${role}" exists and cannot be template "${role}"'s own: ${why}`, {
        hint: 'Name the template differently, or name an unprivileged owner for it.',
      });
    }
  }
  await admin.query(`ALTER ROLE ${quoteIdent(role)} LOGIN PASSWORD NULL ${NO_PRIVILEGES}`);
}
