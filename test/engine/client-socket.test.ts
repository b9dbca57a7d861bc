// Client sockets read into a reused buffer (accept-onread.ts). Two things are guarded
// here: that building an accepted connection's socket with `onread` in place of net.Server still works
// on this Node (it relies on the listening handle's undocumented `onconnection`, the server's
// `_connections` and the socket's `handle` option), and that bytes the engine keeps past a read
// (writes queued on a slow backend) are never overwritten by the next read, nor, once the connection
// has closed and its buffer has gone back on the shelf (read-buffers.ts), by the next connection's.

import { expect } from 'chai';
import net from 'node:net';
import { once } from 'node:events';
import { serialize } from 'pg-protocol';
import { acceptWithOnread } from '../../src/engine/accept-onread.js';
import { ReadBufferShelf, smallReadBuffers } from '../../src/engine/read-buffers.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

describe('engine: client sockets read with onread', function () {
  this.timeout(60_000);

  describe('acceptWithOnread (guards the undocumented net internals it uses)', () => {
    it('gives each accepted connection one socket that reads into the given buffer, and the server still counts it', async () => {
      const buf = Buffer.alloc(16);
      const reads: { n: number; same: boolean; bytes: Buffer }[] = [];
      let made: net.Socket | null = null;
      let peer: string | undefined;
      let viaServer = 0;
      const server = net.createServer({ pauseOnConnect: true }, () => viaServer++);
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      const hooked = acceptWithOnread(server, true, (source, remoteAddress) => {
        peer = remoteAddress;
        made = source({
          buffer: buf,
          callback: (n, b) => {
            reads.push({ n, same: b === buf, bytes: Buffer.from(b.subarray(0, n)) });
            made!.write(Buffer.from(b.subarray(0, n)).reverse());
            return true;
          },
        });
      });
      expect(hooked).to.equal(true);
      const { port } = server.address() as net.AddressInfo;
      const client = net.connect(port, '127.0.0.1');
      const echoed: Buffer[] = [];
      client.on('data', (d: Buffer) => echoed.push(d));
      await once(client, 'connect');
      // More than the buffer holds: the callback sees it in buffer-sized reads, always the same buffer.
      const sent = Buffer.from('abcdefghijklmnopqrstuvwxyz0123456789');
      client.write(sent);
      while (Buffer.concat(echoed).length < sent.length) await once(client, 'data');
      expect(viaServer).to.equal(0);
      expect(made).to.be.an.instanceOf(net.Socket);
      expect(peer).to.equal('127.0.0.1');
      expect(made!.remoteAddress).to.equal('127.0.0.1');
      expect(reads.every((r) => r.same && r.n <= buf.length)).to.equal(true);
      expect(reads.length).to.be.greaterThan(1);
      expect(Buffer.concat(reads.map((r) => r.bytes)).equals(sent)).to.equal(true);

      // close() waits for the connection, as for any accepted one.
      let closed = false;
      server.close(() => (closed = true));
      await new Promise((r) => setTimeout(r, 100));
      expect(closed).to.equal(false);
      const madeClosed = once(made!, 'close');
      client.end();
      await madeClosed;
      await new Promise((r) => setTimeout(r, 50));
      expect(closed).to.equal(true);
    });
  });

  describe('through the engine', () => {
    let rt: TestRuntime;

    before(async function () {
      rt = await startTestRuntime();
    });

    after(async function () {
      await rt?.stop();
    });

    /** Reads a response stream as it comes: DataRow values (one text column), ReadyForQuery and ErrorResponse counts. */
    class Responses {
      values: string[] = [];
      ready = 0;
      errors = 0;
      private rest = Buffer.alloc(0);

      add(chunk: Buffer): void {
        const stream = this.rest.length > 0 ? Buffer.concat([this.rest, chunk]) : chunk;
        let pos = 0;
        while (pos + 5 <= stream.length) {
          const type = stream[pos]!;
          const end = pos + 1 + stream.readInt32BE(pos + 1);
          if (end > stream.length) break;
          if (type === 0x44) {
            const len = stream.readInt32BE(pos + 7);
            this.values.push(stream.toString('utf8', pos + 11, pos + 11 + len));
          } else if (type === 0x5a) this.ready++;
          else if (type === 0x45) this.errors++;
          pos = end;
        }
        this.rest = Buffer.from(stream.subarray(pos));
      }
    }

    /** A session whose client sends `n` queries far ahead of a backend blocked writing answers; `abandon` leaves mid-way. */
    async function sendFarAhead(n: number, abandon = false): Promise<void> {
      const conn = net.connect(rt.port, rt.host);
      const responses = new Responses();
      conn.on('data', (d: Buffer) => responses.add(d));
      let closed = false;
      const ended = once(conn, 'close').then(() => (closed = true));
      await once(conn, 'connect');
      conn.write(serialize.startup({ user: 'postgres', database: 'postgres' }));
      while (responses.ready === 0 && !closed) await Promise.race([once(conn, 'data'), ended]);
      expect(responses.ready).to.equal(1);
      responses.ready = 0;
      // The client stops reading; each answer is over 8 kB, so PostgreSQL soon blocks writing and stops
      // reading; each query is 3 kB, so the engine's writes to PostgreSQL queue up (12 MB in all, more
      // than socket buffers hold) while the client's bytes keep coming in reads they refer to.
      conn.pause();
      const N = n;
      const text = (i: number): string => `<${i}>`.repeat(3000 / `<${i}>`.length);
      const queries: Buffer[] = [];
      for (let i = 0; i < N; i++) queries.push(serialize.query(`SELECT '${text(i)}' || repeat('x', 8000) || ':${i}'`));
      // Many small writes: the engine reads them in many reads, which the queued writes refer to.
      for (let i = 0; i < N; i += 50) conn.write(Buffer.concat(queries.slice(i, i + 50)));
      await new Promise((r) => setTimeout(r, 500));
      if (abandon) {
        // Gone with megabytes of its queries still queued for PostgreSQL, read into buffers that
        // must not go back on the shelf while those writes refer to them.
        conn.destroy();
        await ended;
        return;
      }
      conn.resume();
      while (responses.ready < N && responses.errors === 0) {
        // A corrupted stream ends in FATAL 08P01 and a closed connection.
        if (closed) expect.fail(`the engine closed the connection after ${responses.ready} answers`);
        await Promise.race([once(conn, 'data'), ended]);
      }
      expect(responses.errors).to.equal(0);
      expect(responses.ready).to.equal(N);
      expect(responses.values.length).to.equal(N);
      const expected = (i: number): string => `${text(i)}${'x'.repeat(8000)}:${i}`;
      for (let i = 0; i < N; i++) if (responses.values[i] !== expected(i)) expect.fail(`answer ${i} is ${responses.values[i]!.slice(0, 40)}...`);
      conn.end();
    }

    it('a client that sends far ahead of a blocked backend: every query arrives intact, in order', async () => {
      await sendFarAhead(4000);
    });

    it('the next sessions, on read buffers earlier sessions gave back, also get every query intact', async () => {
      await Promise.all([sendFarAhead(2000, true), sendFarAhead(2000, true)]);
      await Promise.all([sendFarAhead(2000), sendFarAhead(2000)]);
    });

    it('a closed connection puts its read buffer back on the shelf for the next one', async () => {
      const session = async (): Promise<void> => {
        const conn = net.connect(rt.port, rt.host);
        const closed = once(conn, 'close');
        conn.on('data', () => conn.end(serialize.end()));
        await once(conn, 'connect');
        conn.write(serialize.startup({ user: 'postgres', database: 'postgres' }));
        await closed;
        await new Promise((r) => setTimeout(r, 50)); // the engine's side closes after ours
      };
      await session();
      const shelved = smallReadBuffers.count;
      expect(shelved).to.be.greaterThan(0);
      await session();
      await session();
      expect(smallReadBuffers.count).to.equal(shelved);
    });
  });

  describe('ReadBufferShelf', () => {
    it('hands back what it was given, of its own size only, up to its maximum', () => {
      const shelf = new ReadBufferShelf(16, 2);
      const a = shelf.take();
      expect(a.length).to.equal(16);
      shelf.give(a);
      expect(shelf.take()).to.equal(a);
      shelf.give(Buffer.alloc(32));
      expect(shelf.count).to.equal(0);
      for (const b of [shelf.take(), shelf.take(), shelf.take()]) shelf.give(b);
      expect(shelf.count).to.equal(2);
    });
  });
});
