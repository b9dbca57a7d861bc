// drizzle-kit's config for the lifecycle's project: the database comes from the environment the
// lifecycle gives drizzle-kit (DB_HOST may be a Unix socket directory).

import { defineConfig } from 'drizzle-kit';

export default defineConfig({
  dialect: 'postgresql',
  schema: './schema.ts',
  out: './drizzle',
  dbCredentials: {
    host: process.env.DB_HOST!,
    port: Number(process.env.DB_PORT),
    user: process.env.DB_USER!,
    database: process.env.DB_NAME!,
    ssl: false,
  },
});
