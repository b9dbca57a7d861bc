// The operator's Prometheus metrics and its small HTTP server (/metrics, /healthz, /readyz), so that a
// Deployment can probe it and a platform team can see reconciles, failures and who leads.

import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { Counter, Gauge, Histogram, Registry, collectDefaultMetrics } from 'prom-client';

/** What every operator metric name starts with. */
const METRIC_PREFIX = 'pgx_operator_';

export class OperatorMetrics {
  readonly registry = new Registry();
  private readonly reconciles = new Counter({ name: 'pgx_operator_reconciles_total', help: 'Reconciles by controller and result (ok, requeue, conflict, error).', labelNames: ['controller', 'result'], registers: [this.registry] });
  private readonly duration = new Histogram({ name: 'pgx_operator_reconcile_duration_seconds', help: 'Time per reconcile.', labelNames: ['controller'], buckets: [0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120], registers: [this.registry] });
  readonly leader = new Gauge({ name: 'pgx_operator_leader', help: '1 while this replica holds the lease.', registers: [this.registry] });
  readonly branchesDeleted = new Counter({ name: 'pgx_operator_branches_expired_total', help: 'Branches deleted because their TTL ran out or their database was dropped when idle.', registers: [this.registry] });

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    // prom-client's default metrics are already named process_* and nodejs_*: the prefix is the
    // operator's alone (pgx_operator_process_cpu_seconds_total, not ..._process_process_...).
    if (opts.defaultMetrics) collectDefaultMetrics({ register: this.registry, prefix: METRIC_PREFIX });
  }

  reconciled(controller: string, result: string, seconds: number): void {
    this.reconciles.inc({ controller, result });
    this.duration.observe({ controller }, seconds);
  }

  /** Total reconciles of a controller (all results); tests read it to see which replica acted. */
  async reconcileCount(controller?: string): Promise<number> {
    const m = await this.reconciles.get();
    return m.values.filter((v) => controller === undefined || v.labels.controller === controller).reduce((s, v) => s + v.value, 0);
  }
}

/** Serves /metrics, /healthz (alive) and /readyz (caches synced). */
export async function serveMetrics(metrics: OperatorMetrics, port: number, ready: () => boolean, host = '0.0.0.0'): Promise<{ port: number; close(): Promise<void> }> {
  const server = http.createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0];
    if (path === '/metrics') {
      metrics.registry.metrics().then(
        (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
        () => res.writeHead(500).end(),
      );
    } else if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' }).end('{"alive":true}');
    } else if (path === '/readyz') {
      const ok = ready();
      res.writeHead(ok ? 200 : 503, { 'content-type': 'application/json' }).end(JSON.stringify({ ready: ok }));
    } else {
      res.writeHead(404).end();
    }
  });
  server.requestTimeout = 10_000;
  await new Promise<void>((resolve, reject) => server.once('error', reject).listen(port, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    close: () => new Promise((resolve) => server.close(() => resolve())),
  };
}
