// Root hooks of the control-plane suite (mocha --require dist/test/kube/hooks.js): one real control
// plane and one test node for the whole run, the CRDs from crds/ installed with the real kubectl
// (`kubectl apply -f crds/`, as docs/operator.md says) and Established before any test starts.

import { execFileSync } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { startControlPlane, type ControlPlane } from '../helpers/control-plane/index.js';
import { startNode, type Node } from '../helpers/control-plane/kubelet.js';
import { kubeTools, root } from '../operator/kube-tools.js';

let current: { cp: ControlPlane; node: Node } | undefined;

export function plane(): { cp: ControlPlane; node: Node } {
  if (!current) throw new Error('the control plane is not running: run the suite with --require dist/test/kube/hooks.js (npm run test:kube)');
  return current;
}

/** kubectl as the cluster admin, in the checkout; throws with its output on a non-zero exit. */
export function kubectl(...args: string[]): string {
  return kubectlOn(plane().cp, ...args);
}

export function kubectlOn(cp: ControlPlane, ...args: string[]): string {
  return execFileSync(kubeTools().kubectl, args, { cwd: root, encoding: 'utf8', env: { ...process.env, KUBECONFIG: cp.adminKubeconfig, HOME: os.tmpdir() }, stdio: ['ignore', 'pipe', 'pipe'] });
}

/** `kubectl apply -f crds/`, as docs/operator.md says, and waits until the API server serves them. */
export function installCrds(cp: ControlPlane): void {
  kubectlOn(cp, 'apply', '-f', 'crds/');
  kubectlOn(cp, 'wait', '--for=condition=Established', '--timeout=60s', 'crd/runtimes.pgx.dev', 'crd/templates.pgx.dev', 'crd/branches.pgx.dev');
}

export const mochaHooks = {
  async beforeAll(this: Mocha.Context) {
    this.timeout(300_000);
    const cp = await startControlPlane();
    try {
      const node = await startNode(cp.kubeConfig(), path.join(cp.dir, 'node'));
      current = { cp, node };
      installCrds(cp);
    } catch (err) {
      await current?.node.stop();
      await cp.stop();
      current = undefined;
      throw err;
    }
  },
  async afterAll(this: Mocha.Context) {
    this.timeout(120_000);
    if (!current) return;
    await current.node.stop();
    await current.cp.stop();
    current = undefined;
  },
};
