-- The first migration of the SQL lifecycles (node-postgres, postgres.js): authors and their books.
CREATE TABLE authors (
  id serial PRIMARY KEY,
  name text NOT NULL,
  email text NOT NULL,
  country char(2)
);
CREATE TABLE books (
  id serial PRIMARY KEY,
  author_id integer NOT NULL REFERENCES authors (id) ON DELETE CASCADE,
  title text NOT NULL,
  price numeric(10, 2) NOT NULL,
  published date
);
