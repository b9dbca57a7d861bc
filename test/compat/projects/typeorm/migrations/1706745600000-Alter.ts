// TypeORM migration 2: a column, an index, a unique and a check constraint, a rename; and dropping an
// index that is not there (PostgreSQL answers with a NOTICE).

import { TableCheck, TableColumn, TableIndex, TableUnique, type MigrationInterface, type QueryRunner } from 'typeorm';

export class Alter1706745600000 implements MigrationInterface {
  name = 'Alter1706745600000';

  async up(q: QueryRunner): Promise<void> {
    await q.addColumn('books', new TableColumn({ name: 'isbn', type: 'text', isNullable: true }));
    await q.createIndex('books', new TableIndex({ name: 'books_author_price_idx', columnNames: ['author_id', 'price'] }));
    await q.createUniqueConstraint('authors', new TableUnique({ name: 'authors_email_key', columnNames: ['email'] }));
    await q.createCheckConstraint('books', new TableCheck({ name: 'books_price_check', expression: '"price" >= 0' }));
    await q.renameColumn('books', 'title', 'name');
    await q.query('DROP INDEX IF EXISTS "books_title_idx"');
  }

  async down(q: QueryRunner): Promise<void> {
    await q.renameColumn('books', 'name', 'title');
    await q.dropCheckConstraint('books', 'books_price_check');
    await q.dropUniqueConstraint('authors', 'authors_email_key');
    await q.dropIndex('books', 'books_author_price_idx');
    await q.dropColumn('books', 'isbn');
  }
}
