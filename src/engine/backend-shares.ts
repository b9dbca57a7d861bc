// Each role's and each database's share of the PostgreSQL backends (--max-backends-per-role,
// --max-backends-per-db), so one credential's idle sessions cannot take every backend and leave the
// other tenants and the admin waiting. In session pooling a client session holds its backend for its
// whole life, so the share counts sessions from their admission (before they wait for a backend) until
// they close, as PostgreSQL's own connection limits count connections. The admin (the runtime's own
// roles, any client on the Unix socket) takes no share; it has backends kept for it instead (the
// pool's reserved backends, as PostgreSQL's superuser_reserved_connections).

import { PgxError } from '../errors.js';

export interface BackendShareLimits {
  /** Sessions one role may hold at once. */
  perRole: number;
  /** Sessions on one database at once. */
  perDatabase: number;
  /** Of maxBackends, for the 53300's detail. */
  maxBackends: number;
}

export class BackendShares {
  private readonly roles = new Map<string, number>();
  private readonly databases = new Map<string, number>();

  constructor(private readonly limits: BackendShareLimits) {}

  /** Takes a share for a session of `role` on `database`, or throws 53300 naming the limit reached. */
  take(role: string, database: string): void {
    const r = this.roles.get(role) ?? 0;
    const d = this.databases.get(database) ?? 0;
    const { perRole, perDatabase, maxBackends } = this.limits;
    if (r >= perRole) throw shareError(`role "${role}"`, perRole, maxBackends, '--max-backends-per-role');
    if (d >= perDatabase) throw shareError(`database "${database}"`, perDatabase, maxBackends, '--max-backends-per-db');
    this.roles.set(role, r + 1);
    this.databases.set(database, d + 1);
  }

  give(role: string, database: string): void {
    release(this.roles, role);
    release(this.databases, database);
  }
}

function release(counts: Map<string, number>, name: string): void {
  const n = counts.get(name) ?? 0;
  if (n <= 1) counts.delete(name);
  else counts.set(name, n - 1);
}

function shareError(who: string, share: number, maxBackends: number, option: string): PgxError {
  return new PgxError('TOO_MANY_CONNECTIONS', `too many connections for ${who}: it holds its share of ${share} backends`, {
    detail: `One role or database may hold at most ${share} of the runtime's ${maxBackends} PostgreSQL backends at once, so that it cannot leave the others waiting.`,
    hint: `Close idle sessions or pool connections in the client, or raise the share with ${option}.`,
  });
}
