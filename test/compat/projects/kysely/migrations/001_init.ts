// Kysely migration 1: authors and their books, with Kysely's schema builder.

import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema
    .createTable('authors')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('name', 'text', (c) => c.notNull())
    .addColumn('email', 'text', (c) => c.notNull())
    .addColumn('country', sql`char(2)`)
    .execute();
  await db.schema
    .createTable('books')
    .addColumn('id', 'serial', (c) => c.primaryKey())
    .addColumn('author_id', 'integer', (c) => c.notNull().references('authors.id').onDelete('cascade'))
    .addColumn('title', 'text', (c) => c.notNull())
    .addColumn('price', 'numeric(10, 2)', (c) => c.notNull())
    .addColumn('published', 'date')
    .execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.dropTable('books').execute();
  await db.schema.dropTable('authors').execute();
}
