// The Kubernetes side of the operator: the API clients it uses, built once from a KubeConfig, and the
// few facts about failed calls a controller switches on (not found, conflict). Custom objects come back
// from CustomObjectsApi as plain JSON (string timestamps); controllers parse them with the zod schemas.

import {
  ApiException,
  AppsV1Api,
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  PatchStrategy,
  PolicyV1Api,
  setHeaderOptions,
  type KubeConfig,
  type KubernetesObject,
} from '@kubernetes/client-node';
import { GROUP, VERSION } from './crds/index.js';

export interface Kube {
  kc: KubeConfig;
  core: CoreV1Api;
  custom: CustomObjectsApi;
  coordination: CoordinationV1Api;
  apps: AppsV1Api;
  policy: PolicyV1Api;
}

export function makeKube(kc: KubeConfig): Kube {
  return {
    kc,
    core: kc.makeApiClient(CoreV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    coordination: kc.makeApiClient(CoordinationV1Api),
    apps: kc.makeApiClient(AppsV1Api),
    policy: kc.makeApiClient(PolicyV1Api),
  };
}

/** PATCH defaults to JSON patch in client-node; our patches are merge patches (RFC 7386). */
export const MERGE_PATCH = setHeaderOptions('Content-Type', PatchStrategy.MergePatch);

/** Where our custom objects live, for CustomObjectsApi calls. */
export function pgxResource(plural: 'runtimes' | 'templates' | 'branches'): { group: string; version: string; plural: string } {
  return { group: GROUP, version: VERSION, plural };
}

/** A custom object as read from the API: metadata typed, the rest parsed by a zod schema before use. */
export interface CustomObject extends KubernetesObject {
  spec?: unknown;
  status?: unknown;
}

export function httpCode(err: unknown): number | null {
  return err instanceof ApiException ? err.code : null;
}

export const isNotFound = (err: unknown): boolean => httpCode(err) === 404;
export const isConflict = (err: unknown): boolean => httpCode(err) === 409;

/** The message of a failed call, from the Status body when there is one (it says what was wrong). */
export function kubeMessage(err: unknown): string {
  if (err instanceof ApiException) {
    try {
      const body = (typeof err.body === 'string' ? JSON.parse(err.body) : err.body) as { message?: unknown };
      if (typeof body?.message === 'string') return `${err.code}: ${body.message}`;
    } catch {
      // not JSON: the code says enough
    }
    return `HTTP ${err.code}`;
  }
  return err instanceof Error ? err.message : String(err);
}

/** "namespace/name", the key of the work queues and the informer caches. */
export function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

export function splitKey(key: string): { namespace: string; name: string } {
  const i = key.indexOf('/');
  return { namespace: key.slice(0, i), name: key.slice(i + 1) };
}
