// The one client every target is measured with: node-postgres, simple protocol, no pool. The timer
// the benchmarks share runs from the client's connect to the answer of its first `SELECT 1`.

import pg from 'pg';

export interface Endpoint {
  /** 127.0.0.1, or a socket directory. */
  host: string;
  port: number;
}

export const USER = 'postgres';

/** Generous, as libpq (no connect_timeout) is: a connect may wait minutes in the mint queue of a burst of 1,000 cold mints. */
const CONNECT_TIMEOUT_MS = 600_000;

export function newClient(ep: Endpoint, database: string): pg.Client {
  return new pg.Client({ host: ep.host, port: ep.port, user: USER, database, connectionTimeoutMillis: CONNECT_TIMEOUT_MS });
}

/** Milliseconds from connect to the first `SELECT 1` answer; the session is closed afterwards, untimed. */
export async function timeFirstQuery(ep: Endpoint, database: string): Promise<number> {
  const { client, ms } = await openTimed(ep, database);
  await client.end().catch(() => undefined);
  return ms;
}

/** A session, opened and its first `SELECT 1` answered, with the milliseconds that took; the caller ends it. */
export async function openTimed(ep: Endpoint, database: string): Promise<{ client: pg.Client; ms: number }> {
  const client = newClient(ep, database);
  // An error event after the session is up (e.g. the server ends it) must not crash the benchmark.
  client.on('error', () => undefined);
  const started = performance.now();
  try {
    await client.connect();
    await client.query('SELECT 1');
  } catch (err) {
    await client.end().catch(() => undefined);
    throw err;
  }
  return { client, ms: performance.now() - started };
}

/** Opens a session, runs `fn`, closes it. */
export async function withClient<T>(ep: Endpoint, database: string, fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const client = newClient(ep, database);
  client.on('error', () => undefined);
  await client.connect();
  try {
    return await fn(client);
  } finally {
    await client.end().catch(() => undefined);
  }
}

/** One query on a fresh session; the rows as objects. */
export async function queryOnce(ep: Endpoint, database: string, sql: string): Promise<Record<string, unknown>[]> {
  return withClient(ep, database, async (c) => (await c.query<Record<string, unknown>>(sql)).rows);
}

/** A short key for counting errors: the SQLSTATE when the server sent one, else the client's message. */
export function errorKey(err: unknown): string {
  const e = err as { code?: unknown; message?: unknown };
  if (typeof e.code === 'string' && /^[0-9A-Z]{5}$/.test(e.code)) return e.code;
  return String(e.message ?? err).slice(0, 60);
}

export function quoteIdent(name: string): string {
  return `"${name.replace(/"/g, '""')}"`;
}

export function quoteLiteral(text: string): string {
  return `'${text.replace(/'/g, "''")}'`;
}
