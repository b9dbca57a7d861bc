// Malformed and abusive clients against a real runtime, over raw sockets: bad startup packets, a
// client that never finishes its startup, protocol violations after login, encryption requests,
// cancel requests with unknown keys, Terminate inside a transaction or behind queries still running.
// After each case the engine must be back where it was: no client session left, no backend held, and
// a normal client still served.

import { expect } from 'chai';
import pg from 'pg';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import {
  RawSocket,
  TERMINATE,
  cancelRequest,
  errorOf,
  gssencRequest,
  header,
  int32,
  login,
  message,
  query,
  requestPacket,
  sslRequest,
  startupPacket,
  type BackendMessage,
} from '../helpers/raw-socket.js';

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 5000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The engine answered with exactly one FATAL ErrorResponse of this SQLSTATE, then closed. */
async function expectFatalAndClose(conn: RawSocket, sqlstate: string, message?: RegExp): Promise<BackendMessage> {
  const { messages, closed } = await conn.drain(5000);
  expect(closed, 'connection closed').to.equal(true);
  const errors = messages.filter((m) => m.type === 'E');
  expect(errors.length, `messages: ${messages.map((m) => m.type).join('')}`).to.equal(1);
  expect(messages[messages.length - 1]!.type).to.equal('E');
  const e = errorOf(errors[0]!);
  expect(e.severity).to.equal('FATAL');
  expect(e.code).to.equal(sqlstate);
  if (message) expect(e.message).to.match(message);
  return errors[0]!;
}

