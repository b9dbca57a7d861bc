// Drizzle schema, second version as drizzle-kit generate sees it: schema-v2.ts with books.title not
// yet renamed. drizzle-kit cannot tell a rename from a drop and an add without asking on a TTY, so,
// as its docs advise, the rename is a custom migration (`drizzle-kit generate --custom`, see
// rename-title.sql) generated after the one from this file.

import { sql } from 'drizzle-orm';
import { char, check, date, index, integer, numeric, pgTable, serial, text, unique } from 'drizzle-orm/pg-core';

export const authors = pgTable(
  'authors',
  {
    id: serial('id').primaryKey(),
    name: text('name').notNull(),
    email: text('email').notNull(),
    country: char('country', { length: 2 }),
  },
  (t) => [unique('authors_email_key').on(t.email)],
);

export const books = pgTable(
  'books',
  {
    id: serial('id').primaryKey(),
    authorId: integer('author_id')
      .notNull()
      .references(() => authors.id, { onDelete: 'cascade' }),
    title: text('title').notNull(),
    price: numeric('price', { precision: 10, scale: 2 }).notNull(),
    published: date('published'),
    isbn: text('isbn'),
  },
  (t) => [index('books_author_price_idx').on(t.authorId, t.price), check('books_price_check', sql`${t.price} >= 0`)],
);
