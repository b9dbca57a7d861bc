// The fixtures every lifecycle loads, and the values its model tests use: three authors (their
// countries are rows of the template's `countries` table) and five books.

export interface AuthorFixture {
  name: string;
  email: string;
  country: string;
}

export interface BookFixture {
  /** Index into AUTHORS. */
  author: number;
  title: string;
  /** numeric(10, 2) as text. */
  price: string;
  /** A date as text, or null. */
  published: string | null;
}

export const AUTHORS: readonly AuthorFixture[] = [
  { name: 'Ada Lovelace', email: 'ada@example.com', country: 'gb' },
  { name: 'Katsushika Hokusai', email: 'hokusai@example.com', country: 'jp' },
  { name: 'Machado de Assis', email: 'machado@example.com', country: 'br' },
];

export const BOOKS: readonly BookFixture[] = [
  { author: 0, title: 'Notes on the Analytical Engine', price: '12.50', published: '1843-10-01' },
  { author: 1, title: 'Thirty-six Views of Mount Fuji', price: '48.00', published: '1831-01-01' },
  { author: 1, title: 'Hokusai Manga', price: '19.99', published: null },
  { author: 2, title: 'Dom Casmurro', price: '9.90', published: '1899-12-01' },
  { author: 2, title: 'Quincas Borba', price: '11.00', published: '1891-06-15' },
];

/** ISBNs the second model tests set, by title. */
export const ISBNS: Readonly<Record<string, string>> = {
  'Dom Casmurro': '978-85-359-0277-8',
  'Quincas Borba': '978-85-7232-144-9',
};

/** An author id no fixture has: inserting a book for it breaks the foreign key (23503). */
export const MISSING_AUTHOR_ID = 999;
