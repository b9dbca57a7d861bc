// A tokenless API on loopback (the `npm start` default) against a web page the developer visits: by DNS
// rebinding (the request names the page's host, `Host: rebind.attacker.example:PORT`) or by a cross-site
// POST straight to 127.0.0.1 (the browser adds its page's Origin, and may send a body of no type or
// text/plain without a CORS preflight). Each is refused before it runs anything, and nothing is made,
// while pgx's own client still works. A non-loopback listener with a token (a Kubernetes pod) still
// answers its probes and its callers under the pod's IP. A real runtime, real HTTP.

import { expect } from 'chai';
import fs from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { ApiClient } from '../../src/api/client.js';
import { PATHS, pathFor } from '../../src/api/paths.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'loopback-token-0123456789abcdef';

interface Answer {
  status: number;
  headers: http.IncomingHttpHeaders;
  body: Record<string, unknown>;
}

/** One request with exactly these headers (fetch would not let a test choose Host). */
function send(port: number, method: string, urlPath: string, headers: Record<string, string>, body?: string): Promise<Answer> {
  return new Promise((resolve, reject) => {
    const req = http.request({ host: '127.0.0.1', port, method, path: urlPath, headers, agent: false }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (b: Buffer) => parts.push(b));
      res.on('end', () => {
        const text = Buffer.concat(parts).toString('utf8');
        const json = (res.headers['content-type'] ?? '').startsWith('application/json') && text.length > 0;
        resolve({ status: res.statusCode ?? 0, headers: res.headers, body: json ? (JSON.parse(text) as Record<string, unknown>) : {} });
      });
    });
    req.on('error', reject);
    req.end(body);
  });
}

describe('api: a loopback API answers only loopback callers', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let port: number;
  let api: ApiClient;
  let scratch: string;

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, poolSize: 0 });
    port = rt.runtime.api!.port;
    api = new ApiClient({ url: `http://127.0.0.1:${port}` });
    scratch = fs.mkdtempSync(path.join(os.tmpdir(), 'pgx-loopback-'));
    // PostgreSQL may run as another OS user (pgx, under root): let the payload write here, so only the fix stops it.
    fs.chmodSync(scratch, 0o733);
  });

  after(async function () {
    await rt?.stop();
    if (scratch) fs.rmSync(scratch, { recursive: true, force: true });
  });

  /** The security review's payload: a template whose script runs a program as the runtime's user. */
  function payload(name: string, marker: string): string {
    return JSON.stringify({ name, sql: `COPY (SELECT 1) TO PROGRAM 'touch ${marker}';` });
  }

  async function templateNames(): Promise<string[]> {
    return (await api.listTemplates()).map((t) => t.name);
  }

  it('refuses a request naming another Host (DNS rebinding): 403, nothing made, nothing run', async function () {
    const marker = path.join(scratch, 'rebind');
    const res = await send(port, 'POST', PATHS.templates, { host: `rebind.attacker.example:${port}`, 'content-type': 'application/json' }, payload('tpl_rebind', marker));
    expect(res.status).to.equal(403);
    expect(res.body).to.include({ code: 'INSUFFICIENT_PRIVILEGE', sqlstate: '42501' });
    expect(res.body.hint).to.include(`http://127.0.0.1:${port}`);
    expect(fs.existsSync(marker)).to.equal(false);
    expect(await templateNames()).to.not.include('tpl_rebind');
    // Reads too: the page would read them across origins once its name points here.
    expect((await send(port, 'GET', PATHS.status, { host: `rebind.attacker.example:${port}` })).status).to.equal(403);
    expect((await send(port, 'GET', PATHS.status, { host: `127.attacker.example:${port}` })).status).to.equal(403);
  });

  it('refuses a request from another web origin (cross-site POST): 403, nothing changed', async function () {
    await api.buildTemplate({ name: 'tpl_kept', sql: 'CREATE TABLE t (i int);' });
    // A route with no body, so no Content-Type rule can stop it: only the Origin tells.
    const unseal = await send(port, 'POST', pathFor(PATHS.templateUnseal, { name: 'tpl_kept' }), { host: `127.0.0.1:${port}`, origin: 'https://attacker.example' });
    expect(unseal.status).to.equal(403);
    expect(unseal.body).to.include({ code: 'INSUFFICIENT_PRIVILEGE', sqlstate: '42501' });
    expect((await api.listTemplates()).find((t) => t.name === 'tpl_kept')).to.include({ sealed: true });
    // Nor does the API grant the CORS preflight a page would need to send JSON.
    const preflight = await send(port, 'OPTIONS', PATHS.templates, { host: `127.0.0.1:${port}`, origin: 'https://attacker.example', 'access-control-request-method': 'POST' });
    expect(preflight.status).to.be.at.least(400);
    expect(preflight.headers['access-control-allow-origin']).to.equal(undefined);
  });

  it('takes request bodies only as application/json, which a page cannot send across sites unasked', async function () {
    const marker = path.join(scratch, 'csrf');
    // What a no-CORS fetch sends: a Blob or ArrayBuffer body has no Content-Type, a string one text/plain.
    for (const type of [undefined, 'text/plain;charset=UTF-8']) {
      const headers: Record<string, string> = { host: `127.0.0.1:${port}` };
      if (type !== undefined) headers['content-type'] = type;
      const res = await send(port, 'POST', PATHS.templates, headers, payload('tpl_csrf', marker));
      expect(res.status, String(type)).to.equal(415);
      expect(res.body).to.include({ code: 'PROTOCOL_VIOLATION', sqlstate: '08P01' });
    }
    expect(fs.existsSync(marker)).to.equal(false);
    expect(await templateNames()).to.not.include('tpl_csrf');
  });

  it('still serves its own clients: ApiClient, localhost, [::1]-style Host, and its own Origin', async function () {
    const made = await api.buildTemplate({ name: 'tpl_legit', sql: 'CREATE TABLE t (i int);' });
    expect(made).to.include({ name: 'tpl_legit', sealed: true });
    for (const host of [`localhost:${port}`, `127.0.0.1:${port}`, `[::1]:${port}`, 'localhost']) {
      expect((await send(port, 'GET', PATHS.status, { host })).status, host).to.equal(200);
    }
    const own = await send(port, 'GET', PATHS.healthz, { host: `localhost:${port}`, origin: `http://localhost:${port}` });
    expect(own.status).to.equal(200);
  });
});

describe('api: a non-loopback API with a token (a pod) answers under any Host', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let port: number;

  before(async function () {
    // As the operator starts a runtime pod: --api-host 0.0.0.0 with --api-token-file.
    rt = await startTestRuntime({ apiPort: 0, apiHost: '0.0.0.0', apiToken: TOKEN, poolSize: 0 });
    port = rt.runtime.api!.port;
  });

  after(async function () {
    await rt?.stop();
  });

  it("answers the kubelet's probes and the operator under the pod's IP", async function () {
    const host = `10.1.2.3:${port}`;
    expect((await send(port, 'GET', PATHS.healthz, { host })).status).to.equal(200);
    expect((await send(port, 'GET', PATHS.readyz, { host })).status).to.equal(200);
    expect((await send(port, 'GET', PATHS.status, { host, authorization: `Bearer ${TOKEN}` })).status).to.equal(200);
    expect((await send(port, 'GET', PATHS.status, { host })).status).to.equal(401);
  });
});
