// node-postgres (pg): SQL migration files applied with the simple protocol (each file and its
// bookkeeping row in one multi-statement Query), fixtures with the extended protocol (parameters, a
// named prepared statement) and COPY FROM STDIN, model tests on a pg.Pool (concurrent queries, a
// dedicated client for transactions, pg-cursor, per-query type parsers, rowMode 'array').

import { expect } from 'chai';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { pipeline } from 'node:stream/promises';
import { Readable } from 'node:stream';
import pg from 'pg';
import { from as copyFrom } from 'pg-copy-streams';
import Cursor from 'pg-cursor';
import { AUTHORS, BOOKS, ISBNS, MISSING_AUTHOR_ID } from './data.js';
import type { Context, Lifecycle, LifecycleRun } from './lifecycle.js';
import { makeProject, sourceFile } from './project.js';

export const SQL_MIGRATIONS = ['001_init', '002_alter'] as const;

/** A project directory holding the SQL migrations, up and down. */
export function prepareSqlProject(parent: string, name: string): string {
  const files: Record<string, string> = {};
  for (const m of SQL_MIGRATIONS) for (const dir of ['up', 'down']) files[`migrations/${m}.${dir}.sql`] = sourceFile(`sql/${m}.${dir}.sql`);
  return makeProject(parent, name, files);
}

export function readMigration(projectDir: string, name: string, dir: 'up' | 'down'): string {
  return readFileSync(path.join(projectDir, 'migrations', `${name}.${dir}.sql`), 'utf8');
}

/** Per-query type parsers: numeric as a JS number, date as its text, bigint (count) as a BigInt. */
const types = {
  getTypeParser(oid: number, format?: string) {
    if (oid === 1700) return (v: string) => Number(v);
    if (oid === 1082) return (v: string) => v;
    if (oid === 20) return (v: string) => BigInt(v);
    return pg.types.getTypeParser(oid, format as 'text');
  },
} as pg.CustomTypesConfig;

