// What the engine does not read counts as leaving residue: SQL too large to scan (a Query or Parse over
// 1 MiB goes to PostgreSQL unread) and a FunctionCall (the fast path names a function by OID). A
// session advisory lock taken under a long comment, or by pg_advisory_lock's OID, ends with its
// session, because the session's backend is closed rather than pooled (src/engine/residue.ts).

import { expect } from 'chai';
import net from 'node:net';
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

/**
 * `other` gets lock `key` within 10 s: the holder's backend was closed, not pooled, and PostgreSQL let
 * the lock go as that process exited. Pooled (the bug), it would be held until that backend's next
 * hand-out or idle timeout.
 */
async function expectReleased(other: pg.Client, key: number): Promise<void> {
  let got = false;
  for (const deadline = Date.now() + 10_000; !got && Date.now() < deadline; ) {
    got = await tryLock(other, key);
    if (!got) await new Promise((resolve) => setTimeout(resolve, 50));
  }
  expect(got, 'the lock ends with the session that took it').to.equal(true);
}

/** Messages in `buf` (type byte, length word) up to a ReadyForQuery: true when one has come. */
function readyIn(buf: Buffer): boolean {
  for (let at = 0; at + 5 <= buf.length; at += 1 + buf.readInt32BE(at + 1)) if (buf[at] === 0x5a) return true;
  return false;
}

/**
 * pg_advisory_lock(key) through the protocol's fast path (FunctionCall, by the function's OID), on a
 * raw connection as postgres (trust), then Terminate: what libpq's PQfn sends, which node-postgres cannot.
 */
async function lockByFunctionCall(rt: TestRuntime, oid: number, key: number): Promise<void> {
  const { host, port } = rt.connection();
  const socket = net.connect(port, host);
  let got = Buffer.alloc(0);
  let waiter: (() => void) | null = null;
  socket.on('data', (chunk: Buffer) => {
    got = Buffer.concat([got, chunk]);
    if (waiter !== null && readyIn(got)) waiter();
  });
  const ready = (): Promise<void> => new Promise((resolve) => (readyIn(got) ? resolve() : (waiter = resolve)));
  await new Promise((resolve) => socket.once('connect', resolve));
  const params = Buffer.from('user\0postgres\0database\0postgres\0\0');
  const startup = Buffer.alloc(8);
  startup.writeInt32BE(8 + params.length, 0);
  startup.writeInt32BE(196608, 4);
  socket.write(Buffer.concat([startup, params]));
  await ready();
  got = Buffer.alloc(0);
  // 'F', length, OID, 1 argument format (binary), 1 argument of 8 bytes (int8), text result.
  const call = Buffer.alloc(29);
  call.write('F', 0);
  call.writeInt32BE(28, 1);
  call.writeInt32BE(oid, 5);
  call.writeInt16BE(1, 9);
  call.writeInt16BE(1, 11);
  call.writeInt16BE(1, 13);
  call.writeInt32BE(8, 15);
  call.writeBigInt64BE(BigInt(key), 19);
  call.writeInt16BE(0, 27);
  socket.write(call);
  await ready();
  expect(got[0], 'a FunctionCallResponse').to.equal(0x56);
  socket.end(Buffer.from([0x58, 0, 0, 0, 4]));
  await new Promise((resolve) => socket.once('close', resolve));
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

  it('a session advisory lock taken by FunctionCall (the fast path, by OID) ends with its session', async function () {
    const key = 9;
    const other = await connect(rt);
    try {
      const oid = Number((await other.query("SELECT 'pg_advisory_lock(bigint)'::regprocedure::oid AS oid")).rows[0].oid);
      await lockByFunctionCall(rt, oid, key);
      await expectReleased(other, key);
      await other.query('SELECT pg_advisory_unlock_all()');
    } finally {
      await other.end();
    }
  });

  for (const { name, key, take } of cases) {
    it(`a session advisory lock taken in ${name} over 1 MiB ends with its session`, async function () {
      // Another session of the same role and database, on a backend of its own throughout.
      const other = await connect(rt);
      try {
        const holder = await connect(rt);
        await take(holder, key);
        expect(await tryLock(other, key), 'the lock is held while its session lasts').to.equal(false);
        await holder.end();
        await expectReleased(other, key);
        await other.query('SELECT pg_advisory_unlock_all()');
      } finally {
        await other.end();
      }
    });
  }
});
