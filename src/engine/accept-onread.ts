// Accepting connections into sockets that read with `onread`, which net.Server cannot do itself.
// Imports node:net only, so the overhead benchmark's bare relay (benchmarks/lib/node-relay-main.ts)
// reads the same way without loading the engine. Node.js only: on a runtime whose net is not built on
// libuv handles (Bun) it declines, and the caller's net.Server 'connection' path takes the sockets.

import net from 'node:net';

/** The listening handle: Node's libuv TCP or Pipe wrap (the class its accepted handles have too). */
interface ListeningHandle {
  onconnection?: OnConnection;
  /** What net.Socket's `onread` needs of a handle: a libuv stream that reads into a given buffer. */
  useUserBuffer?: unknown;
}

/** The accepted connection as net.Server's listening handle reports it (a TCP or Pipe handle). */
interface AcceptedHandle {
  setNoDelay?(enable: boolean): number;
  getpeername?(out: { address?: string }): number;
}

type OnConnection = (this: unknown, status: number, handle?: AcceptedHandle) => void;

/**
 * Makes the sockets of `server`'s connections without net.Server: for each accepted handle,
 * `accept` gets a function that builds the connection's one net.Socket with the session's `onread`
 * (net.Server has no onread option for the sockets it accepts, Node 20 to 24, and building its own
 * socket, then a second one to read with onread, cost a socket construction and destruction per
 * connection). It sets TCP_NODELAY on TCP connections once (`noDelay`), and counts the socket as
 * net.Server does (`_connections`, `_server`), so close() still waits for it. `remoteAddress` is the
 * peer's address (undefined on a Unix socket).
 *
 * The listening handle's `onconnection`, `_connections` and the socket's `_server` and `handle`
 * option are undocumented, though stable for years: they are what net.Server's own onconnection
 * does. test/engine/client-socket.test.ts fails if a Node release changes them. Returns false, and
 * leaves `server` as it is (its paused sockets reach the 'connection' listener), when the handle
 * has no onconnection to replace, or is no libuv stream handle net.Socket could adopt: Bun's
 * net.Server has a `_handle.onconnection` too, but hands it Bun's own socket objects, which a
 * net.Socket built around them never reads (the connection hangs), so the handle's class decides.
 */
export function acceptWithOnread(
  server: net.Server,
  noDelay: boolean,
  accept: (source: (onread: net.OnReadOpts) => net.Socket, remoteAddress: string | undefined) => void,
): boolean {
  const internals = server as unknown as { _handle?: ListeningHandle | null; _connections: number };
  const listening = internals._handle;
  if (listening === null || listening === undefined || typeof listening.onconnection !== 'function' || typeof internals._connections !== 'number') return false;
  if (typeof listening.useUserBuffer !== 'function') return false;
  const nodeOnConnection = listening.onconnection;
  listening.onconnection = function (this: unknown, status: number, handle?: AcceptedHandle): void {
    // Errors (and anything unexpected) go the way Node handles them: an 'error' event on the server.
    if (status !== 0 || handle === undefined) return nodeOnConnection.call(this, status, handle);
    const tcp = typeof handle.setNoDelay === 'function';
    if (noDelay && tcp) handle.setNoDelay!(true);
    let remoteAddress: string | undefined;
    if (typeof handle.getpeername === 'function') {
      const peer: { address?: string } = {};
      if (handle.getpeername(peer) === 0) remoteAddress = peer.address;
    }
    accept((onread) => {
      const socket = new net.Socket({ handle, onread, readable: true, writable: true, noDelay: noDelay && tcp } as net.SocketConstructorOpts);
      internals._connections++;
      Object.assign(socket, { server, _server: server });
      return socket;
    }, remoteAddress);
  };
  return true;
}
