// The resource types the double serves: the built-in ones the operator touches, and whatever
// CustomResourceDefinitions are installed (registered when the CRD object is created, as on a real
// cluster). A type knows what discovery says about it and how the server treats it.

import { checkRules } from './schema.js';
import { isObject, type JsonObject } from './patch.js';

export interface ResourceType {
  /** '' for the core group. */
  group: string;
  version: string;
  kind: string;
  plural: string;
  singular: string;
  namespaced: boolean;
  shortNames: string[];
  categories: string[];
  /** PUT/PATCH of /status change only .status, and the main endpoint ignores .status. */
  statusSubresource: boolean;
  /** The openAPIV3Schema of a CRD: custom objects are pruned, defaulted and validated against it. */
  schema: JsonObject | null;
  /** Installed by a CustomResourceDefinition (which also means: list items carry apiVersion and kind). */
  custom: boolean;
  /** How the API server checks metadata.name: a DNS-1123 subdomain for most, a label or a DNS-1035 label for some. */
  nameRule: 'subdomain' | 'label' | 'dns1035' | 'path';
  /** Fields a fieldSelector may use besides metadata.name and metadata.namespace (anything else is 400). */
  fieldLabels: string[];
}

export function apiVersionOf(t: ResourceType): string {
  return t.group === '' ? t.version : `${t.group}/${t.version}`;
}

/** `plural` or `plural.group`, as the API server names a resource in its messages. */
export function qualifiedName(t: ResourceType): string {
  return t.group === '' ? t.plural : `${t.plural}.${t.group}`;
}

export function typeKey(group: string, version: string, plural: string): string {
  return `${group}/${version}/${plural}`;
}

function builtin(group: string, version: string, kind: string, plural: string, namespaced: boolean, statusSubresource: boolean, shortNames: string[] = [], extra: Partial<ResourceType> = {}): ResourceType {
  return { group, version, kind, plural, singular: kind.toLowerCase(), namespaced, shortNames, categories: [], statusSubresource, schema: null, custom: false, nameRule: 'subdomain', fieldLabels: [], ...extra };
}

const EVENT_FIELDS = ['involvedObject.kind', 'involvedObject.namespace', 'involvedObject.name', 'involvedObject.uid', 'involvedObject.apiVersion', 'involvedObject.resourceVersion', 'involvedObject.fieldPath', 'reason', 'reportingComponent', 'source', 'type'];
const POD_FIELDS = ['spec.nodeName', 'spec.restartPolicy', 'spec.schedulerName', 'spec.serviceAccountName', 'spec.hostNetwork', 'status.phase', 'status.podIP', 'status.nominatedNodeName'];

/** What the operator reads and writes, with their real scopes, status subresources, name rules and field labels. */
export const BUILTIN_TYPES: readonly ResourceType[] = [
  builtin('', 'v1', 'Namespace', 'namespaces', false, true, ['ns'], { nameRule: 'label', fieldLabels: ['status.phase'] }),
  builtin('', 'v1', 'Secret', 'secrets', true, false, [], { fieldLabels: ['type'] }),
  builtin('', 'v1', 'ConfigMap', 'configmaps', true, false, ['cm']),
  builtin('', 'v1', 'Service', 'services', true, true, ['svc'], { nameRule: 'dns1035' }),
  builtin('', 'v1', 'Pod', 'pods', true, true, ['po'], { fieldLabels: POD_FIELDS }),
  builtin('', 'v1', 'Event', 'events', true, false, ['ev'], { fieldLabels: EVENT_FIELDS }),
  builtin('', 'v1', 'PersistentVolumeClaim', 'persistentvolumeclaims', true, true, ['pvc']),
  builtin('', 'v1', 'ServiceAccount', 'serviceaccounts', true, false, ['sa']),
  builtin('apps', 'v1', 'StatefulSet', 'statefulsets', true, true, ['sts']),
  builtin('apps', 'v1', 'Deployment', 'deployments', true, true, ['deploy']),
  builtin('policy', 'v1', 'PodDisruptionBudget', 'poddisruptionbudgets', true, true, ['pdb']),
  builtin('coordination.k8s.io', 'v1', 'Lease', 'leases', true, false),
  builtin('events.k8s.io', 'v1', 'Event', 'events', true, false, ['ev']),
  builtin('apiextensions.k8s.io', 'v1', 'CustomResourceDefinition', 'customresourcedefinitions', false, true, ['crd', 'crds']),
  // RBAC: stored as given; the server's authorizer (rbac.ts) reads them for every request of a non-admin user.
  builtin('rbac.authorization.k8s.io', 'v1', 'Role', 'roles', true, false, [], { nameRule: 'path' }),
  builtin('rbac.authorization.k8s.io', 'v1', 'RoleBinding', 'rolebindings', true, false, [], { nameRule: 'path' }),
  builtin('rbac.authorization.k8s.io', 'v1', 'ClusterRole', 'clusterroles', false, false, [], { nameRule: 'path' }),
  builtin('rbac.authorization.k8s.io', 'v1', 'ClusterRoleBinding', 'clusterrolebindings', false, false, [], { nameRule: 'path' }),
];

/** The types a CustomResourceDefinition object declares: one per served version. Throws if it is unusable. */
export function typesFromCrd(crd: JsonObject): ResourceType[] {
  const spec = crd.spec;
  if (!isObject(spec) || !isObject(spec.names) || !Array.isArray(spec.versions)) throw new Error('spec.group, spec.names and spec.versions are required');
  const names = spec.names;
  const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);
  return spec.versions.filter(isObject).filter((v) => v.served !== false).map((v) => {
    const schema = isObject(v.schema) && isObject(v.schema.openAPIV3Schema) ? v.schema.openAPIV3Schema : null;
    if (schema) checkRules(schema);
    return {
      group: String(spec.group),
      version: String(v.name),
      kind: String(names.kind),
      plural: String(names.plural),
      singular: typeof names.singular === 'string' ? names.singular : String(names.kind).toLowerCase(),
      namespaced: spec.scope !== 'Cluster',
      shortNames: strings(names.shortNames),
      categories: strings(names.categories),
      statusSubresource: isObject(v.subresources) && isObject(v.subresources.status),
      schema,
      custom: true,
      nameRule: 'subdomain' as const,
      fieldLabels: [],
    };
  });
}
