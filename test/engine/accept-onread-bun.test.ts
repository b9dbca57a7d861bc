// acceptWithOnread on Bun (the optional npm package @oven/bun-linux-x64): Bun's net.Server has a
// `_handle.onconnection` too, but passes it Bun's own socket objects, which a net.Socket built around
// them never reads, so a hooked server accepts connections that hang. acceptWithOnread must decline
// there, and the server's own 'connection' path (the engine's fallback, and the bench relay's) must
// serve. Runs a small script under the real Bun binary; fails if the decline is removed (the echo
// never comes back and the script reports hooked: true).

import { expect } from 'chai';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { bunBinary } from '../../benchmarks/lib/bun-binary.js';
import { runCommand } from '../helpers/commands.js';

const acceptOnread = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../src/engine/accept-onread.js');

// The engine's pattern (listener.ts): a paused-on-connect server, then acceptWithOnread once listening.
const SCRIPT = `
import net from 'node:net';
import { acceptWithOnread } from ${JSON.stringify(acceptOnread)};
const server = net.createServer({ pauseOnConnect: true, noDelay: true }, (socket) => {
  socket.on('data', (d) => socket.end(Buffer.from(d).reverse()));
  socket.resume();
});
server.listen({ host: '127.0.0.1', port: 0 }, () => {
  const hooked = acceptWithOnread(server, true, (source) => {
    const s = source({ buffer: Buffer.alloc(64), callback: (n, b) => (s.end(Buffer.from(b.subarray(0, n)).reverse()), true) });
  });
  const timer = setTimeout(() => { console.log(JSON.stringify({ hooked, echoed: null })); process.exit(0); }, 5000);
  const client = net.connect({ host: '127.0.0.1', port: server.address().port }, () => client.write('olleh'));
  let echoed = '';
  client.on('data', (d) => (echoed += d));
  client.on('end', () => { clearTimeout(timer); console.log(JSON.stringify({ hooked, echoed })); server.close(); });
});
`;

describe('engine: acceptWithOnread on Bun', function () {
  this.timeout(30_000);

  it("declines Bun's net.Server, whose own 'connection' sockets then serve", async () => {
    const r = await runCommand(bunBinary(), ['-e', SCRIPT], { timeoutMs: 20_000 });
    expect(r.code, r.stderr).to.equal(0);
    expect(JSON.parse(r.stdout.trim())).to.deep.equal({ hooked: false, echoed: 'hello' });
  });
});
