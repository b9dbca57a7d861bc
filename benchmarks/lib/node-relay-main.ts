// A bare relay, the overhead benchmark's opt-in `relay` target (on Node.js) and `bun-relay` target (the
// same file on Bun). It exists to measure the floor any JavaScript proxy has on this machine: what the
// runtime's sockets, its event loop and the kernel cost to carry the same pgbench traffic, with no
// engine code loaded (it imports node:net and the engine's accept-onread.ts, which imports node:net
// only).
//
// The cheapest honest relay that reads as the engine reads on that runtime: no protocol parsing, no
// pool. On Node every socket reads with `onread` into one buffer of its own (no Buffer, stream push or
// 'data' event per read), and each read is passed on as one write of a view of that buffer; a write the
// kernel did not take at once keeps the view, so the socket moves to a fresh buffer. On Bun, whose
// net.Server cannot be hooked (acceptWithOnread declines), accepted sockets come from net.Server's
// 'connection' event and are read through 'data' events (the engine's own fallback), while the
// connection to PostgreSQL still reads with `onread`, which Bun's net.connect supports (a ping-pong
// measured it no costlier than 'data' there). Bun's own socket API (Bun.listen) would skip node:net
// altogether, but the engine cannot use it without a second code base, so its floor is not the one
// that matters here.
//
// Each accepted client gets a fresh connection to PostgreSQL's Unix socket (where the engine and
// PgBouncer connect too), so a pgbench -C run pays a backend fork per connection that the pooling
// proxies do not; the steady -S runs are the point. Spawned by node-relay.ts with an IPC channel: it
// reports its port there, and exits when the channel closes, so a benchmark that dies cannot leave it
// behind.
//
// Usage: node|bun node-relay-main.js BACKEND_SOCKET LISTEN   (LISTEN: 127.0.0.1, a free port is taken;
// or the path of a Unix socket to listen on)

import net from 'node:net';
import { acceptWithOnread } from '../../src/engine/accept-onread.js';

const [backendPath, listenAt] = process.argv.slice(2);
if (!backendPath || !listenAt || !process.send) {
  process.stderr.write('usage: node|bun node-relay-main.js BACKEND_SOCKET 127.0.0.1|LISTEN_SOCKET (spawned with an IPC channel)\n');
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
      // A write still queued keeps its view of the buffer: the next read goes to a fresh one.
      if (this.pass(n === buf.length ? buf : buf.subarray(0, n))) this.buffer = Buffer.allocUnsafe(BUFFER_SIZE);
      return true;
    },
  };

  /** A 'data' chunk is the relay's to keep: it is written as it is. */
  readonly onData = (chunk: Buffer): void => {
    this.pass(chunk);
  };

  /** Writes `bytes` on; true when the kernel did not take them at once (they stay queued). */
  private pass(bytes: Uint8Array): boolean {
    const to = this.to!;
    to.write(bytes);
    if (to.writableLength === 0) return false;
    if (to.writableLength > MAX_QUEUED) {
      this.from!.pause();
      to.once('drain', () => this.from!.resume());
    }
    return true;
  }
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

/** The accepted client: a socket made around its `onread` (Node), or one net.Server made, paused (Bun). */
type ClientSource = net.Socket | ((onread: net.OnReadOpts) => net.Socket);

function accept(source: ClientSource): void {
  const up = new Direction();
  const down = new Direction();
  let client: net.Socket;
  if (source instanceof net.Socket) {
    client = source;
    client.on('data', up.onData);
    client.resume();
  } else {
    client = source(up.onread);
  }
  // Writes before the connect completes (the startup packet) are queued by the socket.
  const backend = net.connect({ path: backendPath!, onread: down.onread });
  up.from = down.to = client;
  up.to = down.from = backend;
  link(client, backend);
}

// Connections are accepted by acceptWithOnread (below, once listening) where the runtime lets it take
// them from net.Server; where not (Bun), net.Server's own sockets come here, paused.
const tcp = !listenAt.startsWith('/');
const server = net.createServer({ pauseOnConnect: true, noDelay: tcp }, accept);
server.on('error', (err) => {
  process.stderr.write(`relay: ${err.message}\n`);
  process.exit(1);
});

const listening = (): void => {
  const onread = acceptWithOnread(server, tcp, accept);
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0, onread });
};
if (!tcp) server.listen(listenAt, listening);
else server.listen({ host: listenAt, port: 0 }, listening);

process.on('disconnect', () => process.exit(0));
