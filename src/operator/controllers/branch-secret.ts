// A Branch's connection Secret: host, port, dbname, user, password and DATABASE_URL, owned by the
// Branch (so Kubernetes deletes it with the Branch) and labelled with its name. The password exists
// only here and in the runtime's SCRAM verifier: if the Secret is lost, a new credential is made.

import type { V1Secret } from '@kubernetes/client-node';
import type { CredentialBody } from '../../api/contract.js';
import type { CustomObject, Kube } from '../kube.js';
import { isConflict, isNotFound } from '../kube.js';

export const BRANCH_LABEL = 'pgx.dev/branch';

export function branchSecretName(branch: string): string {
  return `${branch}-db`;
}

export async function secretExists(kube: Kube, namespace: string, name: string): Promise<boolean> {
  try {
    await kube.core.readNamespacedSecret({ name, namespace });
    return true;
  } catch (err) {
    if (isNotFound(err)) return false;
    throw err;
  }
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
): V1Secret {
  const url = connectionUrl({ user: credential.user, password: credential.password, host: endpoint.host, port: endpoint.port, database });
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: {
      name: secretName,
      namespace: branch.metadata!.namespace!,
      labels: { [BRANCH_LABEL]: branch.metadata!.name!, 'app.kubernetes.io/managed-by': 'pgx-operator' },
      ownerReferences: [{ apiVersion: branch.apiVersion!, kind: branch.kind!, name: branch.metadata!.name!, uid: branch.metadata!.uid!, controller: true, blockOwnerDeletion: true }],
    },
    type: 'Opaque',
    stringData: {
      host: endpoint.host,
      port: String(endpoint.port),
      dbname: database,
      user: credential.user,
      password: credential.password,
      DATABASE_URL: url,
    },
  };
}

/** Creates the Secret (true); an existing one (an earlier pass made it) is left as it is (false). */
export async function createBranchSecret(
  kube: Kube,
  branch: CustomObject,
  secretName: string,
  endpoint: { host: string; port: number },
  database: string,
  credential: CredentialBody,
): Promise<boolean> {
  try {
    await kube.core.createNamespacedSecret({ namespace: branch.metadata!.namespace!, body: branchSecret(branch, secretName, endpoint, database, credential) });
    return true;
  } catch (err) {
    if (!isConflict(err)) throw err;
    return false;
  }
}
