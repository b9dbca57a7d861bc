// A bare session pooler, the overhead benchmark's opt-in `pooler` target: the least a Node.js pooler
// does per client connection, to measure the floor of `pgbench -C` on this machine in the same run as
// the engine and PgBouncer. The relay (node-relay-main.ts) cannot be that floor: it opens a PostgreSQL
// connection per client, so its CPU per connection holds a whole backend login.
//
// Per connection it does what any session pooler must and nothing else: accept (with `onread`, as the
// engine), answer SSLRequest with 'N', read the startup packet, hand the client an idle backend logged
// in with the same packet (or log a new one in), send the client the greeting that backend got at its
// login, relay bytes both ways unread, and on the client's Terminate put the backend back idle and
// close the client. No reset, no login check, no routing, limits, cancel keys or control functions:
// everything the engine adds on top is what the difference to this floor measures. Only for pgbench's
// workloads (a client that leaves mid-transaction has its backend closed, never reused).
//
// Usage: node node-pooler-main.js BACKEND_SOCKET 127.0.0.1   (spawned by node-relay.ts with an IPC
// channel; it reports its port there, and exits when the channel closes)

import net from 'node:net';
import { acceptWithOnread } from '../../src/engine/accept-onread.js';

const [backendPath, listenAt] = process.argv.slice(2);
if (!backendPath || !listenAt || !process.send) {
  process.stderr.write('usage: node node-pooler-main.js BACKEND_SOCKET 127.0.0.1 (spawned with an IPC channel)\n');
  process.exit(2);
}

const SSL_REQUEST = 80877103;
const TERMINATE = 0x58;
const READY_FOR_QUERY = 0x5a;

interface Backend {
  socket: net.Socket;
  /** What PostgreSQL sent from AuthenticationOk to the first ReadyForQuery: the client's greeting. */
  greeting: Buffer;
  /** The client it serves now; null while idle. */
  client: net.Socket | null;
}

/** Idle backends per startup packet (user, database and parameters, byte for byte). */
const idle = new Map<string, Backend[]>();

/** Logs a new backend in with `packet`; resolves once its first ReadyForQuery has arrived. */
function login(packet: Buffer): Promise<Backend> {
  return new Promise((resolve, reject) => {
    let greeting = Buffer.alloc(0);
    const socket = net.connect({ path: backendPath! }, () => socket.write(packet));
    const backend: Backend = { socket, greeting, client: null };
    const onLogin = (chunk: Buffer): void => {
      greeting = Buffer.concat([greeting, chunk]);
      // The login ends with ReadyForQuery, 6 bytes: 'Z', length 5, status.
      if (greeting.length >= 6 && greeting[greeting.length - 6] === READY_FOR_QUERY) {
        socket.off('data', onLogin);
        backend.greeting = greeting;
        socket.on('data', (bytes: Buffer) => backend.client?.write(bytes));
        resolve(backend);
      }
    };
    socket.on('data', onLogin);
    socket.once('error', reject);
    socket.once('close', () => backend.client?.destroy());
  });
}

function accept(source: net.Socket | ((onread: net.OnReadOpts) => net.Socket)): void {
  let pending = Buffer.alloc(0);
  let backend: Backend | null = null;
  let key = '';
  /** Body bytes of the current client message still to come (0: at a message boundary). */
  let rest = 0;
  const buffer = Buffer.allocUnsafe(8192);
  const onBytes = (bytes: Buffer): void => {
    if (backend === null) {
      pending = pending.length === 0 ? Buffer.from(bytes) : Buffer.concat([pending, bytes]);
      if (pending.length < 8) return;
      const length = pending.readInt32BE(0);
      if (pending.length < length) return;
      const packet = pending.subarray(0, length);
      pending = pending.subarray(length);
      if (length === 8 && packet.readInt32BE(4) === SSL_REQUEST) {
        client.write('N');
        return;
      }
      key = packet.toString('latin1', 4);
      const reused = idle.get(key)?.pop();
      const ready = reused ? Promise.resolve(reused) : login(packet);
      backend = { socket: null as unknown as net.Socket, greeting: Buffer.alloc(0), client: null };
      ready.then((b) => {
        backend = b;
        b.client = client;
        client.write(b.greeting);
        if (pending.length > 0) forward(pending);
      }, () => client.destroy());
      return;
    }
    if (backend.client === null) {
      pending = Buffer.concat([pending, bytes]);
      return;
    }
    forward(Buffer.from(bytes));
  };
  /** Client bytes to the backend, message by message only to find Terminate. */
  const forward = (bytes: Buffer): void => {
    let pos = 0;
    while (pos < bytes.length) {
      if (rest > 0) {
        const n = Math.min(rest, bytes.length - pos);
        rest -= n;
        pos += n;
        continue;
      }
      if (bytes[pos] === TERMINATE) {
        if (pos > 0) backend!.socket.write(bytes.subarray(0, pos));
        const b = backend!;
        b.client = null;
        backend = null;
        const list = idle.get(key) ?? [];
        list.push(b);
        idle.set(key, list);
        client.destroy();
        return;
      }
      // Headers are assumed whole within a read: pgbench's messages are small.
      rest = 1 + bytes.readInt32BE(pos + 1);
    }
    backend!.socket.write(bytes);
  };
  const client: net.Socket =
    source instanceof net.Socket ? source : source({ buffer: () => buffer, callback: (n, buf) => (onBytes((buf as Buffer).subarray(0, n)), true) });
  if (source instanceof net.Socket) {
    client.on('data', onBytes);
    client.resume();
  }
  client.on('error', () => client.destroy());
  client.on('close', () => {
    // Gone without Terminate: the backend may be mid-transaction, so it is closed, not reused.
    if (backend?.client === client) backend.socket.destroy();
  });
}

const server = net.createServer({ pauseOnConnect: true, noDelay: true }, accept);
server.on('error', (err) => {
  process.stderr.write(`pooler: ${err.message}\n`);
  process.exit(1);
});
server.listen({ host: listenAt, port: 0 }, () => {
  const onread = acceptWithOnread(server, true, accept);
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0, onread });
});
process.on('disconnect', () => process.exit(0));
