// The templates the database benchmarks mint from, built and sealed through the runtime's HTTP API.
// Small: one table of ten rows, what a test suite's fixture looks like. Big: about 600 relation files
// (tables, each with a primary key, a second index and a TOAST table with its index; after the seal's
// VACUUM FREEZE also free-space and visibility maps), for cold mints, where copying files is the cost.

import { readdirSync } from 'node:fs';
import path from 'node:path';
import type { RuntimeProcess } from './runtime-process.js';
import { queryOnce } from './pg-connect.js';

export const SMALL_TEMPLATE = 'tpl_small';
export const BIG_TEMPLATE = 'tpl_big';
/** Tables in the big template: with PostgreSQL 18's catalog files this makes about 600 files. */
const BIG_TABLES = 45;

const SMALL_SQL = `CREATE TABLE items (id serial PRIMARY KEY, name text NOT NULL);
INSERT INTO items (name) SELECT 'item ' || g FROM generate_series(1, 10) g;`;

const BIG_SQL = `DO $$ BEGIN
  FOR i IN 1..${BIG_TABLES} LOOP
    EXECUTE format('CREATE TABLE t%s (id int PRIMARY KEY, body text NOT NULL, n int NOT NULL)', i);
    EXECUTE format('CREATE INDEX ON t%s (n)', i);
    EXECUTE format('INSERT INTO t%s SELECT g, md5(g::text), g %% 7 FROM generate_series(1, 50) g', i);
  END LOOP;
END $$;`;

export async function buildTemplate(rt: RuntimeProcess, which: 'small' | 'big'): Promise<string> {
  const name = which === 'small' ? SMALL_TEMPLATE : BIG_TEMPLATE;
  await rt.api.buildTemplate({ name, sql: which === 'small' ? SMALL_SQL : BIG_SQL, seal: true });
  return name;
}

/** Files in the database's directory (base/<oid>): every relation fork, plus PG_VERSION and the map. */
export async function databaseFiles(rt: RuntimeProcess, database: string): Promise<number> {
  const rows = await queryOnce(rt.postgres, 'postgres', `SELECT oid::text AS oid FROM pg_database WHERE datname = '${database}'`);
  return readdirSync(path.join(rt.dataDir, 'base', String(rows[0]!.oid))).length;
}
