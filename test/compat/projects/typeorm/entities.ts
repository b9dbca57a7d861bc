// TypeORM entities, as EntitySchema definitions (the project compiles without legacy decorators):
// the model before the second migration (v1) and after it (v2: books.title renamed to name, isbn).

import { EntitySchema } from 'typeorm';

export interface Author {
  id: number;
  name: string;
  email: string;
  country: string | null;
  books?: Book[];
}

export interface Book {
  id: number;
  title: string;
  price: string;
  published: string | null;
  author?: Author;
}

export interface BookV2 extends Omit<Book, 'title' | 'author'> {
  name: string;
  isbn: string | null;
  author?: Author;
}

const authorColumns = {
  id: { type: Number, primary: true, generated: 'increment' },
  name: { type: 'text' },
  email: { type: 'text' },
  country: { type: 'char', length: 2, nullable: true },
} as const;

const bookColumns = {
  id: { type: Number, primary: true, generated: 'increment' },
  price: { type: 'numeric', precision: 10, scale: 2 },
  published: { type: 'date', nullable: true },
} as const;

const authorRelations = { books: { type: 'one-to-many', target: 'Book', inverseSide: 'author' } } as const;
const bookRelations = { author: { type: 'many-to-one', target: 'Author', joinColumn: { name: 'author_id' }, onDelete: 'CASCADE', inverseSide: 'books' } } as const;

export const AuthorEntity = new EntitySchema<Author>({ name: 'Author', tableName: 'authors', columns: authorColumns, relations: authorRelations });

export const BookEntity = new EntitySchema<Book>({
  name: 'Book',
  tableName: 'books',
  columns: { ...bookColumns, title: { type: 'text' } },
  relations: bookRelations,
});

export const BookEntityV2 = new EntitySchema<BookV2>({
  name: 'Book',
  tableName: 'books',
  columns: { ...bookColumns, name: { type: 'text' }, isbn: { type: 'text', nullable: true } },
  relations: bookRelations,
});
