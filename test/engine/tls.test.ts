// TLS between clients and the engine: real psql (libpq) and node-postgres with sslmode require and
// verify-full against a certificate from a test CA; --tls-require refusing plain TCP as a hostssl-only
// pg_hba.conf would; the certificate re-read on reload; plain bytes smuggled after the SSLRequest refused.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import type tls from 'node:tls';
import pg from 'pg';
import { makeTestTls, type TestTls } from '../helpers/kube-api/tls.js';
import { runCommand } from '../helpers/commands.js';
import { RawSocket, sslRequest, startupPacket } from '../helpers/raw-socket.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

interface Files {
  dir: string;
  ca: string;
  cert: string;
  key: string;
}

function writeTls(dir: string, t: TestTls): Files {
  const files = { dir, ca: path.join(dir, 'ca.pem'), cert: path.join(dir, 'server.pem'), key: path.join(dir, 'server.key') };
  fs.writeFileSync(files.ca, t.caPem);
  fs.writeFileSync(files.cert, t.certPem);
  fs.writeFileSync(files.key, t.keyPem, { mode: 0o600 });
  return files;
}

describe('engine: TLS for TCP clients', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let files: Files;

  function psql(sslmode: string, extra: Record<string, string> = {}, sql = 'SELECT 42'): ReturnType<typeof runCommand> {
    return runCommand('psql', ['-X', '-At', '-c', sql], {
      env: { ...rt.env('postgres'), PGHOST: '127.0.0.1', PGSSLMODE: sslmode, ...extra },
    });
  }

  async function nodeSsl(ca: string): Promise<{ encrypted: boolean; answer: unknown }> {
    const client = new pg.Client({ ...rt.connection('postgres'), host: '127.0.0.1', ssl: { ca } });
    await client.connect();
    try {
      const stream = (client as unknown as { connection: { stream: tls.TLSSocket } }).connection.stream;
      return { encrypted: stream.encrypted === true, answer: (await client.query('SELECT 42 AS answer')).rows[0] };
    } finally {
      await client.end();
    }
  }

  before(async function () {
    const dir = scratchDir('pgx-tls-');
    files = writeTls(dir, makeTestTls());
    rt = await startTestRuntime({ tlsCert: files.cert, tlsKey: files.key });
  });

  after(async function () {
    await rt?.stop();
    if (files) fs.rmSync(files.dir, { recursive: true, force: true });
  });

  it('psql with sslmode=require and verify-full gets a TLS session', async function () {
    for (const [mode, extra] of [['require', {}], ['verify-full', { PGSSLROOTCERT: files.ca }]] as const) {
      const r = await psql(mode, extra, '\\conninfo');
      expect(r.code, r.stderr).to.equal(0);
      expect(r.stdout, mode).to.match(/SSL connection \(protocol: TLSv1\.[23]/);
    }
  });

  it('node-postgres verifies the certificate against the CA and the host name', async function () {
    expect(await nodeSsl(fs.readFileSync(files.ca, 'utf8'))).to.deep.equal({ encrypted: true, answer: { answer: 42 } });
    const other = makeTestTls();
    const err = await nodeSsl(other.caPem).catch((e: Error) => e);
    expect(err).to.be.instanceOf(Error);
    expect((err as Error).message).to.match(/self-signed|unable to verify|certificate/i);
  });

  it('verify-full with the wrong CA fails on the client, as it should', async function () {
    const wrong = path.join(files.dir, 'wrong-ca.pem');
    fs.writeFileSync(wrong, makeTestTls().caPem);
    const r = await psql('verify-full', { PGSSLROOTCERT: wrong });
    expect(r.code).to.not.equal(0);
    expect(r.stderr).to.match(/certificate verify failed/);
  });

  it('plain connections still work without --tls-require', async function () {
    const r = await psql('disable');
    expect(r.code, r.stderr).to.equal(0);
    expect(r.stdout.trim()).to.equal('42');
  });

  it('refuses plain bytes sent after the SSLRequest before the handshake (08P01)', async function () {
    const raw = await RawSocket.connect(rt.port, '127.0.0.1');
    raw.write(Buffer.concat([sslRequest(), startupPacket({ user: 'postgres', database: 'postgres' })]));
    const msg = await raw.readMessage();
    expect(msg?.type).to.equal('E');
    expect(msg!.body.toString('latin1')).to.include('received unencrypted data after SSL request');
    await raw.closedPromise;
  });

  it('re-reads the certificate on reload; sessions already open carry on', async function () {
    const open = new pg.Client({ ...rt.connection('postgres'), host: '127.0.0.1', ssl: { ca: fs.readFileSync(files.ca, 'utf8') } });
    await open.connect();
    const next = makeTestTls();
    fs.writeFileSync(files.cert, next.certPem);
    fs.writeFileSync(files.key, next.keyPem);
    expect(rt.runtime.reloadTls()).to.equal(true);
    expect(await nodeSsl(next.caPem)).to.deep.equal({ encrypted: true, answer: { answer: 42 } });
    expect((await nodeSsl(fs.readFileSync(files.ca, 'utf8')).catch((e: Error) => e)) instanceof Error).to.equal(true);
    expect((await open.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    await open.end();
    // A broken file keeps the certificate in use.
    fs.writeFileSync(files.key, 'not a key');
    expect(rt.runtime.reloadTls()).to.equal(false);
    expect((await nodeSsl(next.caPem)).encrypted).to.equal(true);
  });
});

describe('engine: --tls-require', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let files: Files;

  before(async function () {
    files = writeTls(scratchDir('pgx-tls-'), makeTestTls());
    rt = await startTestRuntime({ tlsCert: files.cert, tlsKey: files.key, tlsRequire: true });
  });

  after(async function () {
    await rt?.stop();
    if (files) fs.rmSync(files.dir, { recursive: true, force: true });
  });

  it('refuses plain TCP with 28000 as a hostssl-only pg_hba.conf does; TLS and the Unix socket are served', async function () {
    const plain = new pg.Client({ ...rt.connection('postgres'), host: '127.0.0.1' });
    const err = (await plain.connect().catch((e: unknown) => e)) as { code?: string; message: string };
    expect(err.code).to.equal('28000');
    expect(err.message).to.equal('no pg_hba.conf entry for host "127.0.0.1", user "postgres", database "postgres", no encryption');
    const tlsClient = new pg.Client({ ...rt.connection('postgres'), host: '127.0.0.1', ssl: { ca: fs.readFileSync(files.ca, 'utf8') } });
    await tlsClient.connect();
    expect((await tlsClient.query('SELECT 1 AS one')).rows).to.deep.equal([{ one: 1 }]);
    await tlsClient.end();
    const unix = new pg.Client({ ...rt.connection('postgres'), host: rt.socketDir });
    await unix.connect();
    expect((await unix.query('SELECT 2 AS two')).rows).to.deep.equal([{ two: 2 }]);
    await unix.end();
  });

  it('refuses to start with --tls-require but no certificate, or half a certificate', async function () {
    for (const [overrides, message] of [
      [{ tlsRequire: true }, /--tls-require needs a certificate/],
      [{ tlsCert: files.cert }, /--tls-key is missing/],
      [{ tlsCert: files.cert, tlsKey: path.join(files.dir, 'nope.key') }, /cannot read the TLS certificate or key/],
    ] as const) {
      const err = await startTestRuntime(overrides).then(
        async (r) => {
          await r.stop();
          return null;
        },
        (e: unknown) => e as Error,
      );
      expect(err?.message).to.match(message);
    }
  });
});
