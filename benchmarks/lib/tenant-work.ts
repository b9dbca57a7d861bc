// What a test suite does on a new database, as the lifecycles and first-session benchmarks run it: a
// migration in one transaction (three CREATE TABLE and an index), then 20 parameterised statements
// (inserts, then a join with GROUP BY).

import type pg from 'pg';

export const QUERIES = 20;
export const MIGRATION = [
  'CREATE TABLE accounts (id bigserial PRIMARY KEY, email text NOT NULL UNIQUE, created_at timestamptz NOT NULL DEFAULT now())',
  'CREATE TABLE projects (id bigserial PRIMARY KEY, account_id bigint NOT NULL REFERENCES accounts (id), name text NOT NULL)',
  'CREATE TABLE events (id bigserial PRIMARY KEY, project_id bigint NOT NULL REFERENCES projects (id), kind text NOT NULL, at timestamptz NOT NULL DEFAULT now())',
  'CREATE INDEX events_project_at ON events (project_id, at)',
];

/** Milliseconds since `from`, 0.01 precision. */
export const msSince = (from: number): number => Math.round((performance.now() - from) * 100) / 100;

/** The migration, then the statements; each part's milliseconds. */
export async function tenantWork(c: pg.Client): Promise<{ migrateMs: number; queriesMs: number }> {
  let t = performance.now();
  await c.query('BEGIN');
  for (const sql of MIGRATION) await c.query(sql);
  await c.query('COMMIT');
  const migrateMs = msSince(t);
  t = performance.now();
  const account = (await c.query<{ id: string }>('INSERT INTO accounts (email) VALUES ($1) RETURNING id', ['agent@example.com'])).rows[0]!.id;
  const project = (await c.query<{ id: string }>('INSERT INTO projects (account_id, name) VALUES ($1, $2) RETURNING id', [account, 'p'])).rows[0]!.id;
  const events = (QUERIES - 2) / 2;
  for (let i = 0; i < events; i++) await c.query('INSERT INTO events (project_id, kind) VALUES ($1, $2)', [project, `kind${i % 3}`]);
  for (let i = 0; i < events; i++) {
    await c.query('SELECT kind, count(*) FROM events e JOIN projects p ON p.id = e.project_id WHERE p.account_id = $1 GROUP BY kind', [account]);
  }
  return { migrateMs, queriesMs: msSince(t) };
}
