// Knex migration 1: authors and their books, with the schema builder.

import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('authors', (t) => {
    t.increments('id');
    t.text('name').notNullable();
    t.text('email').notNullable();
    t.specificType('country', 'char(2)');
  });
  await knex.schema.createTable('books', (t) => {
    t.increments('id');
    t.integer('author_id').notNullable().references('id').inTable('authors').onDelete('CASCADE');
    t.text('title').notNullable();
    t.decimal('price', 10, 2).notNullable();
    t.date('published');
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('books');
  await knex.schema.dropTable('authors');
}