describe('engine: malformed clients', function () {
  this.timeout(60_000);
  let rt: TestRuntime;

  const connect = (): Promise<RawSocket> => RawSocket.connect(rt.port, rt.host);
  const loginTrust = () => login(rt.port, rt.host);

  async function withPg<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
    const c = new pg.Client(rt.connection());
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end();
    }
  }

  before(async () => {
    rt = await startTestRuntime({ loginTimeout: 1 });
    await withPg((c) => c.query('CREATE TABLE lockme (id int PRIMARY KEY); INSERT INTO lockme VALUES (1)'));
  });

  after(async () => {
    await rt?.stop();
  });

  // Every case ends with the engine back at rest: no session, no backend held or half-open.
  afterEach(async function () {
    if (this.currentTest?.state === 'failed') return;
    const engine = rt.runtime.engine;
    await until('no client sessions', () => engine.stats().clients === 0);
    await until('no backend held', () => {
      const b = engine.stats().backends;
      return b.active === 0 && b.connecting === 0 && b.resetting === 0;
    });
  });

  describe('before and during startup', () => {
    for (const length of [0, 4, 7, -1]) {
      it(`startup packet with length ${length}: FATAL 08P01, closed`, async () => {
        const conn = await connect();
        conn.write(Buffer.concat([int32(length), int32(3 << 16)]));
        await expectFatalAndClose(conn, '08P01', /invalid length of startup packet/);
      });
    }

    for (const length of [10001, 0x7fffffff]) {
      it(`startup packet with length ${length}: FATAL 08P01 at once, without waiting for the body`, async () => {
        const conn = await connect();
        conn.write(Buffer.concat([int32(length), int32(3 << 16), Buffer.from('user\0postgres\0')]));
        await expectFatalAndClose(conn, '08P01', /invalid length of startup packet/);
      });
    }

    it('protocol 2.0: FATAL 0A000 naming the versions', async () => {
      const conn = await connect();
      conn.write(startupPacket({ user: 'postgres' }, 2 << 16));
      await expectFatalAndClose(conn, '0A000', /unsupported frontend protocol 2\.0: server supports 3\.0/);
    });

    it('startup packet with a missing terminator: FATAL 08P01', async () => {
      const conn = await connect();
      const bad = Buffer.concat([int32(8 + 14), int32(3 << 16), Buffer.from('user\0postgres\0')]);
      conn.write(bad);
      await expectFatalAndClose(conn, '08P01', /invalid startup packet layout/);
    });

    it('startup packet without a user: FATAL 28000', async () => {
      const conn = await connect();
      conn.write(startupPacket({ database: 'postgres' }));
      await expectFatalAndClose(conn, '28000', /no PostgreSQL user name/);
    });

    it('a startup packet that never finishes (3 bytes): closed at the login timeout with 08P01', async () => {
      const conn = await connect();
      const t0 = Date.now();
      conn.write(Buffer.from([0, 0, 0]));
      await expectFatalAndClose(conn, '08P01', /canceling authentication due to timeout/);
      const elapsed = Date.now() - t0;
      expect(elapsed).to.be.within(800, 3000);
    });

    it('a startup packet cut short after its length word: closed at the login timeout', async () => {
      const conn = await connect();
      const full = startupPacket({ user: 'postgres', database: 'postgres' });
      const t0 = Date.now();
      conn.write(full.subarray(0, full.length - 3));
      await expectFatalAndClose(conn, '08P01', /timeout/);
      expect(Date.now() - t0).to.be.within(800, 3000);
    });

    it('a client that connects and says nothing: closed at the login timeout', async () => {
      const conn = await connect();
      const t0 = Date.now();
      await expectFatalAndClose(conn, '08P01', /timeout/);
      expect(Date.now() - t0).to.be.within(800, 3000);
    });

    it('a client that closes mid-startup leaves nothing behind', async () => {
      for (let cut = 1; cut < 20; cut += 3) {
        const conn = await connect();
        conn.write(startupPacket({ user: 'postgres' }).subarray(0, cut));
        conn.destroy();
      }
    });

    it("SSLRequest gets 'N' and the session goes on in plain text", async () => {
      const conn = await connect();
      conn.write(sslRequest());
      expect((await conn.readBytes(1)).toString()).to.equal('N');
      conn.write(startupPacket({ user: 'postgres', database: 'postgres' }));
      const msgs = await conn.readUntil('Z');
      expect(msgs.map((m) => m.type)).to.include.members(['R', 'K']);
      conn.write(query('SELECT 41 + 1'));
      const rows = await conn.readUntil('Z');
      const d = rows.find((m) => m.type === 'D')!;
      expect(d.body.toString('utf8', 2 + 4)).to.equal('42');
      conn.write(TERMINATE);
      expect(await conn.waitClosed()).to.equal(true);
    });

    it("GSSENCRequest gets 'N' and the session goes on in plain text", async () => {
      const conn = await connect();
      conn.write(gssencRequest());
      expect((await conn.readBytes(1)).toString()).to.equal('N');
      conn.write(startupPacket({ user: 'postgres', database: 'postgres' }));
      await conn.readUntil('Z');
      conn.write(TERMINATE);
      expect(await conn.waitClosed()).to.equal(true);
    });

    it('startup and a query in one write: the query is served after login', async () => {
      const conn = await connect();
      conn.write(Buffer.concat([startupPacket({ user: 'postgres', database: 'postgres' }), query('SELECT 7')]));
      await conn.readUntil('Z');
      const rows = await conn.readUntil('Z');
      expect(rows.map((m) => m.type)).to.deep.equal(['T', 'D', 'C', 'Z']);
      conn.write(TERMINATE);
      expect(await conn.waitClosed()).to.equal(true);
    });

    it('startup and garbage in one write: FATAL 08P01 once logged in', async () => {
      const conn = await connect();
      conn.write(Buffer.concat([startupPacket({ user: 'postgres', database: 'postgres' }), header('z', 4)]));
      await expectFatalAndClose(conn, '08P01', /invalid frontend message type 122/);
    });
  });

  describe('cancel requests', () => {
    it('an unknown key closes silently', async () => {
      for (const secret of [Buffer.from([1, 2, 3, 4]), Buffer.alloc(32, 7), Buffer.alloc(256, 9)]) {
        const conn = await connect();
        conn.write(cancelRequest(123456, secret));
        expect(await conn.waitClosed(), 'closed').to.equal(true);
        expect(conn.received, 'bytes answered').to.equal(0);
      }
    });

    it("a known pid with a wrong secret cancels nothing; the right key cancels that session's query", async () => {
      const victim = await loginTrust();
      try {
        victim.conn.write(query('SELECT pg_sleep(0.6)'));
        await new Promise((r) => setTimeout(r, 150));
        const wrong = Buffer.from(victim.secret);
        wrong[3] = wrong[3]! ^ 1;
        for (const secret of [wrong, Buffer.concat([victim.secret, Buffer.alloc(4)])]) {
          const c = await connect();
          c.write(cancelRequest(victim.pid, secret));
          expect(await c.waitClosed()).to.equal(true);
          expect(c.received).to.equal(0);
        }
        const done = await victim.conn.readUntil('Z');
        expect(done.map((m) => m.type)).to.not.include('E');

        victim.conn.write(query('SELECT pg_sleep(10)'));
        await new Promise((r) => setTimeout(r, 150));
        const c = await connect();
        c.write(cancelRequest(victim.pid, victim.secret));
        expect(await c.waitClosed()).to.equal(true);
        const cancelled = await victim.conn.readUntil('Z');
        const err = cancelled.find((m) => m.type === 'E');
        expect(err && errorOf(err).code).to.equal('57014');
        victim.conn.write(TERMINATE);
        expect(await victim.conn.waitClosed()).to.equal(true);
      } finally {
        victim.conn.destroy();
      }
    });

    it('a cancel request of impossible length is refused with 08P01', async () => {
      const conn = await connect();
      conn.write(requestPacket(80877102, int32(1)));
      await expectFatalAndClose(conn, '08P01', /invalid length of cancel request/);
    });
  });

  describe('after login', () => {
    it('a message with length 3: FATAL 08P01, closed', async () => {
      const { conn } = await loginTrust();
      conn.write(header('Q', 3));
      await expectFatalAndClose(conn, '08P01', /invalid message length 3/);
    });

    it("an unknown message type ('z'): FATAL 08P01 invalid frontend message type", async () => {
      const { conn } = await loginTrust();
      conn.write(message('z', 'whatever'));
      await expectFatalAndClose(conn, '08P01', /invalid frontend message type 122/);
    });

    it('a backend-only message type (Z) from the client: FATAL 08P01', async () => {
      const { conn } = await loginTrust();
      conn.write(message('Z', 'I'));
      await expectFatalAndClose(conn, '08P01', /invalid frontend message type 90/);
    });

    it('an oversized length (0x7fffffff): FATAL 08P01, without waiting for the body', async () => {
      const { conn } = await loginTrust();
      conn.write(header('Q', 0x7fffffff));
      await expectFatalAndClose(conn, '08P01', /invalid message length/);
    });

    it('a negative length: FATAL 08P01', async () => {
      const { conn } = await loginTrust();
      conn.write(header('P', -5));
      await expectFatalAndClose(conn, '08P01', /invalid message length/);
    });

    it('a good query and garbage in one write: the garbage ends the session', async () => {
      const { conn } = await loginTrust();
      conn.write(Buffer.concat([query('SELECT 1'), header(0xff, 8), Buffer.alloc(4)]));
      const { messages, closed } = await conn.drain();
      expect(closed).to.equal(true);
      const last = messages[messages.length - 1]!;
      expect(last.type).to.equal('E');
      expect(errorOf(last)).to.include({ severity: 'FATAL', code: '08P01' });
    });

    it('a query cut off by an abrupt close leaves no backend behind', async () => {
      for (const cut of [1, 3, 5, 9, 20]) {
        const { conn } = await loginTrust();
        const q = query(`SELECT '${'x'.repeat(40)}'`);
        conn.write(q.subarray(0, cut));
        await new Promise((r) => setTimeout(r, 20));
        conn.destroy();
      }
    });

    it('a client closing while its query runs leaves no backend behind', async () => {
      const { conn } = await loginTrust();
      conn.write(query('SELECT pg_sleep(0.3)'));
      await new Promise((r) => setTimeout(r, 50));
      conn.destroy();
      await until('backend freed', () => rt.runtime.engine.stats().backends.active === 0);
    });

    it('Terminate inside a transaction leaves no lock held', async () => {
      const { conn } = await loginTrust();
      conn.write(query('BEGIN; SELECT * FROM lockme WHERE id = 1 FOR UPDATE'));
      const msgs = await conn.readUntil('Z');
      expect(msgs[msgs.length - 1]!.body.toString()).to.equal('T');
      conn.write(TERMINATE);
      expect(await conn.waitClosed()).to.equal(true);
      await withPg(async (c) => {
        await c.query("SET lock_timeout = '5s'");
        const t0 = Date.now();
        const r = await c.query('SELECT id FROM lockme WHERE id = 1 FOR UPDATE');
        expect(r.rows).to.deep.equal([{ id: 1 }]);
        expect(Date.now() - t0).to.be.below(2000);
      });
    });

    // PostgreSQL reads a Terminate only after answering what came before it.
    it('a query and Terminate in one write: answered in full, then closed', async () => {
      const { conn } = await loginTrust();
      conn.write(Buffer.concat([query("SELECT pg_sleep(0.2); SELECT 'still here' AS v"), TERMINATE]));
      const { messages, closed } = await conn.drain();
      expect(closed).to.equal(true);
      expect(messages.map((m) => m.type).join('')).to.equal('TDCTDCZ');
      expect(messages[4]!.body.subarray(6).toString()).to.equal('still here');
    });

    it('statements in flight at Terminate commit, and the answer reaches a client that shut down its side', async () => {
      await withPg((c) => c.query('CREATE TABLE said_goodbye (id int)'));
      const { conn } = await loginTrust();
      const parse = message('P', Buffer.concat([Buffer.from('\0INSERT INTO said_goodbye SELECT $1::int FROM pg_sleep(0.2)\0'), Buffer.from([0, 0])]));
      const bind = message('B', Buffer.concat([Buffer.from('\0\0'), Buffer.from([0, 0, 0, 1]), int32(1), Buffer.from('7'), Buffer.from([0, 0])]));
      const execute = message('E', Buffer.concat([Buffer.from('\0'), int32(0)]));
      conn.write(Buffer.concat([query('INSERT INTO said_goodbye VALUES (1)'), parse, bind, execute, message('S'), TERMINATE]));
      conn.end();
      const { messages, closed } = await conn.drain();
      expect(closed).to.equal(true);
      expect(messages.map((m) => m.type).join('')).to.equal('CZ12CZ');
      const rows = await withPg((c) => c.query('SELECT id FROM said_goodbye ORDER BY id'));
      await withPg((c) => c.query('DROP TABLE said_goodbye'));
      expect(rows.rows).to.deep.equal([{ id: 1 }, { id: 7 }]);
    });

    it('COPY FROM STDIN and Terminate: closed at once, nothing copied', async () => {
      await withPg((c) => c.query('CREATE TABLE never_copied (id int)'));
      for (const before of [false, true]) {
        const { conn } = await loginTrust();
        conn.write(query('COPY never_copied FROM STDIN'));
        // Terminate after the backend asked for data, and (the second time) before it could.
        if (!before) expect((await conn.readUntil('G')).length).to.equal(1);
        conn.write(Buffer.concat([message('d', '1\n'), TERMINATE]));
        expect(await conn.waitClosed(), 'closed').to.equal(true);
      }
      await until('no backend still copying', async () =>
        withPg(async (c) => (await c.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'COPY never_copied%'")).rows[0].n === 0),
      );
      const rows = await withPg((c) => c.query('SELECT count(*)::int AS n FROM never_copied'));
      await withPg((c) => c.query('DROP TABLE never_copied'));
      expect(rows.rows).to.deep.equal([{ n: 0 }]);
    });

    it('garbage inside a transaction leaves no lock held either', async () => {
      const { conn } = await loginTrust();
      conn.write(query('BEGIN; SELECT * FROM lockme WHERE id = 1 FOR UPDATE'));
      await conn.readUntil('Z');
      conn.write(header('z', 0x10000));
      await expectFatalAndClose(conn, '08P01');
      await withPg(async (c) => {
        await c.query("SET lock_timeout = '5s'");
        const r = await c.query('SELECT id FROM lockme WHERE id = 1 FOR UPDATE NOWAIT').catch(async () => {
          // The backend may take a moment to notice its socket closed; then it must be free.
          await new Promise((res) => setTimeout(res, 200));
          return c.query('SELECT id FROM lockme WHERE id = 1 FOR UPDATE');
        });
        expect(r.rows).to.deep.equal([{ id: 1 }]);
      });
    });
  });

  describe('a client flooding bytes while it waits for a backend', () => {
    // Own runtime: two backends, both held, so the flooding client sits in 'connecting'.
    let small: TestRuntime;
    before(async () => {
      small = await startTestRuntime({ maxBackends: 2, backendWaitTimeout: 20 });
    });
    after(async () => {
      await small?.stop();
    });

    it('neither stalls the engine nor buffers without bound, and loses nothing', async () => {
      const holders: pg.Client[] = [];
      for (let i = 0; i < 2; i++) {
        const c = new pg.Client(small.connection());
        await c.connect();
        await c.query('BEGIN');
        holders.push(c);
      }
      const conn = await RawSocket.connect(small.port, small.host);
      try {
        conn.write(startupPacket({ user: 'postgres', database: 'postgres' }));
        await until('client waiting for a backend', () => small.runtime.engine.stats().backends.waiting === 1);

        // Measure how late a 10 ms timer fires in this process (the engine's process) during the flood.
        let worstLag = 0;
        let last = Date.now();
        const ticker = setInterval(() => {
          const now = Date.now();
          worstLag = Math.max(worstLag, now - last - 10);
          last = now;
        }, 10);
        const rss0 = process.memoryUsage().rss;
        // CopyData outside COPY: PostgreSQL ignores it, so whatever arrives later is harmless.
        const frame = message('d', Buffer.alloc(256 * 1024, 0x61));
        const limit = 32 * 1024 * 1024;
        let sent = 0;
        let stalled = false;
        while (sent < limit) {
          sent += frame.length;
          if (!conn.socket.write(frame)) {
            const drained = await Promise.race([
              new Promise<boolean>((r) => conn.socket.once('drain', () => r(true))),
              new Promise<boolean>((r) => setTimeout(() => r(false), 1500)),
            ]);
            if (!drained) {
              stalled = true; // the engine stopped reading: backpressure, as it should
              break;
            }
          }
        }
        clearInterval(ticker);
        const grown = process.memoryUsage().rss - rss0;
        const offered = `${(sent / 1048576).toFixed(1)} MB offered`;
        expect(stalled, `engine stopped reading before ${limit >> 20} MB (${offered})`).to.equal(true);
        expect(worstLag, `event loop lag, ${offered}`).to.be.below(300);
        expect(grown, `rss growth, ${offered}`).to.be.below(48 * 1024 * 1024);

        // A second waiting client floods too, then vanishes while its socket is paused.
        const quitter = await RawSocket.connect(small.port, small.host);
        quitter.write(startupPacket({ user: 'postgres', database: 'postgres' }));
        await until('second client waiting', () => small.runtime.engine.stats().backends.waiting === 2);
        for (let i = 0; i < 8; i++) quitter.write(frame);
        await new Promise((r) => setTimeout(r, 100));
        quitter.destroy();

        // A backend frees up: the client gets it, and everything it sent reaches PostgreSQL in order.
        await holders[0]!.query('COMMIT');
        await holders[0]!.end();
        holders.shift();
        conn.write(query('SELECT 42'));
        const greeting = await conn.readUntil('Z', 20_000);
        expect(greeting.map((m) => m.type)).to.include('K');
        const rows = await conn.readUntil('Z', 20_000);
        const d = rows.find((m) => m.type === 'D');
        expect(d?.body.toString('utf8', 6)).to.equal('42');
        conn.write(TERMINATE);
        expect(await conn.waitClosed()).to.equal(true);
      } finally {
        conn.destroy();
        for (const c of holders) await c.end().catch(() => undefined);
      }
      // The quitter is noticed once it gets a backend (its socket resumes), and gives it back.
      await until('small runtime at rest', () => {
        const st = small.runtime.engine.stats();
        return st.clients === 0 && st.backends.active === 0 && st.backends.waiting === 0;
      });
    });
  });

  describe('afterwards', () => {
    it('the engine still serves a normal client, and PostgreSQL holds no stray sessions', async () => {
      await withPg(async (c) => {
        const r = await c.query('SELECT 1 + 1 AS two');
        expect(r.rows).to.deep.equal([{ two: 2 }]);
        // Client backends PostgreSQL runs for the engine: ours and its idle pool. The runtime's own
        // admin sessions (application_name pgx-runtime) are not the engine's.
        await until('stray backends gone', async () => {
          const n = await c.query(
            "SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend' AND application_name <> 'pgx-runtime'",
          );
          const b = rt.runtime.engine.stats().backends;
          return n.rows[0].n <= b.total;
        });
      });
    });
  });
});
