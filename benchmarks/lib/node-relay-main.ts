// A bare Node.js relay, the overhead benchmark's opt-in `relay` target. It exists to measure the floor
// any Node.js proxy has on this machine: what Node's streams, libuv and the kernel cost to carry the
// same pgbench traffic, with no PGX code loaded (this file imports node:net and nothing else). The
// engine can beat this floor only by doing less than copying every byte through JavaScript.
//
// The cheapest honest relay: no protocol parsing, no pool. Each accepted client gets a fresh
// connection to PostgreSQL's Unix socket (where the engine and PgBouncer connect too), so a pgbench -C
// run pays a backend fork per connection that the pooling proxies do not; the steady -S runs are the
// point. Spawned by node-relay.ts with an IPC channel: it reports its port there, and exits when the
// channel closes, so a benchmark that dies cannot leave it behind.
//
// Usage: node node-relay-main.js BACKEND_SOCKET LISTEN   (LISTEN: 127.0.0.1, a free port is taken; or
// the path of a Unix socket to listen on)

import net from 'node:net';

const [backendPath, listenAt] = process.argv.slice(2);
if (!backendPath || !listenAt || !process.send) {
  process.stderr.write('usage: node node-relay-main.js BACKEND_SOCKET 127.0.0.1|LISTEN_SOCKET (spawned with an IPC channel)\n');
  process.exit(2);
}

/** Copies `from` to `to` chunk by chunk; a full `to` pauses `from` until it drains. */
function pump(from: net.Socket, to: net.Socket): void {
  from.on('data', (chunk: Buffer) => {
    if (!to.write(chunk)) from.pause();
  });
  to.on('drain', () => from.resume());
  // An end is passed on once what is queued has been written; an error closes both at once.
  from.on('end', () => to.end());
  from.on('error', () => {
    from.destroy();
    to.destroy();
  });
}

const server = net.createServer({ noDelay: true }, (client) => {
  // Writes before the connect completes (the startup packet) are queued by the socket.
  const backend = net.connect({ path: backendPath });
  // A no-op on a Unix socket; here so that a TCP backend would not wait for Nagle either.
  backend.setNoDelay(true);
  pump(client, backend);
  pump(backend, client);
});

server.on('error', (err) => {
  process.stderr.write(`node relay: ${err.message}\n`);
  process.exit(1);
});

const listening = (): void => {
  const address = server.address();
  process.send?.({ port: typeof address === 'object' && address ? address.port : 0 });
};
if (listenAt.startsWith('/')) server.listen(listenAt, listening);
else server.listen({ host: listenAt, port: 0 }, listening);

process.on('disconnect', () => process.exit(0));
