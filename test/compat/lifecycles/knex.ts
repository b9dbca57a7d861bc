// Knex 3 on pg: migration and seed files (test/compat/projects/knex/, compiled), run with the
// programmatic API the knex CLI calls (migrate.up for the first, migrate.latest for the second,
// seed.run, migrate.rollback(all)); model tests with the query builder, transactions and raw SQL.

import { expect } from 'chai';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import { AUTHORS, ISBNS, MISSING_AUTHOR_ID } from './data.js';
import type { Context, Lifecycle, LifecycleRun } from './lifecycle.js';
import { compiledDir } from './project.js';

function start(ctx: Context): LifecycleRun {
  const { rec } = ctx;
  const knex: Knex = knexFactory({
    client: 'pg',
    connection: { ...ctx.db },
    pool: {
      min: 0,
      max: 3,
      afterCreate: (conn: { on(event: 'notice', fn: (n: unknown) => void): void }, done: (err: Error | null, conn: unknown) => void) => {
        conn.on('notice', rec.notice);
        done(null, conn);
      },
    },
    migrations: { directory: compiledDir('knex/migrations'), loadExtensions: ['.js'] },
    seeds: { directory: compiledDir('knex/seeds'), loadExtensions: ['.js'] },
  });
  const applied = (): Promise<unknown> => knex('knex_migrations').select('name', 'batch').orderBy('id');

  return {
    async migrate() {
      await rec.step('migrate.up (the first migration)', () => knex.migrate.up());
      await rec.step('knex_migrations', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async fixtures() {
      await rec.step('seed.run', () => knex.seed.run().then(([files]: [string[]]) => files.map((f) => path.basename(f))));
      await rec.step('books after the seed', () => knex('books').select('id', 'author_id', 'title', 'price').orderBy('id'));
    },

    async model() {
      const counts = await rec.step('books per author', () =>
        knex('authors as a').leftJoin('books as b', 'b.author_id', 'a.id').groupBy('a.name').select('a.name').count<{ name: string; n: string }[]>('b.id as n').orderBy('a.name'),
      );
      expect(counts.map((c) => Number(c.n))).to.deep.equal([1, 2, 2]);
      await rec.step('authors with their countries (template table)', () => knex('authors').join('countries', 'countries.code', 'authors.country').select('authors.name', 'countries.name as country').orderBy('authors.id'));
      await rec.step('first, whereIn, whereNull', async () => ({
        first: await knex('books').where('price', '>', 15).orderBy('title').first('title', 'price'),
        in: await knex('books').whereIn('author_id', knex('authors').select('id').where('country', 'br')).pluck('title'),
        undated: await knex('books').whereNull('published').pluck('title'),
      }));
      await rec.step('raise a price in a transaction', () =>
        knex.transaction((trx) => trx('books').where({ title: 'Dom Casmurro' }).increment('price', 1).returning(['title', 'price'])),
      );
      await rec.step('a rolled back transaction', async () => {
        await knex
          .transaction(async (trx) => {
            await trx('books').insert({ author_id: knex('authors').select('id').where('email', 'ada@example.com'), title: 'Draft', price: 1 });
            throw new Error('roll back');
          })
          .catch(() => undefined);
        return knex('books').where('title', 'Draft').count<{ count: string }[]>();
      });
      await rec.step('raw SQL with bindings', () => knex.raw('SELECT ?::text AS greeting, count(*)::int AS n FROM books WHERE price < ?', ['hello', 20]).then((r: { rows: unknown[] }) => r.rows));
      await rec.fails('a book for a missing author', '23503', () => knex('books').insert({ author_id: MISSING_AUTHOR_ID, title: 'Orphan', price: 1 }));
    },

    async migrate2() {
      await rec.step('migrate.latest (the second migration)', () => knex.migrate.latest());
      await rec.step('knex_migrations', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async model2() {
      await rec.step('set ISBNs (renamed column)', async () => {
        const out = [];
        for (const [name, isbn] of Object.entries(ISBNS)) out.push(...(await knex('books').where({ name }).update({ isbn }).returning(['name', 'isbn'])));
        return out;
      });
      await rec.step('find by ISBN', () =>
        knex('books as b').join('authors as a', 'a.id', 'b.author_id').where('b.isbn', ISBNS['Quincas Borba']!).select('b.name', 'b.isbn', 'b.price', 'a.name as author'),
      );
      await rec.fails('a second author with the same email', '23505', () => knex('authors').insert({ name: 'Ada Again', email: AUTHORS[0]!.email }));
      await rec.fails('a negative price', '23514', () => knex('books').where({ name: 'Hokusai Manga' }).update({ price: -1 }));
      await rec.step('cheapest book per author', () =>
        knex('authors as a').join('books as b', 'b.author_id', 'a.id').distinctOn('a.name').select('a.name as author', 'b.name', 'b.price').orderBy(['a.name', 'b.price']),
      );
    },

    async down() {
      await rec.step('migrate.rollback (all)', () => knex.migrate.rollback(undefined, true));
      await rec.step('knex_migrations', applied);
      await rec.step('tables left', () => ctx.inspect("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"));
    },

    close: () => knex.destroy(),
  };
}

export const knexLifecycle: Lifecycle = {
  name: 'knex',
  about: 'Knex 3: migration and seed files, the query builder, transactions, raw SQL',
  prepare: async () => compiledDir('knex'),
  start,
};
