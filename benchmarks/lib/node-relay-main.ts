// A bare Node.js relay, the overhead benchmark's opt-in `relay` target. It exists to measure the floor
// any Node.js proxy has on this machine: what Node's sockets, libuv and the kernel cost to carry the
// same pgbench traffic, with no engine code loaded (it imports node:net and the engine's
// accept-onread.ts, which imports node:net only).
//
// The cheapest honest relay: no protocol parsing, no pool, and reads as the engine reads them: every
// socket reads with `onread` into one buffer of its own (no Buffer, stream push or 'data' event per
// read), and each read is passed on as one write of a view of that buffer. A write the kernel did not
// take at once keeps the view, so the socket moves to a fresh buffer. Each accepted client gets a
// fresh connection to PostgreSQL's Unix socket (where the engine and PgBouncer connect too), so a
// pgbench -C run pays a backend fork per connection that the pooling proxies do not; the steady -S
// runs are the point. Spawned by node-relay.ts with an IPC channel: it reports its port there, and
// exits when the channel closes, so a benchmark that dies cannot leave it behind.
//
// Usage: node node-relay-main.js BACKEND_SOCKET LISTEN   (LISTEN: 127.0.0.1, a free port is taken; or
// the path of a Unix socket to listen on)

import net from 'node:net';
import { acceptWithOnread } from '../../src/engine/accept-onread.js';

const [backendPath, listenAt] = process.argv.slice(2);
if (!backendPath || !listenAt || !process.send) {
  process.stderr.write('usage: node node-relay-main.js BACKEND_SOCKET 127.0.0.1|LISTEN_SOCKET (spawned with an IPC channel)\n');
  process.exit(2);
}

const BUFFER_SIZE = 64 * 1024;
/** Bytes queued on a socket before its source is paused until drain (as the engine's pump). */
const MAX_QUEUED = 1 << 20;

/** One direction: what `from` reads is written to `to`, the way the engine's pump writes it. */
class Direction {
  from: net.Socket | null = null;
  to: net.Socket | null = null;
  private buffer = Buffer.allocUnsafe(BUFFER_SIZE);

  readonly onread: net.OnReadOpts = {
    buffer: () => this.buffer,
    callback: (n: number, buf: Uint8Array): boolean => {
      const to = this.to!;
      to.write(n === buf.length ? buf : buf.subarray(0, n));
      if (to.writableLength > 0) {
        this.buffer = Buffer.allocUnsafe(BUFFER_SIZE);
        if (to.writableLength > MAX_QUEUED) {
          this.from!.pause();
          to.once('drain', () => this.from!.resume());
        }
      }
      return true;
    },
  };
}

/** Ends and errors: an end is passed on once what is queued is written; an error closes both. */
function link(a: net.Socket, b: net.Socket): void {
  for (const [from, to] of [[a, b], [b, a]] as const) {
    from.on('end', () => to.end());
    from.on('error', () => {
      from.destroy();
      to.destroy();
    });
  }
}

// Connections are accepted by acceptWithOnread (below, once listening), never by net.Server itself.
const server = net.createServer();

function accept(makeClient: (onread: net.OnReadOpts) => net.Socket): void {
  const up = new Direction();
  const down = new Direction();
  const client = makeClient(up.onread);
  // Writes before the connect completes (the startup packet) are queued by the socket.
  const backend = net.connect({ path: backendPath!, onread: down.onread });
  up.from = down.to = client;
  up.to = down.from = backend;
  link(client, backend);
}

server.on('error', (err) => {
  process.stderr.write(`node relay: ${err.message}\n`);
  process.exit(1);
});

const listening = (): void => {
  if (!acceptWithOnread(server, !listenAt.startsWith('/'), accept)) {
    process.stderr.write('node relay: could not accept with onread on this Node.js\n');
    process.exit(1);
  }
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0 });
};
if (listenAt.startsWith('/')) server.listen(listenAt, listening);
else server.listen({ host: listenAt, port: 0 }, listening);

process.on('disconnect', () => process.exit(0));
