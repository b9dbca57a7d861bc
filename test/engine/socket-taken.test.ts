// The engine's Unix socket goes where other servers may have theirs (/tmp by default). A socket file a
// killed runtime left behind is removed at start; one a live server answers on is left alone and the
// start refused: a PostgreSQL listening only on its socket holds no TCP port to find taken first.

import { expect } from 'chai';
import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { PgxError } from '../../src/errors.js';
import { startTestRuntime } from '../helpers/runtime.js';
import { scratchDir } from '../helpers/scratch.js';

async function freePort(): Promise<number> {
  const probe = net.createServer();
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve));
  const port = (probe.address() as net.AddressInfo).port;
  await new Promise((resolve) => probe.close(resolve));
  return port;
}

describe('engine: a Unix socket another server holds', function () {
  this.timeout(60_000);

  it('refuses to start over a live server\'s socket, and removes a stale socket file', async () => {
    const dir = scratchDir('pgx-taken-');
    try {
      const port = await freePort();
      const file = path.join(dir, `.s.PGSQL.${port}`);
      // It greets every connection; the engine's probe hangs up at once.
      const other = net.createServer((s) => s.on('error', () => undefined).end('other server'));
      await new Promise<void>((resolve) => other.listen(file, resolve));
      try {
        const err = await startTestRuntime({ port, socketDir: dir }).then((rt) => rt.stop().then(() => null), (e: unknown) => e);
        expect(err).to.be.instanceOf(PgxError);
        expect((err as PgxError).message).to.equal(`another server listens on ${file}`);
        // Still the other server's.
        const said = await new Promise<string>((resolve) => net.connect({ path: file }).once('data', (b) => resolve(b.toString())));
        expect(said).to.equal('other server');
      } finally {
        await new Promise((resolve) => other.close(resolve));
      }
      // What a killed runtime leaves: the file, nobody listening.
      fs.writeFileSync(file, '');
      const rt = await startTestRuntime({ port, socketDir: dir });
      expect(fs.statSync(file).isSocket()).to.equal(true);
      await rt.stop();
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
