// Authentication and RBAC authorization, as the API server's token authenticator and RBAC authorizer do
// them (k8s.io/kubernetes/plugin/pkg/auth/authorizer/rbac): a bearer token names a user and its groups;
// a request is allowed when a rule of a Role or ClusterRole bound to that user, to one of its groups or
// (for a service account) to the account matches its verb, API group, resource (with subresource) and
// name. A RoleBinding grants in its own namespace only; a ClusterRoleBinding everywhere, cluster-scoped
// requests and lists across namespaces included. Members of system:masters are allowed everything, as
// the cluster admin of a kubeconfig is. Roles, ClusterRoles and their bindings are ordinary objects in
// the store, so a test creates them as `kubectl apply` (or a helm install) of the chart would.

import { isObject, type JsonObject } from './patch.js';
import type { ObjectStore } from './store.js';

export interface UserInfo {
  name: string;
  groups: string[];
  /** A service account's token is valid only while the account exists. */
  serviceAccount?: { namespace: string; name: string };
}

/** What RBAC decides on: a resource request's attributes (authorizer.Attributes). */
export interface RequestAttributes {
  verb: string;
  apiGroup: string;
  resource: string;
  subresource: string;
  /** '' for a cluster-scoped resource or a list or watch across all namespaces. */
  namespace: string;
  /** '' for a collection (list, watch, create, deletecollection). */
  name: string;
}

export const MASTERS = 'system:masters';

export function serviceAccountUser(namespace: string, name: string): UserInfo {
  return {
    name: `system:serviceaccount:${namespace}:${name}`,
    groups: ['system:serviceaccounts', `system:serviceaccounts:${namespace}`, 'system:authenticated'],
    serviceAccount: { namespace, name },
  };
}

interface Rule {
  verbs: string[];
  apiGroups: string[];
  resources: string[];
  resourceNames: string[];
}

const strings = (v: unknown): string[] => (Array.isArray(v) ? v.filter((s): s is string => typeof s === 'string') : []);

function rulesOf(role: JsonObject | null): Rule[] {
  if (role === null || !Array.isArray(role.rules)) return [];
  return role.rules.filter(isObject).map((r) => ({ verbs: strings(r.verbs), apiGroups: strings(r.apiGroups), resources: strings(r.resources), resourceNames: strings(r.resourceNames) }));
}

/** rbac/v1 helpers.go: VerbMatches, APIGroupMatches, ResourceMatches, ResourceNameMatches. */
export function ruleAllows(rule: Rule, a: RequestAttributes): boolean {
  const has = (list: string[], v: string): boolean => list.includes('*') || list.includes(v);
  if (!has(rule.verbs, a.verb) || !has(rule.apiGroups, a.apiGroup)) return false;
  const combined = a.subresource === '' ? a.resource : `${a.resource}/${a.subresource}`;
  const resourceOk = rule.resources.some((r) => r === '*' || r === combined || (a.subresource !== '' && r === `*/${a.subresource}`));
  if (!resourceOk) return false;
  return rule.resourceNames.length === 0 || (a.name !== '' && rule.resourceNames.includes(a.name));
}

function subjectMatches(subject: JsonObject, user: UserInfo, bindingNamespace: string): boolean {
  switch (subject.kind) {
    case 'User':
      return subject.name === user.name;
    case 'Group':
      return typeof subject.name === 'string' && user.groups.includes(subject.name);
    case 'ServiceAccount': {
      // A ServiceAccount subject without a namespace means the binding's own (as rbac's subject matching).
      const ns = typeof subject.namespace === 'string' && subject.namespace !== '' ? subject.namespace : bindingNamespace;
      return user.serviceAccount !== undefined && user.serviceAccount.name === subject.name && user.serviceAccount.namespace === ns;
    }
    default:
      return false;
  }
}

function find(store: ObjectStore, plural: string, namespace: string, name: string): JsonObject | null {
  const t = store.typeFor('rbac.authorization.k8s.io', 'v1', plural)!;
  try {
    return store.get(t, namespace, name);
  } catch {
    return null; // a binding to a role that does not exist grants nothing
  }
}

/** The rules that apply to `user` for a request in `namespace` ('' : cluster scope only). */
export function rulesFor(store: ObjectStore, user: UserInfo, namespace: string): Rule[] {
  const rbac = (plural: string) => store.typeFor('rbac.authorization.k8s.io', 'v1', plural)!;
  const rules: Rule[] = [];
  const bound = (b: JsonObject, ns: string): boolean => Array.isArray(b.subjects) && b.subjects.filter(isObject).some((s) => subjectMatches(s, user, ns));
  for (const b of store.list(rbac('clusterrolebindings'), { namespace: null }).items) {
    const ref = isObject(b.roleRef) ? b.roleRef : {};
    if (ref.kind === 'ClusterRole' && bound(b, '')) rules.push(...rulesOf(find(store, 'clusterroles', '', String(ref.name))));
  }
  if (namespace !== '') {
    for (const b of store.list(rbac('rolebindings'), { namespace }).items) {
      const ref = isObject(b.roleRef) ? b.roleRef : {};
      if (!bound(b, namespace)) continue;
      if (ref.kind === 'Role') rules.push(...rulesOf(find(store, 'roles', namespace, String(ref.name))));
      else if (ref.kind === 'ClusterRole') rules.push(...rulesOf(find(store, 'clusterroles', '', String(ref.name))));
    }
  }
  return rules;
}

export function authorize(store: ObjectStore, user: UserInfo, a: RequestAttributes): boolean {
  if (user.groups.includes(MASTERS)) return true;
  return rulesFor(store, user, a.namespace).some((r) => ruleAllows(r, a));
}

/** The API server's words for a refusal (rbac's forbidden message, as kubectl prints it). */
export function forbiddenMessage(user: UserInfo, a: RequestAttributes, qualified: string): string {
  const resource = a.subresource === '' ? a.resource : `${a.resource}/${a.subresource}`;
  const what = a.name === '' ? qualified : `${qualified} "${a.name}"`;
  const where = a.namespace === '' ? 'at the cluster scope' : `in the namespace "${a.namespace}"`;
  return `${what} is forbidden: User "${user.name}" cannot ${a.verb} resource "${resource}" in API group "${a.apiGroup}" ${where}`;
}
