// One statement on a fresh node-postgres connection to a URL (or connection settings), as a client handed that URL would run it.

import pg from 'pg';

export async function queryOnce(target: string | pg.ClientConfig, sql: string): Promise<pg.QueryResult> {
  const client = new pg.Client(typeof target === 'string' ? { connectionString: target } : target);
  await client.connect();
  try {
    return await client.query(sql);
  } finally {
    await client.end();
  }
}
