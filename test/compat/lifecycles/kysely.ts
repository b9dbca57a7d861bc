// Kysely on a pg.Pool (with pg-cursor for streams): migration files (test/compat/projects/kysely/,
// compiled) run by Kysely's Migrator with its FileMigrationProvider (migrateTo the first, then
// migrateToLatest, then migrateTo(NO_MIGRATIONS)); model tests with the typed query builder,
// transactions, a stream, an upsert on the new unique constraint, and raw `sql`.

import { expect } from 'chai';
import { promises as fs } from 'node:fs';
import path from 'node:path';
import { Kysely, PostgresDialect, sql, type Generated } from 'kysely';
import { FileMigrationProvider, Migrator, NO_MIGRATIONS, type MigrationResultSet } from 'kysely/migration';
import pg from 'pg';
import Cursor from 'pg-cursor';
import { AUTHORS, BOOKS, ISBNS, MISSING_AUTHOR_ID } from './data.js';
import type { Context, Lifecycle, LifecycleRun } from './lifecycle.js';
import { compiledDir } from './project.js';

interface Authors {
  id: Generated<number>;
  name: string;
  email: string;
  country: string | null;
}

interface Countries {
  code: string;
  name: string;
}

/** The schema after the first migration. */
interface DbV1 {
  authors: Authors;
  countries: Countries;
  books: { id: Generated<number>; author_id: number; title: string; price: string | number; published: Date | string | null };
}

/** The schema after the second: books.title renamed to name, books.isbn added. */
interface DbV2 {
  authors: Authors;
  countries: Countries;
  books: { id: Generated<number>; author_id: number; name: string; price: string | number; published: Date | string | null; isbn: string | null };
}

/** What a migration run did, or its error. */
function outcome(r: MigrationResultSet): unknown {
  if (r.error) throw r.error;
  return r.results?.map((m) => `${m.direction} ${m.migrationName} ${m.status}`);
}

function start(ctx: Context): LifecycleRun {
  const { rec } = ctx;
  const pool = new pg.Pool({ ...ctx.db, max: 3 });
  pool.on('connect', (c) => c.on('notice', rec.notice));
  pool.on('error', () => undefined);
  const db = new Kysely<DbV1>({ dialect: new PostgresDialect({ pool, cursor: Cursor }) });
  // The same instance, typed for the schema the second migration leaves.
  const db2 = db as unknown as Kysely<DbV2>;
  const migrator = new Migrator({ db, provider: new FileMigrationProvider({ fs, path, migrationFolder: compiledDir('kysely/migrations') }) });
  const applied = (): Promise<unknown> => sql`SELECT name FROM kysely_migration ORDER BY name`.execute(db).then((r) => r.rows);

  return {
    async migrate() {
      await rec.step('migrateTo 001_init', async () => outcome(await migrator.migrateTo('001_init')));
      await rec.step('kysely_migration', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async fixtures() {
      const ids = await rec.step('authors', () =>
        db.insertInto('authors').values(AUTHORS.map((a) => ({ ...a }))).returning(['id', 'name']).execute(),
      );
      await rec.step('books', () =>
        db
          .insertInto('books')
          .values(BOOKS.map((b) => ({ author_id: ids[b.author]!.id, title: b.title, price: b.price, published: b.published })))
          .returning(['id', 'title', 'price'])
          .execute(),
      );
    },

    async model() {
      const counts = await rec.step('books per author', () =>
        db.selectFrom('authors as a').leftJoin('books as b', 'b.author_id', 'a.id').select(['a.name', (eb) => eb.fn.count<string>('b.id').as('n')]).groupBy('a.name').orderBy('a.name').execute(),
      );
      expect(counts.map((c) => Number(c.n))).to.deep.equal([1, 2, 2]);
      await rec.step('authors with their countries (template table)', () =>
        db.selectFrom('authors').innerJoin('countries', 'countries.code', 'authors.country').select(['authors.name', 'countries.name as country']).orderBy('authors.id').execute(),
      );
      await rec.step('books streamed two at a time (pg-cursor)', async () => {
        const titles: string[] = [];
        for await (const row of db.selectFrom('books').select('title').orderBy('id').stream(2)) titles.push(row.title);
        return titles;
      });
      await rec.step('raise a price in a transaction', () =>
        db.transaction().execute((trx) => trx.updateTable('books').set({ price: sql`price + 1` }).where('title', '=', 'Dom Casmurro').returning(['title', 'price']).execute()),
      );
      await rec.step('a rolled back transaction', async () => {
        await db
          .transaction()
          .execute(async (trx) => {
            await trx.insertInto('books').values({ author_id: 1, title: 'Draft', price: '1' }).execute();
            throw new Error('roll back');
          })
          .catch(() => undefined);
        return db.selectFrom('books').select((eb) => eb.fn.countAll<string>().as('n')).where('title', '=', 'Draft').executeTakeFirst();
      });
      await rec.step('raw sql', () => sql<{ n: number }>`SELECT count(*)::int AS n FROM books WHERE price < ${20}`.execute(db).then((r) => r.rows));
      await rec.fails('a book for a missing author', '23503', () => db.insertInto('books').values({ author_id: MISSING_AUTHOR_ID, title: 'Orphan', price: '1' }).execute());
    },

    async migrate2() {
      await rec.step('migrateToLatest', async () => outcome(await migrator.migrateToLatest()));
      await rec.step('kysely_migration', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async model2() {
      await rec.step('set ISBNs (renamed column)', async () => {
        const out = [];
        for (const [name, isbn] of Object.entries(ISBNS)) out.push(...(await db2.updateTable('books').set({ isbn }).where('name', '=', name).returning(['name', 'isbn']).execute()));
        return out;
      });
      await rec.step('find by ISBN', () =>
        db2.selectFrom('books as b').innerJoin('authors as a', 'a.id', 'b.author_id').select(['b.name', 'b.isbn', 'b.price', 'a.name as author']).where('b.isbn', '=', ISBNS['Quincas Borba']!).execute(),
      );
      await rec.step('an upsert on the new unique constraint', () =>
        db2
          .insertInto('authors')
          .values({ name: 'Ada King', email: AUTHORS[0]!.email, country: 'gb' })
          .onConflict((oc) => oc.constraint('authors_email_key').doUpdateSet({ name: (eb) => eb.ref('excluded.name') }))
          .returning(['id', 'name', 'email'])
          .execute(),
      );
      await rec.fails('a second author with the same email', '23505', () => db2.insertInto('authors').values({ name: 'Ada Again', email: AUTHORS[0]!.email, country: null }).execute());
      await rec.fails('a negative price', '23514', () => db2.updateTable('books').set({ price: '-1' }).where('name', '=', 'Hokusai Manga').execute());
    },

    async down() {
      await rec.step('migrateTo NO_MIGRATIONS', async () => outcome(await migrator.migrateTo(NO_MIGRATIONS)));
      await rec.step('kysely_migration', applied);
      await rec.step('tables left', () => ctx.inspect("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"));
    },

    close: () => db.destroy(),
  };
}

export const kyselyLifecycle: Lifecycle = {
  name: 'kysely',
  about: 'Kysely: Migrator with migration files, the typed query builder, transactions, a stream, an upsert',
  prepare: async () => compiledDir('kysely'),
  start,
};
