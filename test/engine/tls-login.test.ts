// Logging in over TLS, attacked and used as clients would: --login-timeout covers the TLS handshake
// (a client that answers the SSLRequest's 'S' with nothing, or with half a handshake, is closed at the
// timeout, not kept), and SCRAM-SHA-256-PLUS with tls-server-end-point channel binding works for psql
// (channel_binding=require) and node-postgres (enableChannelBinding).

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import pg from 'pg';
import { makeTestTls } from '../helpers/kube-api/tls.js';
import { runCommand } from '../helpers/commands.js';
import { RawSocket, sslRequest } from '../helpers/raw-socket.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

const PASSWORD = 'channel-bound-password';

describe('engine: logging in over TLS', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let dir: string;

  before(async function () {
    dir = scratchDir('pgx-tls-login-');
    const t = makeTestTls();
    fs.writeFileSync(path.join(dir, 'ca.pem'), t.caPem);
    fs.writeFileSync(path.join(dir, 'server.pem'), t.certPem);
    fs.writeFileSync(path.join(dir, 'server.key'), t.keyPem, { mode: 0o600 });
    rt = await startTestRuntime({
      auth: 'scram',
      users: [{ name: 'app', password: PASSWORD }],
      tlsCert: path.join(dir, 'server.pem'),
      tlsKey: path.join(dir, 'server.key'),
      loginTimeout: 1,
    });
  });

  after(async function () {
    await rt?.stop();
    if (dir) fs.rmSync(dir, { recursive: true, force: true });
  });

  describe('SCRAM-SHA-256-PLUS: channel binding to the engine\'s certificate', function () {
    function psql(extra: Record<string, string>): ReturnType<typeof runCommand> {
      return runCommand('psql', ['-X', '-At', '-c', 'SELECT current_user'], {
        env: { ...rt.env('postgres', 'app'), PGHOST: '127.0.0.1', PGPASSWORD: PASSWORD, ...extra },
      });
    }

    it('psql with channel_binding=require logs in over TLS (verify-full too)', async function () {
      const modes: Record<string, string>[] = [{ PGSSLMODE: 'require' }, { PGSSLMODE: 'verify-full', PGSSLROOTCERT: path.join(dir, 'ca.pem') }];
      for (const extra of modes) {
        const r = await psql({ ...extra, PGCHANNELBINDING: 'require' });
        expect(r.code, r.stderr).to.equal(0);
        expect(r.stdout.trim()).to.equal('app');
      }
    });

    it('psql with channel_binding=require refuses a plain connection: nothing to bind to', async function () {
      const r = await psql({ PGSSLMODE: 'disable', PGCHANNELBINDING: 'require' });
      expect(r.code).to.not.equal(0);
      expect(r.stderr).to.match(/channel binding/);
    });

    it('node-postgres with enableChannelBinding picks SCRAM-SHA-256-PLUS and logs in', async function () {
      const client = new pg.Client({
        ...rt.connection('postgres', 'app'),
        host: '127.0.0.1',
        password: PASSWORD,
        ssl: { ca: fs.readFileSync(path.join(dir, 'ca.pem'), 'utf8') },
        enableChannelBinding: true,
      } as pg.ClientConfig);
      const connection = (client as unknown as { connection: { sendSASLInitialResponseMessage(mechanism: string, data: string): void } }).connection;
      const send = connection.sendSASLInitialResponseMessage.bind(connection);
      let mechanism = '';
      connection.sendSASLInitialResponseMessage = (m, data) => {
        mechanism = m;
        send(m, data);
      };
      await client.connect();
      try {
        expect((await client.query('SELECT current_user AS u')).rows).to.deep.equal([{ u: 'app' }]);
        expect(mechanism).to.equal('SCRAM-SHA-256-PLUS');
      } finally {
        await client.end();
      }
    });
  });

  describe('--login-timeout covers the TLS handshake', function () {
    // The close must come with the 1 s timeout; 4 s leaves room for a loaded machine, and is well
    // under what a handshake that is never finished held before (the timeout plus a 5 s close grace).
    it('a client that never starts the handshake after "S" is closed at the timeout', async function () {
      const raw = await RawSocket.connect(rt.port, '127.0.0.1');
      raw.write(sslRequest());
      expect((await raw.readBytes(1)).toString()).to.equal('S');
      expect(await raw.waitClosed(4000)).to.equal(true);
      raw.destroy();
    });

    it('a client that finishes the handshake but not the login gets FATAL 08P01 over TLS', async function () {
      const raw = await RawSocket.connect(rt.port, '127.0.0.1');
      raw.write(sslRequest());
      expect((await raw.readBytes(1)).toString()).to.equal('S');
      raw.socket.removeAllListeners('data');
      const secure = tls.connect({ socket: raw.socket, ca: fs.readFileSync(path.join(dir, 'ca.pem'), 'utf8'), servername: 'localhost' });
      const received: Buffer[] = [];
      secure.on('data', (chunk: Buffer) => received.push(chunk));
      secure.on('error', () => {});
      await new Promise<void>((resolve) => secure.once('secureConnect', () => resolve()));
      await new Promise<void>((resolve) => secure.once('close', () => resolve()));
      const text = Buffer.concat(received).toString('latin1');
      expect(text).to.include('C08P01').and.to.include('canceling authentication due to timeout');
    });

    it('a client that sends half a ClientHello is closed at the timeout', async function () {
      const raw = await RawSocket.connect(rt.port, '127.0.0.1');
      raw.write(sslRequest());
      expect((await raw.readBytes(1)).toString()).to.equal('S');
      // A TLS record header announcing 512 bytes of handshake, then only 3 of them.
      raw.write(Buffer.from([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01]));
      expect(await raw.waitClosed(4000)).to.equal(true);
      raw.destroy();
    });
  });
});
