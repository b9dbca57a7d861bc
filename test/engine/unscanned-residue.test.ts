// SQL too large for the engine to scan for residue (a Query or Parse over 1 MiB goes to PostgreSQL
// unread) counts as leaving residue: a session advisory lock taken under a long comment ends with its
// session, because the session's backend is closed rather than pooled (src/engine/residue.ts).

import { expect } from 'chai';
import pg from 'pg';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

/** A comment that makes a statement larger than the 1 MiB the engine reads whole. */
const LONG_COMMENT = `/* ${'x'.repeat(1100 * 1024)} */`;

async function connect(rt: TestRuntime): Promise<pg.Client> {
  const client = new pg.Client(rt.connection());
  client.on('error', () => {});
  await client.connect();
  return client;
}

async function tryLock(client: pg.Client, key: number): Promise<boolean> {
  const r = await client.query<{ got: boolean }>('SELECT pg_try_advisory_lock($1) AS got', [key]);
  return r.rows[0]!.got;
}

describe('engine: a statement too large to scan leaves nothing in a pooled backend', function () {
  this.timeout(60_000);
  let rt: TestRuntime;

  before(async function () {
    rt = await startTestRuntime();
  });

  after(async function () {
    await rt?.stop();
  });

  const cases: { name: string; key: number; take: (c: pg.Client, key: number) => Promise<unknown> }[] = [
    { name: 'a simple Query', key: 7, take: (c, key) => c.query(`SELECT pg_advisory_lock(${key}) ${LONG_COMMENT}`) },
    { name: 'a Parse (extended protocol)', key: 8, take: (c, key) => c.query(`SELECT pg_advisory_lock($1) ${LONG_COMMENT}`, [key]) },
  ];

  for (const { name, key, take } of cases) {
    it(`a session advisory lock taken in ${name} over 1 MiB ends with its session`, async function () {
      // Another session of the same role and database, on a backend of its own throughout.
      const other = await connect(rt);
      try {
        const holder = await connect(rt);
        await take(holder, key);
        expect(await tryLock(other, key), 'the lock is held while its session lasts').to.equal(false);
        await holder.end();
        // Its backend is closed, not pooled: PostgreSQL lets the lock go as that process exits.
        // Pooled (the bug), it would be held until that backend's next hand-out or idle timeout.
        let got = false;
        for (const deadline = Date.now() + 10_000; !got && Date.now() < deadline; ) {
          got = await tryLock(other, key);
          if (!got) await new Promise((resolve) => setTimeout(resolve, 50));
        }
        expect(got, 'the lock ends with the session that took it').to.equal(true);
        await other.query('SELECT pg_advisory_unlock_all()');
      } finally {
        await other.end();
      }
    });
  }
});
