// Sequelize 6 with sequelize-cli: the project (test/compat/projects/sequelize/: .sequelizerc, config,
// CommonJS migrations and a seeder) is copied to a working directory and driven by the real CLI
// (db:migrate --to, db:seed:all, db:migrate, db:migrate:undo:all), its output part
// of what is compared. Model tests use Sequelize models with associations, eager loading, grouped
// counts, managed transactions and raw queries; the second version of the app defines the renamed
// column, as a deploy after the migration would.

import { expect } from 'chai';
import { DataTypes, QueryTypes, Sequelize, fn, col, type ModelAttributes, type ModelStatic, type Model } from 'sequelize';
import { AUTHORS, BOOKS, ISBNS, MISSING_AUTHOR_ID } from './data.js';
import type { Context, Lifecycle, LifecycleRun } from './lifecycle.js';
import { dbEnv, makeProject, sourceTree, tool } from './project.js';

type AnyModel = ModelStatic<Model>;

function models(sequelize: Sequelize, version: 1 | 2): { Author: AnyModel; Book: AnyModel } {
  const Author = sequelize.define(
    'Author',
    { name: { type: DataTypes.TEXT, allowNull: false }, email: { type: DataTypes.TEXT, allowNull: false }, country: DataTypes.CHAR(2) },
    { tableName: 'authors', timestamps: false },
  );
  const bookAttributes: ModelAttributes = {
    ...(version === 1 ? { title: { type: DataTypes.TEXT, allowNull: false } } : { name: { type: DataTypes.TEXT, allowNull: false }, isbn: DataTypes.TEXT }),
    price: { type: DataTypes.DECIMAL(10, 2), allowNull: false },
    published: DataTypes.DATEONLY,
  };
  const Book = sequelize.define('Book', bookAttributes, { tableName: 'books', timestamps: false });
  Author.hasMany(Book, { foreignKey: 'author_id', as: 'books' });
  Book.belongsTo(Author, { foreignKey: 'author_id', as: 'author' });
  return { Author, Book };
}

function start(ctx: Context): LifecycleRun {
  const { rec } = ctx;
  const cli = async (label: string, ...args: string[]): Promise<void> => {
    await rec.step(`sequelize-cli ${label}`, () => tool('sequelize-cli', args, ctx.projectDir, dbEnv(ctx.db)));
  };
  const app = (version: 1 | 2): { sequelize: Sequelize; Author: AnyModel; Book: AnyModel } => {
    const sequelize = new Sequelize({ dialect: 'postgres', host: ctx.db.host, port: ctx.db.port, username: ctx.db.user, database: ctx.db.database, logging: false, pool: { max: 3 } });
    sequelize.addHook('afterConnect', (connection) => {
      (connection as { on(e: 'notice', fn: (n: unknown) => void): void }).on('notice', rec.notice);
    });
    return { sequelize, ...models(sequelize, version) };
  };
  let current: ReturnType<typeof app> | null = null;
  const applied = (): Promise<unknown> => ctx.inspect('SELECT name FROM "SequelizeMeta" ORDER BY name');

  return {
    async migrate() {
      await cli('db:migrate --to (the first migration)', 'db:migrate', '--to', '20240101000000-init.cjs');
      await rec.step('SequelizeMeta', applied);
      await rec.step('schema', () => ctx.schema());
    },

    async fixtures() {
      await cli('db:seed:all', 'db:seed:all');
      current = app(1);
    },

    async model() {
      const { sequelize, Author, Book } = current!;
      await rec.step('authors with their books (include)', () =>
        Author.findAll({ include: [{ model: Book, as: 'books' }], order: [['name', 'ASC'], [{ model: Book, as: 'books' }, 'id', 'ASC']] }).then((rows) => rows.map((r) => r.toJSON())),
      );
      const counts = await rec.step('books per author (grouped count)', () =>
        Author.findAll({ attributes: ['name', [fn('COUNT', col('books.id')), 'n']], include: [{ model: Book, as: 'books', attributes: [] }], group: ['Author.id'], order: [['name', 'ASC']], raw: true }),
      );
      expect(counts.map((c) => Number((c as unknown as { n: string }).n))).to.deep.equal([1, 2, 2]);
      await rec.step('authors with their countries (raw query with replacements, template table)', () =>
        sequelize.query('SELECT a.name, c.name AS country FROM authors a JOIN countries c ON c.code = a.country WHERE a.name <> :nobody ORDER BY a.id', { replacements: { nobody: 'nobody' }, type: QueryTypes.SELECT }),
      );
      await rec.step('raise a price in a managed transaction', () =>
        sequelize.transaction(async (transaction) => {
          await Book.increment('price', { by: 1, where: { title: 'Dom Casmurro' }, transaction });
          return (await Book.findOne({ where: { title: 'Dom Casmurro' }, transaction }))?.toJSON();
        }),
      );
      await rec.step('a rolled back transaction', async () => {
        await sequelize
          .transaction(async (transaction) => {
            await Book.create({ author_id: 1, title: 'Draft', price: '1' }, { transaction });
            throw new Error('roll back');
          })
          .catch(() => undefined);
        return Book.count({ where: { title: 'Draft' } });
      });
      await rec.fails('a book for a missing author', '23503', () => Book.create({ author_id: MISSING_AUTHOR_ID, title: 'Orphan', price: '1' }));
    },

    async migrate2() {
      await current!.sequelize.close();
      current = null;
      await cli('db:migrate', 'db:migrate');
      await rec.step('SequelizeMeta', applied);
      await rec.step('schema', () => ctx.schema());
      current = app(2);
    },

    async model2() {
      const { Author, Book } = current!;
      await rec.step('set ISBNs (renamed column)', async () => {
        for (const [name, isbn] of Object.entries(ISBNS)) await Book.update({ isbn }, { where: { name } });
        return Book.findAll({ attributes: ['name', 'isbn'], where: { name: Object.keys(ISBNS) }, order: [['name', 'ASC']], raw: true });
      });
      await rec.step('find by ISBN with its author', () =>
        Book.findOne({ where: { isbn: ISBNS['Quincas Borba']! }, include: [{ model: Author, as: 'author' }] }).then((b) => b?.toJSON()),
      );
      await rec.fails('a second author with the same email', '23505', () => Author.create({ name: 'Ada Again', email: AUTHORS[0]!.email }));
      await rec.fails('a negative price', '23514', () => Book.update({ price: '-1' }, { where: { name: 'Hokusai Manga' } }));
    },

    async down() {
      await current!.sequelize.close();
      current = null;
      await cli('db:migrate:undo:all', 'db:migrate:undo:all');
      await rec.step('SequelizeMeta', applied);
      await rec.step('tables left', () => ctx.inspect("SELECT tablename FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"));
    },

    async close() {
      await current?.sequelize.close();
    },
  };
}

export const sequelizeLifecycle: Lifecycle = {
  name: 'sequelize',
  about: 'Sequelize 6 with sequelize-cli: CLI migrations and seeders, models, associations, transactions',
  prepare: async (parent) =>
    makeProject(parent, 'sequelize', {
      ...sourceTree('sequelize'),
      'fixtures.json': JSON.stringify({ authors: AUTHORS, books: BOOKS }, null, 1),
    }),
  start,
};
