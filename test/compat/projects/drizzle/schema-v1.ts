// Drizzle schema, first version: authors and their books. drizzle-kit generates the first migration
// from it; the lifecycle's model tests query with it.

import { char, date, integer, numeric, pgTable, serial, text } from 'drizzle-orm/pg-core';

export const authors = pgTable('authors', {
  id: serial('id').primaryKey(),
  name: text('name').notNull(),
  email: text('email').notNull(),
  country: char('country', { length: 2 }),
});

export const books = pgTable('books', {
  id: serial('id').primaryKey(),
  authorId: integer('author_id')
    .notNull()
    .references(() => authors.id, { onDelete: 'cascade' }),
  title: text('title').notNull(),
  price: numeric('price', { precision: 10, scale: 2 }).notNull(),
  published: date('published'),
});
