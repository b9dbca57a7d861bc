// Connections to the API server, shared. client-node 2.0.1 makes a new undici Agent for every request
// (KubeConfig.applySecurityAuthentication -> createDispatcher), so every call opened a new TLS
// connection, with a full handshake on both ends: about 2,000 for a burst of 200 Branches, most of the
// operator's CPU and much of the API server's. Here the Agent made for a request is swapped for one
// shared per API server and TLS identity (undici pools its connections per origin; a watch holds one,
// other calls use others). The shared Agents are renewed every RENEW_MS, so certificate files that were
// rotated in place are read again.

import type { KubeConfig, RequestContext } from '@kubernetes/client-node';
import type { Clock } from '../clock.js';

type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

const RENEW_MS = 10 * 60_000;
const PATCHED = Symbol('pgx.sharedConnections');

/** Makes every client built from `kc` (API clients, informers, watches) share connections. Idempotent. */
export function shareConnections(kc: KubeConfig, clock: Clock): void {
  const marked = kc as KubeConfig & { [PATCHED]?: true };
  if (marked[PATCHED]) return;
  marked[PATCHED] = true;
  const apply = kc.applySecurityAuthentication.bind(kc);
  const agents = new Map<string, { agent: Dispatcher; at: number }>();
  kc.applySecurityAuthentication = async (context: RequestContext): Promise<void> => {
    await apply(context);
    const made = context.getDispatcher();
    if (made === undefined) return; // no TLS settings: fetch's global dispatcher, which pools already
    const key = identity(kc);
    const now = clock.monotonic();
    let shared = agents.get(key);
    if (shared === undefined || now - shared.at > RENEW_MS) {
      // The old Agent finishes what it carries (a watch until it ends) and then closes.
      if (shared) void shared.agent.close().catch(() => undefined);
      shared = { agent: made, at: now };
      agents.set(key, shared);
      return;
    }
    context.setDispatcher(shared.agent);
    // `made` never connected (undici connects lazily): nothing to close.
  };
}

/** What the TLS settings of a request are made from: the current cluster and user, as configured. */
function identity(kc: KubeConfig): string {
  const c = kc.getCurrentCluster();
  const u = kc.getCurrentUser();
  return JSON.stringify([
    c?.server, c?.caFile, c?.caData, c?.skipTLSVerify, c?.tlsServerName, c?.proxyUrl,
    u?.name, u?.certFile, u?.certData, u?.keyFile, u?.keyData,
  ]);
}
