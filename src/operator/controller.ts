// A controller: a reconcile function behind a work queue. Reconciles are keyed "namespace/name" and
// idempotent; they return when to look again (requeueAfterMs: a TTL, a poll) or ask for a retry with
// backoff (retry: why). A 409 Conflict means the reconcile acted on a stale read of the object: the
// watch event carrying the new version is on its way, so it requeues quietly, without backoff.

import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import { isConflict, kubeMessage } from './kube.js';
import type { OperatorMetrics } from './metrics.js';
import { WorkQueue, type QueueOptions } from './queue.js';

export interface ReconcileResult {
  /** Reconcile again after this long (e.g. at a Branch's expiresAt). */
  requeueAfterMs?: number;
  /** Something outside our control is not there yet (a pod unreachable): retry with backoff. */
  retry?: string;
}

export type Reconcile = (key: string) => Promise<ReconcileResult | void>;

class RetryLater extends Error {}

export class Controller {
  readonly queue: WorkQueue;

  constructor(
    readonly name: string,
    reconcile: Reconcile,
    opts: QueueOptions,
    private readonly logger: Logger,
    private readonly metrics: OperatorMetrics,
    private readonly clock: Clock,
  ) {
    this.queue = new WorkQueue((key) => this.work(key, reconcile), opts, (key, err, retryInMs) => {
      const level = err instanceof RetryLater ? 'info' : 'warn';
      this.logger[level]('reconcile failed; retrying', { controller: name, key, error: kubeMessage(err), retry_ms: retryInMs });
    });
  }

  private async work(key: string, reconcile: Reconcile): Promise<void> {
    const started = this.clock.monotonic();
    let result: 'ok' | 'requeue' | 'conflict' | 'error' = 'ok';
    try {
      const r = (await reconcile(key)) ?? {};
      if (r.retry !== undefined) {
        result = 'requeue';
        throw new RetryLater(r.retry);
      }
      if (r.requeueAfterMs !== undefined) this.queue.addAfter(key, r.requeueAfterMs);
    } catch (err) {
      if (isConflict(err)) {
        result = 'conflict';
        this.logger.debug('conflict; requeued', { controller: this.name, key });
        this.queue.addAfter(key, 50);
        return;
      }
      if (result === 'ok') result = 'error';
      throw err;
    } finally {
      this.metrics.reconciled(this.name, result, (this.clock.monotonic() - started) / 1000);
    }
  }
}