function start(ctx: Context): LifecycleRun {
  const { rec } = ctx;
  const pool = new pg.Pool({ ...ctx.db, max: 3 });
  pool.on('connect', (c) => c.on('notice', rec.notice));
  pool.on('error', () => undefined);

  /** One migration file and its bookkeeping row, one simple-protocol Query, one transaction. */
  const apply = async (name: string, dir: 'up' | 'down'): Promise<void> => {
    const sql = readMigration(ctx.projectDir, name, dir);
    const book = dir === 'up' ? `INSERT INTO schema_migrations (version) VALUES ('${name}')` : `DELETE FROM schema_migrations WHERE version = '${name}'`;
    await rec.step(`${dir} ${name}`, async () => {
      const results = await pool.query(`BEGIN;\n${sql}\n${book};\nCOMMIT;`);
      return ([] as pg.QueryResult[]).concat(results as unknown as pg.QueryResult[]).map((r) => `${r.command} ${r.rowCount ?? ''}`.trim());
    });
  };

  const withClient = async <T>(fn: (c: pg.PoolClient) => Promise<T>): Promise<T> => {
    const c = await pool.connect();
    try {
      return await fn(c);
    } finally {
      c.release();
    }
  };

  return {
    async migrate() {
      await rec.step('bookkeeping table', () => pool.query('CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY)').then((r) => r.command));
      await apply('001_init', 'up');
      await rec.step('schema', () => ctx.schema());
    },

    async fixtures() {
      const ids = await rec.step('authors (extended protocol, parameters)', async () => {
        const values = AUTHORS.flatMap((a) => [a.name, a.email, a.country]);
        const r = await pool.query<{ id: number; name: string }>(
          `INSERT INTO authors (name, email, country) VALUES ${AUTHORS.map((_, i) => `($${i * 3 + 1}, $${i * 3 + 2}, $${i * 3 + 3})`).join(', ')} RETURNING id, name`,
          values,
        );
        return r.rows;
      });
      await rec.step('first two books (named prepared statement)', () =>
        withClient(async (c) => {
          const out = [];
          for (const b of BOOKS.slice(0, 2)) {
            const r = await c.query({
              name: 'insert-book',
              text: 'INSERT INTO books (author_id, title, price, published) VALUES ($1, $2, $3, $4) RETURNING id, title, price, published::text',
              values: [ids[b.author]!.id, b.title, b.price, b.published],
            });
            out.push(r.rows[0]);
          }
          return out;
        }),
      );
      await rec.step('other books (COPY FROM STDIN)', () =>
        withClient(async (c) => {
          const lines = BOOKS.slice(2).map((b) => [ids[b.author]!.id, b.title, b.price, b.published ?? '\\N'].join('\t') + '\n');
          const stream = c.query(copyFrom('COPY books (author_id, title, price, published) FROM STDIN'));
          await pipeline(Readable.from(lines), stream);
          return stream.rowCount;
        }),
      );
    },

    async model() {
      const counts = await rec.step('books per author (type parsers: count as BigInt)', async () => {
        const r = await pool.query({
          text: 'SELECT a.name, count(b.id) AS books, sum(b.price) AS total FROM authors a LEFT JOIN books b ON b.author_id = a.id GROUP BY a.name ORDER BY a.name',
          types,
        });
        return r.rows as { name: string; books: bigint; total: number }[];
      });
      expect(counts.map((c) => c.books)).to.deep.equal([1n, 2n, 2n]);
      await rec.step('authors with their countries (template table), rowMode array', () =>
        pool.query({ text: 'SELECT a.name, c.name FROM authors a JOIN countries c ON c.code = a.country ORDER BY a.id', rowMode: 'array' }).then((r) => r.rows),
      );
      await rec.step('three queries at once on a pool of three', () =>
        Promise.all([
          pool.query('SELECT title FROM books WHERE price > $1 ORDER BY title', ['15']).then((r) => r.rows),
          pool.query({ text: 'SELECT published FROM books WHERE published IS NOT NULL ORDER BY published', types }).then((r) => r.rows),
          pool.query('SELECT count(*)::int AS n FROM countries').then((r) => r.rows),
        ]),
      );
      await rec.step('books read in batches of two (pg-cursor)', () =>
        withClient(async (c) => {
          const cursor = c.query(new Cursor('SELECT title FROM books ORDER BY id'));
          const batches: unknown[] = [];
          for (let rows = await cursor.read(2); rows.length > 0; rows = await cursor.read(2)) batches.push(rows);
          await cursor.close();
          return batches;
        }),
      );
      await rec.step('raise a price in a transaction', () =>
        withClient(async (c) => {
          await c.query('BEGIN');
          const r = await c.query("UPDATE books SET price = price + 1 WHERE title = $1 RETURNING title, price", ['Dom Casmurro']);
          await c.query('COMMIT');
          return r.rows;
        }),
      );
      await rec.step('a rolled back insert', () =>
        withClient(async (c) => {
          await c.query('BEGIN');
          await c.query("INSERT INTO books (author_id, title, price) SELECT id, 'Draft', 1 FROM authors WHERE email = 'ada@example.com'");
          await c.query('ROLLBACK');
          return (await c.query("SELECT count(*)::int AS n FROM books WHERE title = 'Draft'")).rows;
        }),
      );
      await rec.fails('a book for a missing author', '23503', () => pool.query('INSERT INTO books (author_id, title, price) VALUES ($1, $2, $3)', [MISSING_AUTHOR_ID, 'Orphan', '1']));
    },

    async migrate2() {
      await apply('002_alter', 'up');
      await rec.step('schema', () => ctx.schema());
    },

    async model2() {
      await rec.step('set ISBNs (named prepared statement, renamed column)', () =>
        withClient(async (c) => {
          const out = [];
          for (const [name, isbn] of Object.entries(ISBNS)) {
            out.push((await c.query({ name: 'set-isbn', text: 'UPDATE books SET isbn = $2 WHERE name = $1 RETURNING name, isbn', values: [name, isbn] })).rows[0]);
          }
          return out;
        }),
      );
      await rec.step('find by ISBN', () =>
        pool.query({ text: 'SELECT b.name, b.isbn, b.price, a.name AS author FROM books b JOIN authors a ON a.id = b.author_id WHERE b.isbn = $1', values: [ISBNS['Quincas Borba']], types }).then((r) => r.rows),
      );
      await rec.fails('a second author with the same email', '23505', () =>
        pool.query('INSERT INTO authors (name, email) VALUES ($1, $2)', ['Ada Again', AUTHORS[0]!.email]),
      );
      await rec.fails('a negative price', '23514', () => pool.query("UPDATE books SET price = -1 WHERE name = 'Hokusai Manga'"));
      await rec.step('an error inside a transaction, then the aborted transaction', () =>
        withClient(async (c) => {
          const seen: unknown[] = [];
          await c.query('BEGIN');
          for (const sql of ["INSERT INTO books (author_id, name, price) VALUES (1, 'Free', -5)", 'SELECT 1']) {
            seen.push(await c.query(sql).then(
              (r) => r.command,
              (e: { code?: string }) => e.code,
            ));
          }
          await c.query('ROLLBACK');
          return seen;
        }),
      );
      await rec.step('cheapest book per author', () =>
        pool.query('SELECT DISTINCT ON (a.name) a.name AS author, b.name, b.price FROM authors a JOIN books b ON b.author_id = a.id ORDER BY a.name, b.price').then((r) => r.rows),
      );
    },

    async down() {
      await apply('002_alter', 'down');
      await apply('001_init', 'down');
      await rec.step('tables left', () => ctx.inspect("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"));
    },

    close: () => pool.end(),
  };
}

export const nodePostgres: Lifecycle = {
  name: 'node-postgres',
  about: 'pg 8: simple and extended protocol, named statements, COPY, pg-cursor, type parsers, pg.Pool',
  prepare: async (parent) => prepareSqlProject(parent, 'pg'),
  start,
};
