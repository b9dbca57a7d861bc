// Runtime pods as the operator sees them: the Pods labelled with their Runtime's name, whether each is
// ready, and how to reach it: its control API (to build templates and create databases) and its engine
// (what a Branch's Secret names). In a cluster that is http://<podIP>:<apiPort> and the pod's DNS name
// under the Runtime's headless Service. Annotations on the Pod override both, which is how tests (all
// runtimes on 127.0.0.1, each on its own ports) and unusual networks point the operator elsewhere, but
// only when the operator was started with --pod-address-overrides: the API URL is where the operator
// sends the Runtime's API token, and patching a pod's annotations (which needs no exec and no Secret
// access) must not be a way to have the token sent to one's own server.

import type { V1Pod } from '@kubernetes/client-node';
import { ApiClient } from '../api/client.js';
import type { Kube } from './kube.js';

export const RUNTIME_LABEL = 'pgx.dev/runtime';
export const API_URL_ANNOTATION = 'pgx.dev/api-url';
export const ENGINE_HOST_ANNOTATION = 'pgx.dev/engine-host';
export const ENGINE_PORT_ANNOTATION = 'pgx.dev/engine-port';

/** The Secret of a Runtime holding its API token (key api-token) and admin password. */
export function runtimeSecretName(runtime: string): string {
  return `${runtime}-pgx`;
}
export const API_TOKEN_KEY = 'api-token';

/** The headless Service giving each runtime pod a DNS name. */
export function headlessServiceName(runtime: string): string {
  return `${runtime}-pods`;
}

export interface PodNetwork {
  /** The runtime's API port inside the pod (pgx start --api-port). */
  apiPort: number;
  /** The engine's port inside the pod (pgx start --port). */
  enginePort: number;
  /** The metrics-only port inside the pod (pgx start --metrics-port): /metrics without the API token. */
  metricsPort: number;
  /** Cluster DNS suffix. */
  clusterDomain: string;
  /** Honour the annotations pgx.dev/api-url, engine-host and engine-port (--pod-address-overrides; off by default). */
  addressOverrides: boolean;
}

export const DEFAULT_POD_NETWORK: PodNetwork = { apiPort: 7432, enginePort: 6432, metricsPort: 9187, clusterDomain: 'cluster.local', addressOverrides: false };

/** The pod's address annotations, when the operator honours them; else none. */
function overrides(pod: V1Pod, net: PodNetwork): Record<string, string> {
  return net.addressOverrides ? (pod.metadata?.annotations ?? {}) : {};
}

export function podReady(pod: V1Pod): boolean {
  if (pod.metadata?.deletionTimestamp) return false;
  return pod.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True') ?? false;
}

function podRuntime(pod: V1Pod): string | undefined {
  return pod.metadata?.labels?.[RUNTIME_LABEL];
}

/** The pod's control API base URL, or null while it has no IP and no override. */
export function podApiUrl(pod: V1Pod, net: PodNetwork): string | null {
  const override = overrides(pod, net)[API_URL_ANNOTATION];
  if (override) return override;
  return pod.status?.podIP ? `http://${pod.status.podIP}:${net.apiPort}` : null;
}

/** Where clients reach the database on this pod: stable across pod restarts (DNS, not the IP). */
export function podEngineEndpoint(pod: V1Pod, net: PodNetwork): { host: string; port: number } {
  const a = overrides(pod, net);
  const runtime = podRuntime(pod) ?? '';
  const host = a[ENGINE_HOST_ANNOTATION] ?? `${pod.metadata!.name}.${headlessServiceName(runtime)}.${pod.metadata!.namespace}.svc.${net.clusterDomain}`;
  const port = a[ENGINE_PORT_ANNOTATION] ? Number(a[ENGINE_PORT_ANNOTATION]) : net.enginePort;
  return { host, port };
}

/** Reads a Runtime's API token from its Secret; null when the Secret or key is missing. */
export async function runtimeToken(kube: Kube, namespace: string, runtime: string): Promise<string | null> {
  try {
    const secret = await kube.core.readNamespacedSecret({ name: runtimeSecretName(runtime), namespace });
    const b64 = secret.data?.[API_TOKEN_KEY];
    return b64 ? Buffer.from(b64, 'base64').toString('utf8').trim() : null;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return null;
    throw err;
  }
}

export function podClient(url: string, token: string | null): ApiClient {
  return new ApiClient({ url, token, timeoutMs: 30_000 });
}
