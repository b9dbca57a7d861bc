// A Branch's connection Secret, owned by the Branch (so Kubernetes deletes it with the Branch) and
// labelled with its name. Keys: host, port, dbname, user, password and DATABASE_URL (the first ones),
// and what apps and CloudNativePG users expect besides: username, uri, jdbc-uri, pgpass, sslmode. Its
// type, servicebinding.io/postgresql (with the keys type and provider), is what Service Binding
// aware libraries detect. On a Runtime with spec.tls the Secret says sslmode verify-full and carries
// the Runtime's CA as ca.crt (require when its TLS Secret has no ca.crt). uri and DATABASE_URL stay
// plain, as CloudNativePG's are: libpq takes sslmode and sslrootcert from PGSSLMODE and PGSSLROOTCERT
// (the sslmode key, and wherever the app mounts ca.crt), which a parameter in the URL would override;
// jdbc-uri, which has always said its sslmode, says require (encrypted, no CA file needed). The
// password exists only here and in the runtime's SCRAM verifier: if the Secret is lost, a new
// credential is made.
//
// The operator never writes into, nor reports, a Secret the Branch does not own: a name already taken
// by another object is a condition naming the owner. One exception, safe by construction: a Secret
// owned by an earlier Branch of the same name (deleted and re-created before the garbage collector got
// to its Secret) is garbage, and is deleted (with its uid as a precondition) so the new Branch gets its own.

import type { V1OwnerReference, V1Secret } from '@kubernetes/client-node';
import type { CredentialBody } from '../../api/contract.js';
import type { CustomObject, Kube } from '../kube.js';
import { isConflict, isNotFound } from '../kube.js';

const BRANCH_LABEL = 'pgx.dev/branch';
/** The Service Binding type for PostgreSQL (servicebinding.io spec, "Well-known Secret Entries"). */
const BRANCH_SECRET_TYPE = 'servicebinding.io/postgresql';
/** A Runtime without spec.tls offers no TLS: clients are told so rather than left to try. */
const NO_TLS: ClientTls = { sslmode: 'disable' };
/** The CA key, as in a kubernetes.io/tls Secret (and cert-manager's). */
export const CA_KEY = 'ca.crt';

/** What a Branch Secret tells clients of TLS: the mode, and the CA that verifies the pod when there is one. */
export type ClientTls = { sslmode: 'disable' } | { sslmode: 'require' } | { sslmode: 'verify-full'; ca: string };

/**
 * The TLS a Runtime offers its clients: none without spec.tls; else verify-full with the CA of its TLS
 * Secret (in the Runtime's namespace), or require when that Secret has no ca.crt. A missing Secret is an
 * error: the pods cannot start without it either, and a Secret saying disable would be wrong.
 */
export async function clientTls(kube: Kube, runtimeNamespace: string, tls: { secretName: string } | undefined): Promise<ClientTls> {
  if (tls === undefined) return NO_TLS;
  const secret = await kube.core.readNamespacedSecret({ name: tls.secretName, namespace: runtimeNamespace });
  // The API server answers data only (stringData is write-only).
  const ca = secret.data?.[CA_KEY];
  if (ca === undefined || ca === '') return { sslmode: 'require' };
  return { sslmode: 'verify-full', ca: Buffer.from(ca, 'base64').toString('utf8') };
}

export function branchSecretName(branch: string): string {
  return `${branch}-db`;
}

/** The Secret under the Branch's name: absent, the Branch's own, or another's (who owns it, for a person). */
export type SecretState = { kind: 'absent' } | { kind: 'ours' } | { kind: 'taken'; owner: string } | { kind: 'stale'; secret: V1Secret };

export async function secretState(kube: Kube, branch: CustomObject, name: string): Promise<SecretState> {
  let secret: V1Secret;
  try {
    secret = await kube.core.readNamespacedSecret({ name, namespace: branch.metadata!.namespace! });
  } catch (err) {
    if (isNotFound(err)) return { kind: 'absent' };
    throw err;
  }
  const owner = secret.metadata?.ownerReferences?.find((r) => r.controller) ?? secret.metadata?.ownerReferences?.[0];
  if (owner?.uid === branch.metadata!.uid) return { kind: 'ours' };
  // An earlier Branch of this name (deleted; its uid is not this one's): its Secret waits for the garbage collector.
  if (owner && owner.kind === 'Branch' && owner.apiVersion === branch.apiVersion && owner.name === branch.metadata!.name) return { kind: 'stale', secret };
  return { kind: 'taken', owner: describeOwner(owner) };
}

function describeOwner(owner: V1OwnerReference | undefined): string {
  return owner ? `${owner.kind} ${owner.name}` : 'no owner (made by hand or by another tool)';
}

function pgpassField(v: string): string {
  return v.replace(/\\/g, '\\\\').replace(/:/g, '\\:');
}

