// The metrics-only listener (pgx start --metrics-port): /metrics and the probes answer there without
// the API token, every control route is absent (404), and the API port still refuses /metrics and
// control routes without the token. A real runtime, real HTTP.

import { expect } from 'chai';
import { PATHS } from '../../src/api/paths.js';
import { parseStartArgs } from '../../src/cli/start.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const TOKEN = 'metrics-token-0123456789abcdef';

async function get(port: number, path: string, init: RequestInit = {}): Promise<{ status: number; text: string }> {
  const res = await fetch(`http://127.0.0.1:${port}${path}`, init);
  return { status: res.status, text: await res.text() };
}

describe('api: the metrics port', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  let apiPort: number;
  let metricsPort: number;

  before(async function () {
    rt = await startTestRuntime({ apiPort: 0, apiToken: TOKEN, metricsPort: 0, poolSize: 0 });
    apiPort = rt.runtime.api!.port;
    metricsPort = rt.runtime.metrics!.port;
    expect(metricsPort).to.be.greaterThan(0).and.not.equal(apiPort);
  });

  after(async function () {
    await rt?.stop();
  });

  it('serves /metrics, /healthz and /readyz without a token', async function () {
    const metrics = await get(metricsPort, PATHS.metrics);
    expect(metrics.status).to.equal(200);
    expect(metrics.text).to.match(/^pgx_/m);
    expect((await get(metricsPort, PATHS.healthz)).status).to.equal(200);
    expect((await get(metricsPort, PATHS.readyz)).status).to.equal(200);
  });

  it('has no control route: status, databases and templates answer 404, with or without the token', async function () {
    for (const path of [PATHS.status, PATHS.databases, PATHS.templates]) {
      expect((await get(metricsPort, path)).status, path).to.equal(404);
      expect((await get(metricsPort, path, { headers: { authorization: `Bearer ${TOKEN}` } })).status, `${path} with the token`).to.equal(404);
    }
    const create = await get(metricsPort, PATHS.databases, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify({ template: 'postgres' }) });
    expect(create.status).to.equal(404);
    expect(JSON.parse(create.text)).to.include({ code: 'FEATURE_NOT_SUPPORTED' });
  });

  it('takes GET only on /metrics', async function () {
    expect((await get(metricsPort, PATHS.metrics, { method: 'POST' })).status).to.equal(405);
  });

  it('leaves the API port as it was: /metrics and /v1/status need the token there', async function () {
    expect((await get(apiPort, PATHS.metrics)).status).to.equal(401);
    expect((await get(apiPort, PATHS.status)).status).to.equal(401);
    expect((await get(apiPort, PATHS.metrics, { headers: { authorization: `Bearer ${TOKEN}` } })).status).to.equal(200);
  });
});

describe('api: the metrics port without the API', function () {
  this.timeout(60_000);

  it('runs alone, with no control API at all', async function () {
    const rt = await startTestRuntime({ metricsPort: 0, poolSize: 0 });
    try {
      expect(rt.runtime.api).to.equal(undefined);
      expect((await get(rt.runtime.metrics!.port, PATHS.metrics)).status).to.equal(200);
      expect((await get(rt.runtime.metrics!.port, PATHS.status)).status).to.equal(404);
    } finally {
      await rt.stop();
    }
  });

  it('is read from --metrics-port and --metrics-host', function () {
    const config = parseStartArgs(['--data-dir', '/tmp/x', '--metrics-port', '9187', '--metrics-host', '0.0.0.0']);
    expect(config.metricsPort).to.equal(9187);
    expect(config.metricsHost).to.equal('0.0.0.0');
    expect(parseStartArgs(['--data-dir', '/tmp/x']).metricsPort).to.equal(null);
  });
});
