// `pgx operator` as a process: --help, a usage error, and a run against the API double from a
// kubeconfig that takes the Lease, serves /readyz and stops cleanly on SIGTERM.

import { expect } from 'chai';
import { spawn, spawnSync } from 'node:child_process';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startKubeApi, type KubeApi } from '../helpers/kube-api/index.js';

const bin = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../../bin/pgx.js');

describe('pgx operator (command)', function () {
  this.timeout(60_000);
  let api: KubeApi;

  before(async () => {
    api = await startKubeApi();
  });
  after(async () => {
    await api.close();
  });

  it('prints --help and refuses bad options', () => {
    const help = spawnSync(process.execPath, [bin, 'operator', '--help'], { encoding: 'utf8' });
    expect(help.status).to.equal(0);
    expect(help.stdout).to.contain('--kubeconfig FILE').and.contain('--lease-name').and.contain('--metrics-port').and.contain('--pod-address-overrides');
    const bad = spawnSync(process.execPath, [bin, 'operator', '--metrics-port', 'x'], { encoding: 'utf8' });
    expect(bad.status).to.equal(2);
    expect(bad.stderr).to.equal("pgx operator: ports are integers from 0 to 65535\nRun 'pgx operator --help' for usage.\n");
  });

  it('runs from a kubeconfig, leads, answers /readyz and stops on SIGTERM', async () => {
    const port = await new Promise<number>((resolve) => {
      const probe = net.createServer().listen(0, '127.0.0.1', () => {
        const p = (probe.address() as net.AddressInfo).port;
        probe.close(() => resolve(p));
      });
    });
    const child = spawn(process.execPath, [bin, 'operator', '--kubeconfig', api.kubeconfigPath, '--metrics-port', String(port), '--log-format', 'json', '--identity', 'cli-test'], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stderr = '';
    const led = new Promise<void>((resolve) => {
      child.stderr.on('data', (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes('became leader')) resolve();
      });
    });
    const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));
    await led;
    const line = stderr.split('\n').find((l) => l.includes('became leader'))!;
    expect(JSON.parse(line)).to.include({ identity: 'cli-test', lease: 'default/pgx-operator' });
    const ready = await fetch(`http://127.0.0.1:${port}/readyz`);
    expect(ready.status).to.equal(200);
    const metrics = await (await fetch(`http://127.0.0.1:${port}/metrics`)).text();
    expect(metrics).to.match(/^pgx_operator_leader 1$/m);
    child.kill('SIGTERM');
    expect(await exited).to.equal(0);
  });
});
