// TypeORM migration 1: authors and their books, with the QueryRunner's schema API.

import { Table, type MigrationInterface, type QueryRunner } from 'typeorm';

export class Init1704067200000 implements MigrationInterface {
  name = 'Init1704067200000';

  async up(q: QueryRunner): Promise<void> {
    await q.createTable(
      new Table({
        name: 'authors',
        columns: [
          { name: 'id', type: 'int', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'name', type: 'text' },
          { name: 'email', type: 'text' },
          { name: 'country', type: 'char', length: '2', isNullable: true },
        ],
      }),
    );
    await q.createTable(
      new Table({
        name: 'books',
        columns: [
          { name: 'id', type: 'int', isPrimary: true, isGenerated: true, generationStrategy: 'increment' },
          { name: 'author_id', type: 'int' },
          { name: 'title', type: 'text' },
          { name: 'price', type: 'numeric', precision: 10, scale: 2 },
          { name: 'published', type: 'date', isNullable: true },
        ],
        foreignKeys: [{ columnNames: ['author_id'], referencedTableName: 'authors', referencedColumnNames: ['id'], onDelete: 'CASCADE' }],
      }),
    );
  }

  async down(q: QueryRunner): Promise<void> {
    await q.dropTable('books');
    await q.dropTable('authors');
  }
}
