// Request bodies against a real `node bin/pgx.js start` (its own process, so /proc/<pid>/status shows
// the runtime's memory alone): a request without the token is answered 401 before its body is read,
// while the client is still sending, and many such 16 MiB bodies at once leave node's RSS flat; bodies
// over their route's cap get 413 in the API's JSON error shape, declared or streamed (chunked).

import { expect } from 'chai';
import { spawn, type ChildProcess } from 'node:child_process';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { PATHS } from '../../src/api/paths.js';
import { freePort } from '../helpers/commands.js';
import { freshDataDir } from '../helpers/runtime.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const TOKEN = 'body-limits-token-0123456789';
const MiB = 1024 * 1024;

interface Sent {
  status: number;
  body: Record<string, unknown>;
  /** Body bytes the client had handed to its socket when the answer's head arrived. */
  sentAtAnswer: number;
  /** Whether the server sent 100 Continue. */
  continued: boolean;
}

/** POSTs `total` bytes of body (declared, or chunked), writing until the server answers. */
function send(port: number, urlPath: string, total: number, opts: { token?: string; chunked?: boolean; expectContinue?: boolean; body?: Buffer } = {}): Promise<Sent> {
  return new Promise((resolve, reject) => {
    const headers: Record<string, string | number> = { 'content-type': 'application/json' };
    if (opts.token) headers.authorization = `Bearer ${opts.token}`;
    if (!opts.chunked) headers['content-length'] = opts.body?.length ?? total;
    if (opts.expectContinue) headers.expect = '100-continue';
    const req = http.request({ host: '127.0.0.1', port, method: 'POST', path: urlPath, headers, agent: false });
    const chunk = Buffer.alloc(64 * 1024, 0x20);
    let sent = 0;
    let answered = false;
    let continued = false;
    const timer = setTimeout(() => {
      req.destroy();
      reject(new Error(`no answer to POST ${urlPath} within 30 s (sent ${sent} of ${total} bytes)`));
    }, 30_000);
    const pump = (): void => {
      if (opts.body) {
        sent = opts.body.length;
        req.end(opts.body);
        return;
      }
      while (!answered && sent < total) {
        const n = Math.min(chunk.length, total - sent);
        sent += n;
        if (!req.write(chunk.subarray(0, n))) {
          req.once('drain', pump);
          return;
        }
      }
      if (!answered) req.end();
    };
    req.on('response', (res) => {
      answered = true;
      const sentAtAnswer = sent;
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => {
        clearTimeout(timer);
        req.destroy();
        const text = Buffer.concat(parts).toString('utf8');
        resolve({ status: res.statusCode ?? 0, body: text.length > 0 ? (JSON.parse(text) as Record<string, unknown>) : {}, sentAtAnswer, continued });
      });
    });
    // Once answered, the server may close while we still write: that is the point, not a failure.
    req.on('error', (err) => {
      if (!answered) {
        clearTimeout(timer);
        reject(err);
      }
    });
    if (opts.expectContinue) req.once('continue', () => ((continued = true), pump()));
    else pump();
  });
}

function rssKb(pid: number): number {
  const m = /^VmRSS:\s+(\d+) kB$/m.exec(fs.readFileSync(`/proc/${pid}/status`, 'utf8'));
  if (!m) throw new Error(`no VmRSS for ${pid}`);
  return Number(m[1]);
}

