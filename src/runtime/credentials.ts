// Login roles and their SCRAM verifiers, as PostgreSQL stores them in pg_authid. The engine checks
// client passwords against these, so a role created by any means (config, control API, SQL) works.

import { makeVerifier } from '../wire/scram.js';
import type { Logger } from '../log.js';
import { quoteIdent, quoteLiteral, type SqlClient } from './sql-client.js';

export interface ConfiguredUser {
  name: string;
  password: string;
  superuser?: boolean | undefined;
}

export class RoleCredentials {
  constructor(private readonly admin: () => Promise<SqlClient>) {}

  /** The role's SCRAM verifier, or null when it has none, cannot log in, or has expired. */
  async scramVerifier(user: string): Promise<string | null> {
    const client = await this.admin();
    const { rows } = await client.query(
      `SELECT rolpassword FROM pg_catalog.pg_authid WHERE rolname = ${quoteLiteral(user)} ` +
        `AND rolcanlogin AND (rolvaliduntil IS NULL OR rolvaliduntil > now())`,
    );
    const stored = rows[0]?.[0] ?? null;
    return stored !== null && stored.startsWith('SCRAM-SHA-256$') ? stored : null;
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
