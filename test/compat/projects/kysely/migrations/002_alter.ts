// Kysely migration 2: a column, an index, a unique and a check constraint, a rename; and dropping an
// index that is not there (PostgreSQL answers with a NOTICE).

import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('books').addColumn('isbn', 'text').execute();
  await db.schema.createIndex('books_author_price_idx').on('books').columns(['author_id', 'price']).execute();
  await db.schema.alterTable('authors').addUniqueConstraint('authors_email_key', ['email']).execute();
  await db.schema.alterTable('books').addCheckConstraint('books_price_check', sql`price >= 0`).execute();
  await db.schema.alterTable('books').renameColumn('title', 'name').execute();
  await db.schema.dropIndex('books_title_idx').ifExists().execute();
}

export async function down(db: Kysely<unknown>): Promise<void> {
  await db.schema.alterTable('books').renameColumn('name', 'title').execute();
  await db.schema.alterTable('books').dropConstraint('books_price_check').execute();
  await db.schema.alterTable('authors').dropConstraint('authors_email_key').execute();
  await db.schema.dropIndex('books_author_price_idx').execute();
  await db.schema.alterTable('books').dropColumn('isbn').execute();
}
