// Drizzle ORM with drizzle-kit. prepare() runs the real `drizzle-kit generate` on the project's
// schemas (test/compat/projects/drizzle/): the first migration from schema-v1.ts, then the second
// from the v2 schema and a custom migration for the rename (drizzle-kit asks about renames on a TTY
// only). It keeps two versions of the project, v1/ (one migration) and v2/ (three), as a repository
// before and after a pull. Each target then runs the real `drizzle-kit migrate` in v1/ and later in
// v2/. Model tests use drizzle-orm's query builder on node-postgres: joins, aggregates, transactions
// with rollback, a named prepared statement, an upsert. drizzle-kit has no down migrations: the down
// phase drops the tables and drizzle's bookkeeping schema with the ORM's raw SQL, as a user would.

import { expect } from 'chai';
import { cpSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { count, eq, sql } from 'drizzle-orm';
import { drizzle } from 'drizzle-orm/node-postgres';
import { char, pgTable, text } from 'drizzle-orm/pg-core';
import pg from 'pg';
import * as v1 from '../projects/drizzle/schema-v1.js';
import * as v2 from '../projects/drizzle/schema-v2.js';
import { AUTHORS, BOOKS, ISBNS, MISSING_AUTHOR_ID } from './data.js';
import type { Context, Lifecycle, LifecycleRun } from './lifecycle.js';
import { dbEnv, makeProject, sourceFile, tool, writeFiles } from './project.js';

/** The template's table: not in the drizzle schema, so drizzle-kit never generates it. */
const countries = pgTable('countries', { code: char('code', { length: 2 }).primaryKey(), name: text('name').notNull() });

async function prepare(parent: string): Promise<string> {
  const root = makeProject(parent, 'drizzle', {});
  const project = path.join(root, 'v2');
  // generate never connects; the config still reads the variables.
  const env = dbEnv({ host: 'localhost', port: 5432, user: 'postgres', database: 'unused' });
  writeFiles(project, { 'drizzle.config.ts': sourceFile('drizzle/drizzle.config.ts'), 'schema.ts': sourceFile('drizzle/schema-v1.ts') });
  await tool('drizzle-kit', ['generate', '--name', 'init'], project, env);
  cpSync(project, path.join(root, 'v1'), { recursive: true });
  writeFiles(project, { 'schema.ts': sourceFile('drizzle/schema-v2-before-rename.ts') });
  await tool('drizzle-kit', ['generate', '--name', 'constraints'], project, env);
  await tool('drizzle-kit', ['generate', '--custom', '--name', 'rename_title'], project, env);
  const journal = JSON.parse(readFileSync(path.join(project, 'drizzle', 'meta', '_journal.json'), 'utf8')) as { entries: { tag: string }[] };
  expect(journal.entries.map((e) => e.tag)).to.deep.equal(['0000_init', '0001_constraints', '0002_rename_title']);
  writeFileSync(path.join(project, 'drizzle', '0002_rename_title.sql'), sourceFile('drizzle/rename-title.sql'));
  writeFiles(project, { 'schema.ts': sourceFile('drizzle/schema-v2.ts') });
  return root;
}

function start(ctx: Context): LifecycleRun {
  const { rec } = ctx;
  const pool = new pg.Pool({ ...ctx.db, max: 3 });
  pool.on('connect', (c) => c.on('notice', rec.notice));
  pool.on('error', () => undefined);
  const db1 = drizzle({ client: pool, schema: v1 });
  const db2 = drizzle({ client: pool, schema: v2 });
  const kit = (version: 'v1' | 'v2'): Promise<unknown> =>
    rec.step(`drizzle-kit migrate (project ${version})`, () => tool('drizzle-kit', ['migrate'], path.join(ctx.projectDir, version), dbEnv(ctx.db)));
  const applied = (): Promise<unknown> => ctx.inspect('SELECT id, hash, created_at::text FROM drizzle.__drizzle_migrations ORDER BY id');

  return {
    async migrate() {
      await kit('v1');
      await rec.step('__drizzle_migrations', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async fixtures() {
      const ids = await rec.step('authors', () => db1.insert(v1.authors).values(AUTHORS.map((a) => ({ ...a }))).returning({ id: v1.authors.id, name: v1.authors.name }));
      await rec.step('books', () =>
        db1
          .insert(v1.books)
          .values(BOOKS.map((b) => ({ authorId: ids[b.author]!.id, title: b.title, price: b.price, published: b.published })))
          .returning(),
      );
    },

    async model() {
      const { authors, books } = v1;
      const counts = await rec.step('books per author', () =>
        db1.select({ name: authors.name, n: count(books.id) }).from(authors).leftJoin(books, eq(books.authorId, authors.id)).groupBy(authors.name).orderBy(authors.name),
      );
      expect(counts.map((c) => c.n)).to.deep.equal([1, 2, 2]);
      await rec.step('authors with their countries (template table)', () =>
        db1.select({ name: authors.name, country: countries.name }).from(authors).innerJoin(countries, eq(countries.code, authors.country)).orderBy(authors.id),
      );
      const byTitle = db1.select().from(books).where(eq(books.title, sql.placeholder('title'))).prepare('book_by_title');
      await rec.step('a named prepared statement, run twice', async () => [await byTitle.execute({ title: 'Hokusai Manga' }), await byTitle.execute({ title: 'Dom Casmurro' })]);
      await rec.step('raise a price in a transaction', () =>
        db1.transaction((tx) => tx.update(books).set({ price: sql`${books.price} + 1` }).where(eq(books.title, 'Dom Casmurro')).returning({ title: books.title, price: books.price })),
      );
      await rec.step('a transaction rolled back with tx.rollback()', async () => {
        const seen = await db1
          .transaction(async (tx) => {
            await tx.insert(books).values({ authorId: 1, title: 'Draft', price: '1' });
            tx.rollback();
          })
          .then(
            () => 'committed',
            (e: Error) => e.constructor.name,
          );
        return { seen, left: await db1.select({ n: count() }).from(books).where(eq(books.title, 'Draft')) };
      });
      await rec.fails('a book for a missing author', '23503', () => db1.insert(books).values({ authorId: MISSING_AUTHOR_ID, title: 'Orphan', price: '1' }));
    },

    async migrate2() {
      await kit('v2');
      await rec.step('__drizzle_migrations', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async model2() {
      const { authors, books } = v2;
      await rec.step('set ISBNs (renamed column)', async () => {
        const out = [];
        for (const [name, isbn] of Object.entries(ISBNS)) out.push(...(await db2.update(books).set({ isbn }).where(eq(books.name, name)).returning({ name: books.name, isbn: books.isbn })));
        return out;
      });
      await rec.step('find by ISBN', () =>
        db2
          .select({ name: books.name, isbn: books.isbn, price: books.price, author: authors.name })
          .from(books)
          .innerJoin(authors, eq(authors.id, books.authorId))
          .where(eq(books.isbn, ISBNS['Quincas Borba']!)),
      );
      await rec.step('an upsert on the new unique constraint', () =>
        db2
          .insert(authors)
          .values({ name: 'Ada King', email: AUTHORS[0]!.email, country: 'gb' })
          .onConflictDoUpdate({ target: authors.email, set: { name: sql`excluded.name` } })
          .returning({ id: authors.id, name: authors.name }),
      );
      await rec.fails('a second author with the same email', '23505', () => db2.insert(authors).values({ name: 'Ada Again', email: AUTHORS[0]!.email }));
      await rec.fails('a negative price', '23514', () => db2.update(books).set({ price: '-1' }).where(eq(books.name, 'Hokusai Manga')));
    },

    async down() {
      await rec.step('drop the tables and drizzle schema (no down migrations in drizzle-kit)', () =>
        db2.transaction(async (tx) => {
          await tx.execute(sql`DROP TABLE books`);
          await tx.execute(sql`DROP TABLE authors`);
          await tx.execute(sql`DROP SCHEMA drizzle CASCADE`);
        }),
      );
      await rec.step('tables left', () => ctx.inspect("SELECT schemaname, tablename FROM pg_tables WHERE schemaname NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2"));
    },

    close: () => pool.end(),
  };
}

export const drizzleLifecycle: Lifecycle = {
  name: 'drizzle',
  about: 'Drizzle ORM with drizzle-kit generate and migrate, the query builder, transactions, a prepared statement',
  prepare,
  start,
};
