// Login roles and their SCRAM verifiers, as PostgreSQL stores them in pg_authid. The engine checks
// client passwords against these, so a role created by any means (config, control API, SQL) works.

import { makeVerifier } from '../wire/scram.js';
import type { Logger } from '../log.js';
import { CREDENTIALS_GROUP } from './database-credentials.js';
import { quoteIdent, quoteLiteral, type SqlClient } from './sql-client.js';

export interface ConfiguredUser {
  name: string;
  password: string;
  superuser?: boolean | undefined;
}

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
      const role = quoteIdent(u.name);
      const attrs = `LOGIN ${u.superuser ? 'SUPERUSER' : 'NOSUPERUSER'} PASSWORD ${quoteLiteral(makeVerifier(u.password))}`;
      const { rows } = await client.query(`SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = ${quoteLiteral(u.name)}`);
      await client.query(rows.length > 0 ? `ALTER ROLE ${role} ${attrs}` : `CREATE ROLE ${role} ${attrs}`);
      logger.info('role configured', { role: u.name, superuser: Boolean(u.superuser) });
    }
  }
}
