// Knex migration 2: a column, an index, a unique and a check constraint, a rename; and a cleanup of a
// table that is not there (PostgreSQL answers with a NOTICE).

import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('books', (t) => {
    t.text('isbn');
    t.index(['author_id', 'price'], 'books_author_price_idx');
    t.check('price >= 0', [], 'books_price_check');
  });
  await knex.schema.alterTable('authors', (t) => {
    t.unique(['email'], { indexName: 'authors_email_key' });
  });
  await knex.schema.alterTable('books', (t) => {
    t.renameColumn('title', 'name');
  });
  await knex.schema.dropTableIfExists('legacy_books');
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('books', (t) => {
    t.renameColumn('name', 'title');
    t.dropChecks(['books_price_check']);
    t.dropIndex(['author_id', 'price'], 'books_author_price_idx');
    t.dropColumn('isbn');
  });
  await knex.schema.alterTable('authors', (t) => {
    t.dropUnique(['email'], 'authors_email_key');
  });
}
