// The frameworks benchmark's third target: a compat lifecycle (test/compat/lifecycles/) through
// PgBouncer in front of the same PostgreSQL. create is the direct target's (CREATE DATABASE ...
// TEMPLATE on PostgreSQL), but its first connect goes through PgBouncer; drop first closes PgBouncer's
// server connections to the database (PgBouncer keeps them idle for the next client: session pooling,
// server_idle_timeout), then runs DROP DATABASE on PostgreSQL, as the direct target does.
//
// The connections are closed with the admin console's `KILL db` ("Immediately drop all client and server
// connections on given database. New client connections to a killed database will wait until RESUME is
// called."), then `RESUME db`, so nothing is left waiting on it. `RECONNECT db` is not used: it closes a
// server connection "after it is released", at a time the command does not wait for, so DROP DATABASE
// could still find it. The config must list the user in admin_users (startPgBouncer's adminUsers).

import { TEMPLATE, type Settings, type Target } from '../../test/compat/lifecycles/targets.js';
import { USER, quoteIdent, withClient, type Endpoint } from './pg-connect.js';

let counter = 0;

/**
 * `bouncer` is PgBouncer's listener (its admin console is the database `pgbouncer` there), `postgres`
 * PostgreSQL itself; every session is the benchmarks' user (USER). Its name is 'direct' for the
 * lifecycles: what they reach is plain PostgreSQL, nothing of PGX (the benchmark names it pgbouncer).
 */
export function pgbouncerTarget(bouncer: Endpoint, postgres: Endpoint): Target {
  const settings = (database: string): Settings => ({ host: bouncer.host, port: bouncer.port, user: USER, database });
  return {
    name: 'direct',
    settings,
    async create(label) {
      counter += 1;
      const database = `bouncer_${label.replace(/[^a-z0-9]/g, '')}_${process.pid}_${counter}_${Math.floor(Math.random() * 1e6)}`;
      await withClient(postgres, 'postgres', (c) => c.query(`CREATE DATABASE ${quoteIdent(database)} TEMPLATE ${TEMPLATE}`));
      await withClient(bouncer, database, (c) => c.query('SELECT 1'));
      return database;
    },
    async drop(database) {
      // The admin console speaks the simple query protocol only: a query without parameters.
      await withClient(bouncer, 'pgbouncer', async (c) => {
        try {
          await c.query(`KILL ${database}`);
        } catch (err) {
          // Never connected through PgBouncer (a create that failed early): nothing of it to close.
          if (/no such database/i.test((err as Error).message)) return;
          throw err;
        }
        await c.query(`RESUME ${database}`);
      });
      await withClient(postgres, 'postgres', (c) => c.query(`DROP DATABASE ${quoteIdent(database)}`));
    },
  };
}
