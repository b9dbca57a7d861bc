// TypeORM 1 on pg: migration classes (test/compat/projects/typeorm/) run by DataSource.runMigrations
// and undone by undoLastMigration, as `typeorm migration:run|revert` do. The app of the first
// migration (v1 entities, one migration) runs the first model tests; the second migration comes with
// the next version of the app (a new DataSource: v2 entities, both migrations), as a deploy would.
// Model tests use repositories with relations, the QueryBuilder, transactions and raw queries.

import { expect } from 'chai';
import pg from 'pg';
import { DataSource, type EntityManager } from 'typeorm';
import { AUTHORS, BOOKS, ISBNS, MISSING_AUTHOR_ID } from './data.js';
import type { Context, Lifecycle, LifecycleRun } from './lifecycle.js';
import { compiledDir } from './project.js';
import { Init1704067200000 } from '../projects/typeorm/migrations/1704067200000-Init.js';
import { Alter1706745600000 } from '../projects/typeorm/migrations/1706745600000-Alter.js';
import { AuthorEntity, BookEntity, BookEntityV2, type Author, type Book, type BookV2 } from '../projects/typeorm/entities.js';

function start(ctx: Context): LifecycleRun {
  const { rec } = ctx;
  /** TypeORM passes `extra` to pg.Pool: a Client class that hands notices to the recorder. */
  class NoticeClient extends pg.Client {
    constructor(config: pg.ClientConfig) {
      super(config);
      this.on('notice', rec.notice);
    }
  }
  const dataSource = (version: 1 | 2): DataSource =>
    new DataSource({
      type: 'postgres',
      host: ctx.db.host,
      port: ctx.db.port,
      username: ctx.db.user,
      database: ctx.db.database,
      entities: version === 1 ? [AuthorEntity, BookEntity] : [AuthorEntity, BookEntityV2],
      migrations: version === 1 ? [Init1704067200000] : [Init1704067200000, Alter1706745600000],
      synchronize: false,
      logging: false,
      extra: { max: 3, Client: NoticeClient },
    });
  let ds: DataSource | null = null;
  const app = (): DataSource => ds!;
  const applied = (): Promise<unknown> => app().query('SELECT "timestamp", name FROM migrations ORDER BY id');

  return {
    async migrate() {
      ds = await dataSource(1).initialize();
      await rec.step('runMigrations', () => app().runMigrations().then((ms) => ms.map((m) => m.name)));
      await rec.step('migrations table', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async fixtures() {
      await rec.step('save authors with their books (cascade through the relation)', async () => {
        const authors = app().getRepository(AuthorEntity);
        const books = app().getRepository(BookEntity);
        const saved = await authors.save(AUTHORS.map((a) => authors.create({ ...a })));
        await books.save(BOOKS.map((b) => books.create({ title: b.title, price: b.price, published: b.published, author: saved[b.author]! })));
        return saved.map((a) => ({ id: a.id, name: a.name }));
      });
    },

    async model() {
      await rec.step('authors with their books (find, relations)', () =>
        app().getRepository(AuthorEntity).find({ relations: { books: true }, order: { name: 'ASC', books: { id: 'ASC' } } }),
      );
      const counts = await rec.step('books per author (QueryBuilder)', () =>
        app()
          .getRepository(AuthorEntity)
          .createQueryBuilder('a')
          .leftJoin('a.books', 'b')
          .select('a.name', 'name')
          .addSelect('COUNT(b.id)', 'n')
          .groupBy('a.name')
          .orderBy('a.name')
          .getRawMany<{ name: string; n: string }>(),
      );
      expect(counts.map((c) => Number(c.n))).to.deep.equal([1, 2, 2]);
      await rec.step('authors with their countries (raw query, template table)', () =>
        app().query('SELECT a.name, c.name AS country FROM authors a JOIN countries c ON c.code = a.country WHERE a.name <> $1 ORDER BY a.id', ['nobody']),
      );
      await rec.step('raise a price in a transaction', () =>
        app().transaction(async (m: EntityManager) => {
          await m.increment(BookEntity, { title: 'Dom Casmurro' }, 'price', 1);
          return m.findOneBy(BookEntity, { title: 'Dom Casmurro' });
        }),
      );
      await rec.step('a rolled back transaction', async () => {
        await app()
          .transaction(async (m: EntityManager) => {
            await m.insert(BookEntity, { title: 'Draft', price: '1', author: { id: 1 } as Author } as Book);
            throw new Error('roll back');
          })
          .catch(() => undefined);
        return app().getRepository(BookEntity).countBy({ title: 'Draft' });
      });
      await rec.fails('a book for a missing author', '23503', () =>
        app().getRepository(BookEntity).save({ title: 'Orphan', price: '1', published: null, author: { id: MISSING_AUTHOR_ID } as Author } as Book),
      );
    },

    async migrate2() {
      await app().destroy();
      ds = await dataSource(2).initialize();
      await rec.step('runMigrations (the new version of the app)', () => app().runMigrations().then((ms) => ms.map((m) => m.name)));
      await rec.step('migrations table', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async model2() {
      const books = () => app().getRepository(BookEntityV2);
      await rec.step('set ISBNs (renamed column)', async () => {
        for (const [name, isbn] of Object.entries(ISBNS)) await books().update({ name }, { isbn });
        return books().find({ select: { name: true, isbn: true }, where: Object.keys(ISBNS).map((name) => ({ name })), order: { name: 'ASC' } });
      });
      await rec.step('find by ISBN with its author', () => books().findOne({ where: { isbn: ISBNS['Quincas Borba']! }, relations: { author: true } }));
      await rec.fails('a second author with the same email', '23505', () => app().getRepository(AuthorEntity).insert({ name: 'Ada Again', email: AUTHORS[0]!.email }));
      await rec.fails('a negative price', '23514', () => books().update({ name: 'Hokusai Manga' }, { price: '-1' } as Partial<BookV2>));
    },

    async down() {
      await rec.step('undoLastMigration twice', async () => {
        await app().undoLastMigration();
        await app().undoLastMigration();
        return app().showMigrations();
      });
      await rec.step('migrations table', applied);
      await rec.step('tables left', () => ctx.inspect("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"));
    },

    async close() {
      if (ds?.isInitialized) await ds.destroy();
    },
  };
}

export const typeormLifecycle: Lifecycle = {
  name: 'typeorm',
  about: 'TypeORM 1: migration classes (run, revert), EntitySchema repositories, QueryBuilder, transactions',
  prepare: async () => compiledDir('typeorm'),
  start,
};
