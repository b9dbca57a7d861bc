// postgres.js: the same SQL migrations as node-postgres, run with sql.file() inside sql.begin() (the
// simple protocol: a file is several statements), fixtures with the bulk-insert helper and COPY FROM
// STDIN (writable()), model tests with prepared statements (the default), queries pipelined on one
// connection (Promise.all, and a transaction returning an array), an error in the middle of a pipeline,
// savepoints, a cursor, .simple(), custom type parsers and a pool of four connections.

import { expect } from 'chai';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import postgres from 'postgres';
import { AUTHORS, BOOKS, ISBNS, MISSING_AUTHOR_ID } from './data.js';
import type { Context, Lifecycle, LifecycleRun } from './lifecycle.js';
import { prepareSqlProject } from './node-postgres.js';
import { errorSeen } from './recorder.js';

function start(ctx: Context): LifecycleRun {
  const { rec } = ctx;
  const base = { ...ctx.db, onnotice: rec.notice, connect_timeout: 60 };
  /** One connection: queries issued together are pipelined on it. */
  const sql = postgres({ ...base, max: 1 });
  /** A pool of four with custom type parsers: numeric as a JS number, date as its text, int8 as BigInt. */
  const pool = postgres({
    ...base,
    max: 4,
    types: {
      bigint: postgres.BigInt,
      numeric: { to: 1700, from: [1700], serialize: (x: number) => String(x), parse: (x: string) => Number(x) },
      day: { to: 1082, from: [1082], serialize: (x: string) => x, parse: (x: string) => x },
    },
  });
  const file = (name: string, dir: 'up' | 'down'): string => path.join(ctx.projectDir, 'migrations', `${name}.${dir}.sql`);

  const apply = (name: string, dir: 'up' | 'down'): Promise<unknown> =>
    rec.step(`${dir} ${name}`, () =>
      sql.begin(async (tx) => {
        const results = await tx.file(file(name, dir));
        await (dir === 'up' ? tx`INSERT INTO schema_migrations ${tx({ version: name })}` : tx`DELETE FROM schema_migrations WHERE version = ${name}`);
        return ([] as { command: string }[]).concat(results as unknown as { command: string }[]).map((r) => r.command);
      }),
    );

  return {
    async migrate() {
      await rec.step('bookkeeping table', () => sql`CREATE TABLE IF NOT EXISTS schema_migrations (version text PRIMARY KEY)`.then((r) => r.command));
      await apply('001_init', 'up');
      await rec.step('schema', () => ctx.schema());
    },

    async fixtures() {
      const ids = await rec.step('authors (bulk insert helper)', () =>
        sql<{ id: number; name: string }[]>`INSERT INTO authors ${sql(AUTHORS.map((a) => ({ name: a.name, email: a.email, country: a.country })))} RETURNING id, name`.then((rows) => [...rows]),
      );
      await rec.step('first three books (bulk insert helper)', () =>
        sql`INSERT INTO books ${sql(BOOKS.slice(0, 3).map((b) => ({ author_id: ids[b.author]!.id, title: b.title, price: b.price, published: b.published })))} RETURNING id, title, price`,
      );
      await rec.step('other books (COPY FROM STDIN)', async () => {
        const lines = BOOKS.slice(3).map((b) => [ids[b.author]!.id, b.title, b.price, b.published ?? '\\N'].join('\t') + '\n');
        await pipeline(Readable.from(lines), await sql`COPY books (author_id, title, price, published) FROM STDIN`.writable());
        return (await sql`SELECT count(*)::int AS n FROM books`)[0];
      });
    },

    async model() {
      await rec.step('three queries pipelined on one connection', () =>
        Promise.all([
          sql`SELECT a.name, count(b.id)::int AS books FROM authors a LEFT JOIN books b ON b.author_id = a.id GROUP BY a.name ORDER BY a.name`,
          sql`SELECT a.name, c.name AS country FROM authors a JOIN countries c ON c.code = a.country ORDER BY a.id`,
          sql`SELECT title FROM books WHERE price > ${'15'} ORDER BY title`,
        ]),
      );
      const typed = await rec.step('custom type parsers on the pool', () =>
        pool`SELECT title, price, published, count(*) OVER () AS n FROM books WHERE published IS NOT NULL ORDER BY published`,
      );
      expect(typed[0]!.n).to.equal(4n);
      expect(typed[0]!.price).to.equal(48);
      await rec.step('eight queries at once on a pool of four', () =>
        Promise.all(BOOKS.map((b) => pool`SELECT title, price FROM books WHERE title = ${b.title}`).concat([pool`SELECT count(*) AS n FROM authors`, pool`SELECT 1 AS one`, pool`SELECT count(*) AS n FROM countries`])),
      );
      await rec.step('simple protocol, two statements', () => sql.unsafe('SELECT count(*)::int AS authors FROM authors; SELECT max(price) AS top FROM books').simple());
      await rec.step('a cursor of two rows at a time', async () => {
        const batches: unknown[] = [];
        for await (const rows of sql`SELECT title FROM books ORDER BY id`.cursor(2)) batches.push(rows);
        return batches;
      });
      await rec.step('a pipelined transaction (an array of queries)', () =>
        sql.begin((tx) => [tx`UPDATE books SET price = price + 1 WHERE title = ${'Dom Casmurro'} RETURNING title, price`, tx`SELECT sum(price) AS total FROM books`]),
      );
      await rec.step('a savepoint rolled back inside a committed transaction', async () => {
        await sql.begin(async (tx) => {
          await tx`INSERT INTO books (author_id, title, price) SELECT id, 'Kept', 2 FROM authors WHERE email = 'ada@example.com'`;
          await tx.savepoint(async (sp) => {
            await sp`INSERT INTO books (author_id, title, price) SELECT id, 'Undone', 3 FROM authors WHERE email = 'ada@example.com'`;
            throw new Error('undo the savepoint');
          }).catch(() => undefined);
        });
        return sql`SELECT title FROM books WHERE title IN ('Kept', 'Undone') ORDER BY title`;
      });
      await rec.step('a rolled back transaction', async () => {
        await sql.begin(async (tx) => {
          await tx`DELETE FROM books WHERE title = 'Kept'`;
          throw new Error('roll back');
        }).catch(() => undefined);
        return sql`SELECT count(*)::int AS n FROM books WHERE title = 'Kept'`;
      });
      await rec.fails('a book for a missing author', '23503', () => sql`INSERT INTO books (author_id, title, price) VALUES (${MISSING_AUTHOR_ID}, 'Orphan', 1)`);
    },

    async migrate2() {
      await apply('002_alter', 'up');
      await rec.step('schema', () => ctx.schema());
    },

    async model2() {
      await rec.step('set ISBNs, pipelined (renamed column)', () =>
        Promise.all(Object.entries(ISBNS).map(([name, isbn]) => sql`UPDATE books SET isbn = ${isbn} WHERE name = ${name} RETURNING name, isbn`)),
      );
      await rec.step('find by ISBN on the pool', () =>
        pool`SELECT b.name, b.isbn, b.price, a.name AS author FROM books b JOIN authors a ON a.id = b.author_id WHERE b.isbn = ${ISBNS['Quincas Borba']!}`,
      );
      await rec.fails('a second author with the same email', '23505', () => sql`INSERT INTO authors (name, email) VALUES ('Ada Again', ${AUTHORS[0]!.email})`);
      await rec.fails('a negative price', '23514', () => sql`UPDATE books SET price = -1 WHERE name = 'Hokusai Manga'`);
      await rec.step('an error in the middle of a pipeline', async () => {
        const settled = await Promise.allSettled([
          sql`SELECT count(*)::int AS n FROM books`,
          sql`INSERT INTO authors (name, email) VALUES ('Ada Again', ${AUTHORS[0]!.email})`,
          sql`SELECT name FROM books WHERE price < ${'12'} ORDER BY name`,
        ]);
        return settled.map((s) => (s.status === 'fulfilled' ? s.value : errorSeen(s.reason)));
      });
    },

    async down() {
      await apply('002_alter', 'down');
      await apply('001_init', 'down');
      await rec.step('tables left', () => ctx.inspect("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"));
    },

    async close() {
      await Promise.all([sql.end({ timeout: 5 }), pool.end({ timeout: 5 })]);
    },
  };
}

export const postgresJs: Lifecycle = {
  name: 'postgres.js',
  about: 'postgres 3: simple, extended and pipelined queries, COPY, cursor, savepoints, custom types, a pool',
  prepare: async (parent) => prepareSqlProject(parent, 'postgresjs'),
  start,
};
