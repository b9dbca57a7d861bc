-- Custom migration (drizzle-kit generate --custom): the rename drizzle-kit would have asked about.
ALTER TABLE "books" RENAME COLUMN "title" TO "name";
