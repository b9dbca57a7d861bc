ALTER TABLE books RENAME COLUMN name TO title;
ALTER TABLE books DROP CONSTRAINT books_price_check;
ALTER TABLE authors DROP CONSTRAINT authors_email_key;
DROP INDEX books_author_price_idx;
ALTER TABLE books DROP COLUMN isbn;
