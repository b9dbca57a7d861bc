// What a Template's pods build from, read from the cluster: inline SQL, a ConfigMap key of SQL, or a
// source database URL from a Secret plus a masking script (inline or from a ConfigMap). A missing
// ConfigMap, Secret or key is a reason a person can act on, never an exception.

import type { Kube } from '../kube.js';
import { isNotFound } from '../kube.js';
import type { TemplateSpec } from '../crds/index.js';

export type BuildPlan = { kind: 'sql'; sql: string } | { kind: 'import'; sourceUrl: string; mask?: string };
export type SourceResult = { ok: true; plan: BuildPlan } | { ok: false; reason: string; message: string };

async function configMapKey(kube: Kube, namespace: string, ref: { name: string; key: string }): Promise<SourceResult | string> {
  try {
    const cm = await kube.core.readNamespacedConfigMap({ name: ref.name, namespace });
    const text = cm.data?.[ref.key];
    if (text === undefined || text.length === 0) return { ok: false, reason: 'ConfigMapKeyMissing', message: `ConfigMap ${ref.name} has no key "${ref.key}" (or it is empty)` };
    return text;
  } catch (err) {
    if (isNotFound(err)) return { ok: false, reason: 'ConfigMapNotFound', message: `ConfigMap ${ref.name} does not exist in namespace ${namespace}` };
    throw err;
  }
}

async function secretKey(kube: Kube, namespace: string, ref: { name: string; key: string }): Promise<SourceResult | string> {
  try {
    const secret = await kube.core.readNamespacedSecret({ name: ref.name, namespace });
    const b64 = secret.data?.[ref.key];
    if (!b64) return { ok: false, reason: 'SecretKeyMissing', message: `Secret ${ref.name} has no key "${ref.key}" (it should hold a postgresql:// URL)` };
    return Buffer.from(b64, 'base64').toString('utf8').trim();
  } catch (err) {
    if (isNotFound(err)) return { ok: false, reason: 'SecretNotFound', message: `Secret ${ref.name} does not exist in namespace ${namespace}` };
    throw err;
  }
}

export async function resolveSource(kube: Kube, namespace: string, spec: TemplateSpec): Promise<SourceResult> {
  const s = spec.source;
  if (s.sql !== undefined) return { ok: true, plan: { kind: 'sql', sql: s.sql } };
  if (s.configMapRef !== undefined) {
    const sql = await configMapKey(kube, namespace, s.configMapRef);
    return typeof sql === 'string' ? { ok: true, plan: { kind: 'sql', sql } } : sql;
  }
  const d = s.database!;
  const url = await secretKey(kube, namespace, d.urlSecretRef);
  if (typeof url !== 'string') return url;
  let mask = d.mask;
  if (d.maskConfigMapRef !== undefined) {
    const text = await configMapKey(kube, namespace, d.maskConfigMapRef);
    if (typeof text !== 'string') return text;
    mask = text;
  }
  return { ok: true, plan: { kind: 'import', sourceUrl: url, ...(mask !== undefined ? { mask } : {}) } };
}
