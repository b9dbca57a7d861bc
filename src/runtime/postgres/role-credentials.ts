// Login roles and their SCRAM verifiers, as PostgreSQL stores them in pg_authid. The engine checks
// client passwords against these, so a role created by any means (config, control API, SQL) works.

import { makeVerifier } from '../../wire/scram.js';
import { PgxError } from '../../errors.js';
import type { Logger } from '../../log.js';
import { CREDENTIALS_GROUP } from '../databases/credentials.js';
import { MINTERS_GROUP } from '../databases/permissions.js';
import { postgresSqlstate, quoteIdent, quoteLiteral, type SqlClient } from './sql-client.js';

export interface ConfiguredUser {
  name: string;
  password: string;
  superuser?: boolean | undefined;
  /** May mint by connecting (a member of pgx_minters); default true for a tenant, moot for a superuser. */
  mint?: boolean | undefined;
}

/** The runtime's own admin role: its password is set, never its attributes. */
export const ADMIN_ROLE = 'postgres';

export class RoleCredentials {
  constructor(
    private readonly admin: () => Promise<SqlClient>,
    /**
     * Whether `role` is a per-database credential the runtime recorded (its map of role -> database).
     * A member of the credentials group that is not one is refused at login: the wall that keeps a
     * credential in its database is keyed by that map, so a miss must close it, not open it.
     */
    private readonly isRecordedCredential: (role: string) => boolean = () => false,
    private readonly logger?: Logger,
  ) {}

  /**
   * The role's SCRAM verifier, or null when it has none, cannot log in, has expired, or is in the
   * credentials group without being a recorded credential (answered like a wrong password, 28P01).
   * Group membership is read in the same query: no extra round trip per login.
   */
  async scramVerifier(user: string): Promise<string | null> {
    const client = await this.admin();
    const { rows } = await client.query(
      `SELECT a.rolpassword, EXISTS (SELECT 1 FROM pg_catalog.pg_auth_members m JOIN pg_catalog.pg_roles g ON g.oid = m.roleid ` +
        `WHERE m.member = a.oid AND g.rolname = ${quoteLiteral(CREDENTIALS_GROUP)}) ` +
        `FROM pg_catalog.pg_authid a WHERE a.rolname = ${quoteLiteral(user)} ` +
        `AND a.rolcanlogin AND (a.rolvaliduntil IS NULL OR a.rolvaliduntil > now())`,
    );
    const stored = rows[0]?.[0] ?? null;
    if (rows[0]?.[1] === 't' && !this.isRecordedCredential(user)) {
      this.logger?.warn('credential-unrecorded', { role: user, reason: `a member of ${CREDENTIALS_GROUP} that is not a recorded per-database credential cannot log in` });
      return null;
    }
    return stored !== null && stored.startsWith('SCRAM-SHA-256$') ? stored : null;
  }

  /** Whether `user` is a superuser (the engine asks only at a database's session cap). */
  async isSuperuser(user: string): Promise<boolean> {
    const { rows } = await (await this.admin()).query(`SELECT rolsuper FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(user)}`);
    return rows[0]?.[0] === 't';
  }

  /**
   * Makes each configured user a login role with that password. The password is turned into a SCRAM
   * verifier here, so the plain text never reaches PostgreSQL or its logs.
   */
  async ensureUsers(users: ConfiguredUser[], logger: Logger): Promise<void> {
    const client = await this.admin();
    for (const u of users) {
      if (u.name === ADMIN_ROLE) continue; // its password is the admin password (setAdminPassword)
      const role = quoteIdent(u.name);
      const attrs = `LOGIN ${u.superuser ? 'SUPERUSER' : 'NOSUPERUSER'} PASSWORD ${quoteLiteral(makeVerifier(u.password))}`;
      const mints = !u.superuser && u.mint !== false;
      try {
        const { rows } = await client.query(`SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(u.name)}`);
        await client.query(rows.length > 0 ? `ALTER ROLE ${role} ${attrs}` : `CREATE ROLE ${role} ${attrs}`);
        if (mints) {
          await ensureGroupRole(client, MINTERS_GROUP);
          await client.query(`GRANT ${quoteIdent(MINTERS_GROUP)} TO ${role}`);
        } else {
          await client.query(`DO $r$ BEGIN IF pg_catalog.pg_has_role(${quoteLiteral(u.name)}, ${quoteLiteral(MINTERS_GROUP)}, 'MEMBER') THEN REVOKE ${quoteIdent(MINTERS_GROUP)} FROM ${role}; END IF; EXCEPTION WHEN undefined_object THEN NULL; END $r$`);
        }
      } catch (err) {
        if (postgresSqlstate(err) === null) throw err;
        throw new PgxError('CONFIG_INVALID', `users: role "${u.name}" could not be configured: ${(err as Error).message}`, {
          hint: 'Fix or remove that entry of "users" in the config file; roles PGX itself uses (pgx_credentials, pgx_minters) cannot be users.',
          cause: err,
        });
      }
      logger.info('role configured', { role: u.name, superuser: Boolean(u.superuser), mint: mints });
    }
  }

  /** Gives the admin role `password` (as a SCRAM verifier): what --auth scram asks of it. */
  async setAdminPassword(password: string): Promise<void> {
    await (await this.admin()).query(`ALTER ROLE ${quoteIdent(ADMIN_ROLE)} PASSWORD ${quoteLiteral(makeVerifier(password))}`);
  }
}

/** A NOLOGIN group role with no rights of its own, made if missing (a concurrent create is no error). */
async function ensureGroupRole(client: SqlClient, name: string): Promise<void> {
  const { rows } = await client.query(`SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(name)}`);
  if (rows.length > 0) return;
  await client.query(`CREATE ROLE ${quoteIdent(name)} NOLOGIN NOSUPERUSER NOCREATEDB NOCREATEROLE NOINHERIT`).catch((err: unknown) => {
    if (!(postgresSqlstate(err) === '42710')) throw err;
  });
}
