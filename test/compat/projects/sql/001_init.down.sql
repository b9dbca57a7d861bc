DROP TABLE books;
DROP TABLE authors;
