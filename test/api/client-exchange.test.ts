// The API client's own HTTP exchange (api/exchange.ts, node:http) against small servers of this test:
// what it sends, an answer in pieces, an error body, a refused connection and a server that never
// answers. The client's use against a real runtime is in api.test.ts and the CLI and MCP tests.

import { expect } from 'chai';
import http from 'node:http';
import net from 'node:net';
import type { AddressInfo } from 'node:net';
import { ApiClient, ApiClientError } from '../../src/api/client.js';

/** A server on a free loopback port; closed by the returned function. */
async function listen(server: http.Server | net.Server): Promise<{ url: string; close: () => Promise<void> }> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return { url: `http://127.0.0.1:${port}`, close: () => new Promise((resolve) => server.close(() => resolve())) };
}

async function failure(p: Promise<unknown>): Promise<ApiClientError> {
  const err = await p.then(() => null, (e: unknown) => e);
  expect(err).to.be.instanceOf(ApiClientError);
  return err as ApiClientError;
}

describe('api: the client over node:http', function () {
  this.timeout(10_000);

  it('sends method, token, body and its length, and reads an answer that comes in pieces', async () => {
    let seen: { method?: string; url?: string; headers: http.IncomingHttpHeaders; body: string } = { headers: {}, body: '' };
    const server = http.createServer((req, res) => {
      let body = '';
      req.setEncoding('utf8');
      req.on('data', (c: string) => (body += c));
      req.on('end', () => {
        seen = { method: req.method, url: req.url, headers: req.headers, body };
        // "é" split between two writes: the answer is read as UTF-8 once whole.
        const answer = Buffer.from(JSON.stringify({ name: 'tdb_app__é', template: 'app' }));
        const at = answer.indexOf(0xc3) + 1;
        res.writeHead(201, { 'content-type': 'application/json' });
        res.write(answer.subarray(0, at));
        setTimeout(() => res.end(answer.subarray(at)), 20);
      });
    });
    const s = await listen(server);
    try {
      const client = new ApiClient({ url: `${s.url}/v1/`, token: 'sekrit' });
      const made = await client.createDatabase({ template: 'app', name: 'tdb_app__é' });
      expect(made).to.deep.include({ name: 'tdb_app__é', template: 'app' });
      expect(seen.method).to.equal('POST');
      expect(seen.url).to.equal('/v1/databases');
      expect(seen.headers.authorization).to.equal('Bearer sekrit');
      expect(seen.headers['content-type']).to.equal('application/json');
      expect(Number(seen.headers['content-length'])).to.equal(Buffer.byteLength(seen.body));
      expect(JSON.parse(seen.body)).to.deep.equal({ template: 'app', name: 'tdb_app__é' });
    } finally {
      await s.close();
    }
  });

  it("an error answer is the body's code, SQLSTATE, message and hint", async () => {
    const server = http.createServer((_req, res) => {
      res.writeHead(409, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ code: 'DUPLICATE_DATABASE', sqlstate: '42P04', message: 'database "x" already exists', hint: 'pick another name' }));
    });
    const s = await listen(server);
    try {
      const err = await failure(new ApiClient({ url: s.url }).status());
      expect(err.status).to.equal(409);
      expect(err.code).to.equal('DUPLICATE_DATABASE');
      expect(err.sqlstate).to.equal('42P04');
      expect(err.hint).to.equal('pick another name');
    } finally {
      await s.close();
    }
  });

  it('no runtime at the URL: CANNOT_CONNECT_NOW naming the socket error', async () => {
    const s = await listen(http.createServer());
    await s.close(); // the port is free again: connections to it are refused
    const err = await failure(new ApiClient({ url: s.url }).status());
    expect(err.code).to.equal('CANNOT_CONNECT_NOW');
    expect(err.message).to.equal(`cannot reach the PGX API at ${s.url} (ECONNREFUSED)`);
  });

  it('a server that accepts and never answers: CANNOT_CONNECT_NOW at the deadline, the socket closed', async () => {
    const sockets: net.Socket[] = [];
    const server = net.createServer((socket) => {
      sockets.push(socket);
      socket.resume(); // read the request and, once the client gives up, its end
    });
    const s = await listen(server);
    try {
      const err = await failure(new ApiClient({ url: s.url, timeoutMs: 200 }).status());
      expect(err.code).to.equal('CANNOT_CONNECT_NOW');
      expect(err.message).to.equal(`no answer from the PGX API at ${s.url} within 200 ms`);
      expect(sockets).to.have.length(1);
      await new Promise<void>((resolve) => (sockets[0]!.closed ? resolve() : sockets[0]!.once('close', () => resolve())));
    } finally {
      for (const socket of sockets) socket.destroy();
      await s.close();
    }
  });
});