describe('api: request bodies (token first, caps per route)', function () {
  this.timeout(120_000);
  let child: ChildProcess;
  let apiPort: number;
  let work: string;

  before(async function () {
    const dataDir = await freshDataDir();
    work = path.dirname(dataDir);
    const socketDir = path.join(work, 'sock');
    fs.mkdirSync(socketDir);
    fs.chmodSync(socketDir, 0o755);
    const tokenFile = path.join(work, 'token');
    fs.writeFileSync(tokenFile, `${TOKEN}\n`, { mode: 0o600 });
    apiPort = await freePort();
    const port = await freePort();
    child = spawn(
      process.execPath,
      ['bin/pgx.js', 'start', '--data-dir', dataDir, '--port', String(port), '--socket-dir', socketDir, '--api-port', String(apiPort), '--api-token-file', tokenFile, '--pool-size', '0', '--log-format', 'json', '--log-level', 'warn'],
      { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'], env: { ...process.env, PGX_CONTAINER: '', PGX_API_TOKEN: '' } },
    );
    const err: Buffer[] = [];
    child.stderr!.on('data', (b: Buffer) => err.push(b));
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`pgx start printed no ready line in 60 s:\n${Buffer.concat(err).toString()}`)), 60_000);
      createInterface({ input: child.stdout! }).on('line', (line) => {
        if (line.startsWith('PGX ready')) {
          clearTimeout(timer);
          resolve();
        }
      });
      child.once('exit', (code) => {
        clearTimeout(timer);
        reject(new Error(`pgx start exited (${code}):\n${Buffer.concat(err).toString()}`));
      });
    });
  });

  after(async function () {
    if (child && child.exitCode === null) {
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    }
    if (work) fs.rmSync(work, { recursive: true, force: true });
  });

  it('answers 401 before the body is sent, and many 16 MiB bodies at once leave its RSS flat', async function () {
    // Warm up the paths the test takes, so their first-use allocations are in the baseline.
    for (let i = 0; i < 3; i++) await send(apiPort, PATHS.templates, MiB);
    const before = rssKb(child.pid!);
    let peak = before;
    const sampler = setInterval(() => (peak = Math.max(peak, rssKb(child.pid!))), 20);
    const answers: Sent[] = [];
    try {
      for (let round = 0; round < 3; round++) {
        answers.push(
          ...(await Promise.all(
            Array.from({ length: 20 }, (_, i) =>
              send(apiPort, i % 2 === 0 ? PATHS.templates : PATHS.databases, 16 * MiB, { token: i % 4 === 1 ? 'wrong-token-0123456789' : undefined, chunked: i % 3 === 0 }),
            ),
          )),
        );
      }
    } finally {
      clearInterval(sampler);
    }
    const after = rssKb(child.pid!);
    if (process.env.PGX_TEST_LOG) console.log(`RSS ${before} kB before, peak ${peak} kB, ${after} kB after`);
    for (const a of answers) {
      expect(a.status).to.equal(401);
      expect(a.body).to.deep.include({ code: 'INVALID_AUTHORIZATION', sqlstate: '28000' });
      expect(a.body).to.have.all.keys('code', 'sqlstate', 'message', 'hint');
      // Answered while the client was still sending: the server did not wait for (or read) the body.
      expect(a.sentAtAnswer).to.be.lessThan(16 * MiB);
    }
    // 60 bodies of 16 MiB (960 MiB): before the fix node kept each one it read (+265 MB for 20).
    expect(peak - before, `RSS ${before} kB before, peak ${peak} kB, ${after} kB after`).to.be.lessThan(64 * 1024);
    expect(after - before, `RSS ${before} kB before, ${after} kB after`).to.be.lessThan(48 * 1024);
  });

  it('answers 401 to Expect: 100-continue without asking for the body', async function () {
    const a = await send(apiPort, PATHS.templates, 16 * MiB, { expectContinue: true });
    expect(a.status).to.equal(401);
    expect(a.continued).to.equal(false);
    expect(a.sentAtAnswer).to.equal(0);
  });

  it('answers 413 at once to a declared body over the route cap, in the JSON error shape', async function () {
    for (const [route, size] of [
      [PATHS.databases, 16 * MiB],
      [PATHS.templateImport, 16 * MiB],
      [PATHS.templates, 32 * MiB],
    ] as const) {
      const a = await send(apiPort, route, size, { token: TOKEN });
      expect(a.status, route).to.equal(413);
      expect(a.body).to.have.all.keys('code', 'sqlstate', 'message', 'hint');
      expect(a.body).to.include({ code: 'PROTOCOL_VIOLATION', sqlstate: '08P01' });
      expect(a.body.message).to.match(/exceeds \d+ bytes/);
      expect(a.sentAtAnswer).to.be.lessThan(size);
    }
  });

  it('answers 413 to a chunked body once it passes the cap, without reading the rest', async function () {
    const a = await send(apiPort, PATHS.databases, 16 * MiB, { token: TOKEN, chunked: true });
    expect(a.status).to.equal(413);
    expect(a.body).to.include({ code: 'PROTOCOL_VIOLATION', sqlstate: '08P01' });
    expect(a.sentAtAnswer).to.be.lessThan(16 * MiB);
  });

  it('holds at most 64 MiB of bodies at once: past it 429 / 53300 before the body is sent, and the budget comes back', async function () {
    // Four admitted scripts at the 16 MiB cap, each told 100 Continue and then sending nothing: 64 MiB held.
    const holders = await Promise.all(
      Array.from({ length: 4 }, () =>
        new Promise<http.ClientRequest>((resolve, reject) => {
          const req = http.request({
            host: '127.0.0.1',
            port: apiPort,
            method: 'POST',
            path: PATHS.templates,
            agent: false,
            headers: { authorization: `Bearer ${TOKEN}`, 'content-type': 'application/json', 'content-length': 16 * MiB, expect: '100-continue' },
          });
          req.once('continue', () => resolve(req));
          req.once('response', (res) => reject(new Error(`holder answered ${res.statusCode}`)));
          req.once('error', reject);
        }),
      ),
    );
    try {
      const refused = await send(apiPort, PATHS.templates, 16 * MiB, { token: TOKEN, expectContinue: true });
      expect(refused.status).to.equal(429);
      expect(refused.body).to.include({ code: 'TOO_MANY_CONNECTIONS', sqlstate: '53300' });
      expect(refused.continued).to.equal(false);
    } finally {
      for (const h of holders) h.destroy();
    }
    // The holders' bytes are given back when their connections close.
    const body = Buffer.from(JSON.stringify({ name: 'tpl_after_budget', sql: 'CREATE TABLE t (id int);' }));
    let after: Sent | undefined;
    for (let i = 0; i < 100 && (after === undefined || after.status === 429); i++) {
      if (after) await new Promise((r) => setTimeout(r, 100));
      after = await send(apiPort, PATHS.templates, body.length, { token: TOKEN, body });
    }
    expect(after!.status, JSON.stringify(after!.body)).to.equal(201);
  });

  it('still takes a large script with the token (3 MiB, under the 16 MiB cap of POST /v1/templates)', async function () {
    const sql = `-- ${'x'.repeat(3 * MiB)}\nCREATE TABLE big_script (id int);`;
    const body = Buffer.from(JSON.stringify({ name: 'tpl_big_script', sql }));
    const a = await send(apiPort, PATHS.templates, body.length, { token: TOKEN, body });
    expect(a.status, JSON.stringify(a.body)).to.equal(201);
    expect(a.body).to.include({ name: 'tpl_big_script', sealed: true });
  });
});
