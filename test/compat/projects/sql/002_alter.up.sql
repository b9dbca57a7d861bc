-- The second migration: a column, an index, two constraints, a rename; and the notices a migration
-- typically sends (a cleanup of something absent, a progress line).
ALTER TABLE books ADD COLUMN isbn text;
CREATE INDEX books_author_price_idx ON books (author_id, price);
ALTER TABLE authors ADD CONSTRAINT authors_email_key UNIQUE (email);
ALTER TABLE books ADD CONSTRAINT books_price_check CHECK (price >= 0);
ALTER TABLE books RENAME COLUMN title TO name;
DROP INDEX IF EXISTS books_title_idx;
DO $$ BEGIN RAISE NOTICE 'books: % rows kept', (SELECT count(*) FROM books); END $$;
