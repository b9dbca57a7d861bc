// What an unauthenticated client can make the engine hold: at most one message. A login held for its
// failed-login turn (--login-failure-limit) reads nothing of the client's until the challenge goes out,
// so a client that streams bytes meanwhile, in plain text or over TLS, is closed with 08P01 as soon as
// it has sent more than the largest login message, not buffered (and copied) until its turn.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import pg from 'pg';
import { parseErrorFields } from '../../src/wire/error-response.js';
import { waitFor } from '../helpers/commands.js';
import { makeTestTls } from '../helpers/kube-api/tls.js';
import { RawSocket, sslRequest, startupPacket } from '../helpers/raw-socket.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

/** Four times the largest login message (a 65535-byte SASL message and its type byte). */
const FLOOD = Buffer.alloc(256 * 1024, 'A');

interface Answer {
  /** The types of the messages the engine sent, in order. */
  types: string;
  code: string | undefined;
  message: string | undefined;
}

/** The messages in `bytes` (everything the engine sent before it closed), and its last error. */
function answerOf(bytes: Buffer): Answer {
  let types = '';
  let error: Map<string, string> | null = null;
  for (let at = 0; at + 5 <= bytes.length; ) {
    const end = at + 1 + bytes.readInt32BE(at + 1);
    const type = String.fromCharCode(bytes[at]!);
    types += type;
    if (type === 'E') error = parseErrorFields(bytes.subarray(at + 5, end));
    at = end;
  }
  return { types, code: error?.get('C'), message: error?.get('M') };
}

describe('engine: what a client sends before it is authenticated is bounded', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let dir: string;
  let ca: string;

  before(async function () {
    dir = scratchDir('pgx-login-buffer-');
    const t = makeTestTls();
    ca = t.caPem;
    fs.writeFileSync(path.join(dir, 'server.pem'), t.certPem);
    fs.writeFileSync(path.join(dir, 'server.key'), t.keyPem, { mode: 0o600 });
    rt = await startTestRuntime({
      auth: 'scram',
      users: [{ name: 'app', password: 'right-horse-battery-staple' }],
      tlsCert: path.join(dir, 'server.pem'),
      tlsKey: path.join(dir, 'server.key'),
      loginFailureLimit: 1,
    });
  });

  after(async function () {
    await rt?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  afterEach(async function () {
    await waitFor('no client sessions', () => rt.runtime.engine.stats().clients === 0, 5000);
  });

  /**
   * Fails `user`'s logins from 127.0.0.1 until its next attempt waits 2 s for its turn: past the
   * limit of 1 the turns are 250 ms, 500 ms, 1 s, then 2 s apart.
   */
  async function throttle(user: string): Promise<void> {
    for (let i = 0; i < 4; i++) {
      const client = new pg.Client({ ...rt.connection('postgres', user), host: '127.0.0.1', password: 'a-wrong-guess' });
      client.on('error', () => {});
      const err = await client.connect().then(
        () => null,
        (e: { code?: string }) => e,
      );
      await client.end().catch(() => undefined);
      expect(err?.code).to.equal('28P01');
    }
  }

  /** The engine's answer: one FATAL 08P01 for too much data, before any challenge ('R'), then the close. */
  function expectRefusedUnread(answer: Answer): void {
    expect(answer).to.deep.equal({
      types: 'E',
      code: '08P01',
      message: 'received more data during authentication than one message can hold',
    });
  }

  it('a login held for its turn is closed with 08P01 once the client sends more than one message', async function () {
    await throttle('nobody-plain');
    const conn = await RawSocket.connect(rt.port, '127.0.0.1');
    conn.write(Buffer.concat([startupPacket({ user: 'nobody-plain', database: 'postgres' }), FLOOD]));
    // Closed at once: the turn (2 s off) never comes, and the flood is not read up to it.
    expect(await conn.waitClosed(10_000)).to.equal(true);
    expectRefusedUnread(answerOf(conn.pending));
  });

  it('the same over TLS', async function () {
    await throttle('nobody-tls');
    const raw = await RawSocket.connect(rt.port, '127.0.0.1');
    raw.write(sslRequest());
    expect((await raw.readBytes(1)).toString()).to.equal('S');
    raw.socket.removeAllListeners('data');
    const secure = tls.connect({ socket: raw.socket, ca, servername: 'localhost' });
    const received: Buffer[] = [];
    secure.on('data', (chunk: Buffer) => received.push(chunk));
    secure.on('error', () => {});
    const closed = new Promise<void>((resolve) => secure.once('close', () => resolve()));
    await new Promise<void>((resolve) => secure.once('secureConnect', () => resolve()));
    secure.write(Buffer.concat([startupPacket({ user: 'nobody-tls', database: 'postgres' }), FLOOD]));
    await closed;
    expectRefusedUnread(answerOf(Buffer.concat(received)));
  });
});
