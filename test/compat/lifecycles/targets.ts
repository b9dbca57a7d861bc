// The two places a lifecycle runs: through the PGX engine, in a database minted by connecting to a
// fresh `tdb_<template>__<token>` name, and on PostgreSQL 18 directly, in a database made from the same
// sealed template with `CREATE DATABASE ... TEMPLATE`, as a test suite without PGX would make it. Both
// start from the template's content; the names differ and never enter a transcript.

import pg from 'pg';

/** Where a client connects: a host (or Unix socket directory), port, user and database. */
export interface Settings {
  host: string;
  port: number;
  user: string;
  database: string;
}

export type Endpoint = Omit<Settings, 'database'>;

export type TargetName = 'direct' | 'pgx';

export interface Target {
  name: TargetName;
  /** Client settings for `database` on this target. */
  settings(database: string): Settings;
  /** A fresh database from the template, connected to once (`SELECT 1`); returns its name. */
  create(label: string): Promise<string>;
  /** Drops a database `create` made; every session on it must have ended. */
  drop(database: string): Promise<void>;
}

/** The sealed template every lifecycle's database starts from. */
export const TEMPLATE = 'tpl_compat';

/** A reference table the migrations do not create: the lifecycles join it to see the template's rows. */
export const TEMPLATE_SQL = `
  CREATE TABLE countries (code char(2) PRIMARY KEY, name text NOT NULL);
  INSERT INTO countries VALUES ('br', 'Brazil'), ('fr', 'France'), ('gb', 'United Kingdom'), ('jp', 'Japan'), ('ke', 'Kenya');
`;

async function withClient<T>(s: Settings, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = new pg.Client({ ...s, connectionTimeoutMillis: 60_000 });
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

let counter = 0;

function token(label: string): string {
  counter += 1;
  return `${label.replace(/[^a-z0-9]/g, '')}_${process.pid}_${counter}_${Math.floor(Math.random() * 1e6)}`;
}

/** Through the engine: connecting to a new `tdb_` name mints it; pgx_drop_database() drops it at once. */
export function engineTarget(engine: Endpoint): Target {
  const settings = (database: string): Settings => ({ ...engine, database });
  return {
    name: 'pgx',
    settings,
    async create(label) {
      const database = `tdb_${TEMPLATE}__${token(label)}`;
      await withClient(settings(database), (c) => c.query('SELECT 1'));
      return database;
    },
    async drop(database) {
      await withClient(settings('postgres'), (c) => c.query(`SELECT pgx_drop_database('${database}')`));
    },
  };
}

/** On PostgreSQL directly: CREATE DATABASE ... TEMPLATE from the sealed template, then DROP DATABASE. */
export function directTarget(postgres: Endpoint): Target {
  const settings = (database: string): Settings => ({ ...postgres, database });
  return {
    name: 'direct',
    settings,
    async create(label) {
      const database = `compat_${token(label)}`;
      await withClient(settings('postgres'), (c) => c.query(`CREATE DATABASE "${database}" TEMPLATE ${TEMPLATE}`));
      await withClient(settings(database), (c) => c.query('SELECT 1'));
      return database;
    },
    async drop(database) {
      await withClient(settings('postgres'), (c) => c.query(`DROP DATABASE "${database}"`));
    },
  };
}

/** Builds and seals the template through the engine (SQL, as a user would). */
export async function buildTemplate(engine: Endpoint): Promise<void> {
  const at = (database: string): Settings => ({ ...engine, database });
  await withClient(at('postgres'), (c) => c.query(`CREATE DATABASE ${TEMPLATE}`));
  await withClient(at(TEMPLATE), (c) => c.query(TEMPLATE_SQL));
  await withClient(at('postgres'), (c) => c.query(`SELECT pgx_seal_template('${TEMPLATE}')`));
}

/** A postgresql:// URL for the settings (a Unix socket directory goes in the host, percent-encoded). */
export function urlOf(s: Settings): string {
  return `postgresql://${encodeURIComponent(s.user)}@${encodeURIComponent(s.host)}:${s.port}/${encodeURIComponent(s.database)}`;
}
