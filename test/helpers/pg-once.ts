// One statement on a fresh node-postgres connection to a URL, as a client handed that URL would run it.

import pg from 'pg';

export async function queryOnce(url: string, sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}