export function connectionUrl(c: { user: string; password: string; host: string; port: number; database: string }): string {
  const host = c.host.includes(':') ? `[${c.host}]` : c.host;
  return `postgresql://${encodeURIComponent(c.user)}:${encodeURIComponent(c.password)}@${host}:${c.port}/${encodeURIComponent(c.database)}`;
}

/** The Secret as created: a pure function of the Branch, where its database is, and the credential. */
export function branchSecret(
  branch: CustomObject,
  secretName: string,
  endpoint: { host: string; port: number },
  database: string,
  credential: CredentialBody,
  tls: ClientTls = NO_TLS,
): V1Secret {
  const c = { user: credential.user, password: credential.password, host: endpoint.host, port: endpoint.port, database };
  const url = connectionUrl(c);
  const host = c.host.includes(':') ? `[${c.host}]` : c.host;
  const jdbcSslmode = tls.sslmode === 'disable' ? 'disable' : 'require';
  const jdbc = `jdbc:postgresql://${host}:${c.port}/${encodeURIComponent(database)}?user=${encodeURIComponent(c.user)}&password=${encodeURIComponent(c.password)}&sslmode=${jdbcSslmode}`;
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: secretName,
      namespace: branch.metadata!.namespace!,
      labels: { [BRANCH_LABEL]: branch.metadata!.name!, 'app.kubernetes.io/managed-by': 'pgx-operator' },
      ownerReferences: [{ apiVersion: branch.apiVersion!, kind: branch.kind!, name: branch.metadata!.name!, uid: branch.metadata!.uid!, controller: true, blockOwnerDeletion: true }],
    },
    type: BRANCH_SECRET_TYPE,
    stringData: {
      type: 'postgresql',
      provider: 'pgx',
      host: endpoint.host,
      port: String(endpoint.port),
      dbname: database,
      database,
      user: credential.user,
      username: credential.user,
      password: credential.password,
      DATABASE_URL: url,
      uri: url,
      'jdbc-uri': jdbc,
      pgpass: `${[endpoint.host, String(endpoint.port), database, credential.user, credential.password].map(pgpassField).join(':')}\n`,
      sslmode: tls.sslmode,
      ...(tls.sslmode === 'verify-full' ? { [CA_KEY]: tls.ca } : {}),
    },
  };
}

/**
 * Makes the Branch's Secret: 'made'; 'ours' when it is there already (an earlier pass made it); or
 * who owns the Secret that holds the name. A stale Secret of an earlier Branch of the same name is
 * deleted first (precondition: its uid, so nothing newer is deleted).
 */
export async function createBranchSecret(
  kube: Kube,
  branch: CustomObject,
  secretName: string,
  endpoint: { host: string; port: number },
  database: string,
  credential: CredentialBody,
  tls: ClientTls = NO_TLS,
): Promise<'made' | 'ours' | { taken: string } | { waiting: string }> {
  const namespace = branch.metadata!.namespace!;
  for (let attempt = 0; attempt < 2; attempt++) {
    try {
      await kube.core.createNamespacedSecret({ namespace, body: branchSecret(branch, secretName, endpoint, database, credential, tls) });
      return 'made';
    } catch (err) {
      if (!isConflict(err)) throw err;
    }
    const state = await secretState(kube, branch, secretName);
    if (state.kind === 'ours') return 'ours';
    if (state.kind === 'taken') return { taken: state.owner };
    if (state.kind === 'stale') {
      // Being deleted already (its finalizers, or foreground deletion, hold it): wait for it to go.
      if (state.secret.metadata?.deletionTimestamp) return { waiting: `Secret ${secretName} of an earlier Branch ${branch.metadata!.name} is being deleted; the Branch makes its own when it is gone` };
      await deleteStale(kube, namespace, state.secret);
    }
  }
  return { waiting: `Secret ${secretName} came back while it was being replaced; trying again` };
}

async function deleteStale(kube: Kube, namespace: string, secret: V1Secret): Promise<void> {
  try {
    await kube.core.deleteNamespacedSecret({ name: secret.metadata!.name!, namespace, body: { preconditions: { uid: secret.metadata!.uid! } } });
  } catch (err) {
    if (!isNotFound(err) && !isConflict(err)) throw err;
  }
}

/**
 * Deletes the Branch's own Secret (expiry with Retain: the database it names is gone; or its namespace
 * is no longer admitted, its credentials revoked first).
 */
export async function deleteBranchSecret(kube: Kube, branch: CustomObject, name: string): Promise<void> {
  const state = await secretState(kube, branch, name);
  if (state.kind !== 'ours') return;
  try {
    await kube.core.deleteNamespacedSecret({ name, namespace: branch.metadata!.namespace! });
  } catch (err) {
    if (!isNotFound(err)) throw err;
  }
}
