// The Kubernetes API double (test/helpers/kube-api) in a process of its own, as an API server is: the
// operator under measurement shares no event loop with it, so the double's JSON work and watch fan-out
// are not counted as the operator's, and vice versa. The parent gets a kubeconfig file and, on request,
// the double's request log (verb, resource, status and server time of every request).

import { fork, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';
import { fileURLToPath } from 'node:url';
import { KubeConfig } from '@kubernetes/client-node';
import { PgxError } from '../../src/errors.js';
import type { RequestRecord } from '../../test/helpers/kube-api/index.js';
import type { Cleanup } from './cleanup.js';

export interface KubeApiProcess {
  pid: number;
  url: string;
  kubeconfigPath: string;
  kubeConfig(): KubeConfig;
  requests(): Promise<RequestRecord[]>;
  stop(): Promise<void>;
}

export async function startKubeApiProcess(cleanup: Cleanup): Promise<KubeApiProcess> {
  const child: ChildProcess = fork(path.join(path.dirname(fileURLToPath(import.meta.url)), 'kube-api-child.js'), [], { stdio: ['ignore', 'inherit', 'inherit', 'ipc'] });
  let exited = false;
  const exit = new Promise<void>((resolve) => child.once('exit', () => ((exited = true), resolve())));
  const stop = async (): Promise<void> => {
    if (exited) return;
    child.send('stop');
    await Promise.race([exit, sleep(5_000)]);
    if (!exited) child.kill('SIGKILL');
  };
  cleanup.add('Kubernetes API double', stop);
  const ready = await Promise.race([
    new Promise<{ kubeconfigPath: string; url: string }>((resolve) => child.once('message', (m) => resolve(m as { kubeconfigPath: string; url: string }))),
    exit.then(() => {
      throw new PgxError('INTERNAL', 'the Kubernetes API double exited before it was ready');
    }),
  ]);
  return {
    pid: child.pid ?? 0,
    url: ready.url,
    kubeconfigPath: ready.kubeconfigPath,
    kubeConfig() {
      const kc = new KubeConfig();
      kc.loadFromFile(ready.kubeconfigPath);
      return kc;
    },
    requests: () =>
      new Promise((resolve) => {
        child.once('message', (m) => resolve((m as { requests: RequestRecord[] }).requests));
        child.send('requests');
      }),
    stop,
  };
}
