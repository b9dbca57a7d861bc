// Cancel keys against a guesser, attacked as a tenant would: a 3.0 key's secret is 32 bits, so wrong
// guesses per source are throttled (past the burst even the right key from that source is dropped),
// while other sources still cancel; a client asking for protocol 3.2 (PostgreSQL 18's) gets a 32-byte
// secret, is not sent NegotiateProtocolVersion, and cancels with it from anywhere.

import { expect } from 'chai';
import { randomBytes } from 'node:crypto';
import { PassThrough } from 'node:stream';
import { createLogger } from '../../src/log.js';
import { RawSocket, cancelRequest, errorOf, login, query, startupPacket, type BackendMessage } from '../helpers/raw-socket.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

interface Key {
  conn: RawSocket;
  pid: number;
  secret: Buffer;
  messages: BackendMessage[];
}

describe('engine: cancel keys against guessing', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  const logged: string[] = [];
  const stream = new PassThrough();
  stream.on('data', (chunk: Buffer) => logged.push(chunk.toString('utf8')));

  before(async function () {
    rt = await startTestRuntime({}, createLogger({ format: 'json', level: 'info', stream }));
  });

  after(async function () {
    await rt?.stop();
  });

  /** Logs in (trust) asking for protocol 3.`minor`; the key and every message up to ReadyForQuery. */
  async function session(minor: number, host = '127.0.0.1'): Promise<Key> {
    const conn = await RawSocket.connect(rt.port, host);
    conn.write(startupPacket({ user: 'postgres', database: 'postgres' }, (3 << 16) | minor));
    const messages = await conn.readUntil('Z');
    const k = messages.find((m) => m.type === 'K')!;
    return { conn, pid: k.body.readInt32BE(0), secret: Buffer.from(k.body.subarray(4)), messages };
  }

  /** Sends a CancelRequest on a fresh connection and waits until the engine has closed it. */
  async function cancel(pid: number, secret: Buffer, host = '127.0.0.1'): Promise<void> {
    const c = await RawSocket.connect(rt.port, host);
    c.write(cancelRequest(pid, secret));
    expect(await c.waitClosed(5000)).to.equal(true);
  }

  /** The SQLSTATE a statement ended with, or 'ok'. */
  async function outcome(conn: RawSocket): Promise<string> {
    const msgs = await conn.readUntil('Z', 20_000);
    const e = msgs.find((m) => m.type === 'E');
    return e ? errorOf(e).code : 'ok';
  }

  it('a 3.0 client gets a 4-byte secret; 3.2 a 32-byte one without NegotiateProtocolVersion; 3.3 is negotiated down to 3.2', async function () {
    const v30 = await session(0);
    expect(v30.secret.length).to.equal(4);
    const v32 = await session(2);
    expect(v32.secret.length).to.equal(32);
    expect(v32.messages.map((m) => m.type)).to.not.include('v');
    const v33 = await session(3);
    expect(v33.messages[0]!.type).to.equal('v');
    expect(v33.messages[0]!.body.readInt32BE(0)).to.equal((3 << 16) | 2);
    expect(v33.secret.length).to.equal(32);
    for (const s of [v30, v32, v33]) s.conn.destroy();
  });

  it('a 3.2 client cancels its statement with its 32-byte secret', async function () {
    const s = await session(2);
    s.conn.write(query('SELECT pg_sleep(30)'));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await cancel(s.pid, s.secret);
    expect(await outcome(s.conn)).to.equal('57014');
    s.conn.destroy();
  });

  it('wrong 4-byte guesses from one source cut that source off, even for the right key; other sources and 3.2 keys still cancel', async function () {
    const victim = await login(rt.port, '127.0.0.1');
    victim.conn.write(query('SELECT pg_sleep(4)'));
    for (let i = 0; i < 30; i++) {
      let guess = randomBytes(4);
      while (guess.equals(victim.secret)) guess = randomBytes(4);
      await cancel(victim.pid, guess);
    }
    // A lucky guess now: dropped unread, so the statement runs to its end.
    await cancel(victim.pid, victim.secret);
    expect(await outcome(victim.conn)).to.equal('ok');
    // The Unix socket is another source: the victim's own cancel from there works.
    victim.conn.write(query('SELECT pg_sleep(30)'));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await cancel(victim.pid, victim.secret, rt.socketDir);
    expect(await outcome(victim.conn)).to.equal('57014');
    victim.conn.destroy();
    // A 3.2 key cannot be guessed, so it is not throttled: it cancels from the guesser's address.
    const long = await session(2);
    long.conn.write(query('SELECT pg_sleep(30)'));
    await new Promise((resolve) => setTimeout(resolve, 200));
    await cancel(long.pid, long.secret);
    expect(await outcome(long.conn)).to.equal('57014');
    long.conn.destroy();
    const lines = logged.join('').split('\n').filter((l) => l.includes('"cancel-rate-limited"'));
    expect(lines.length).to.be.at.least(1);
    expect((JSON.parse(lines[0]!) as { source: string }).source).to.equal('127.0.0.1');
  });
});
