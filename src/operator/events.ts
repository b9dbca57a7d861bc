// Events a user sees in `kubectl describe`: what the operator did or why it is stuck. Controllers call
// this only when something changed (a condition flipped, a database was made), so a stuck object
// gets one Event, not one per pass; an Event that recurs is aggregated (its count goes up). Failing
// to record an Event never fails a reconcile.

import crypto from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { CustomObject, Kube } from './kube.js';
import { isNotFound, kubeMessage, MERGE_PATCH } from './kube.js';

export type EventType = 'Normal' | 'Warning';

/** How many distinct Events are remembered for aggregation; the oldest is forgotten first. */
const MAX_REMEMBERED = 2_000;

export class EventRecorder {
  /** Events recorded by this replica, by object uid, type, reason and message: their name and count. */
  private readonly recorded = new Map<string, { name: string; count: number; first: Date }>();

  constructor(
    private readonly kube: Kube,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Who reports: the operator's identity (pod name), shown as the Event's source host. */
    private readonly instance: string,
  ) {}

  /**
   * Records an Event; the same one again (same object, type, reason and message) is aggregated as
   * kubectl and the kubelet's recorder do it: the existing Event's count and lastTimestamp go up,
   * rather than a new Event per occurrence (8 TemplateNotOnPod Events for one Branch were seen).
   */
  async record(obj: CustomObject, type: EventType, reason: string, message: string): Promise<void> {
    const namespace = obj.metadata!.namespace!;
    const now = new Date(this.clock.now());
    const key = JSON.stringify([obj.metadata!.uid, type, reason, message]);
    const seen = this.recorded.get(key);
    try {
      if (seen) {
        try {
          seen.count += 1;
          await this.kube.core.patchNamespacedEvent({ name: seen.name, namespace, body: { count: seen.count, lastTimestamp: now } }, MERGE_PATCH);
          this.remember(key, seen);
          return;
        } catch (err) {
          if (!isNotFound(err)) throw err; // expired (the API server keeps Events an hour): a new one
        }
      }
      const name = `${obj.metadata!.name}.${crypto.randomBytes(8).toString('hex')}`;
      await this.kube.core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name, namespace },
          involvedObject: {
            apiVersion: obj.apiVersion,
            kind: obj.kind,
            name: obj.metadata!.name,
            namespace,
            uid: obj.metadata!.uid,
            resourceVersion: obj.metadata!.resourceVersion,
          },
          type,
          reason,
          message,
          count: 1,
          firstTimestamp: now,
          lastTimestamp: now,
          source: { component: 'pgx-operator', host: this.instance },
          reportingComponent: 'pgx.dev/operator',
          reportingInstance: this.instance,
        },
      });
      this.remember(key, { name, count: 1, first: now });
    } catch (err) {
      this.logger.warn('event not recorded', { object: `${namespace}/${obj.metadata!.name}`, reason, error: kubeMessage(err) });
    }
  }

  private remember(key: string, entry: { name: string; count: number; first: Date }): void {
    this.recorded.delete(key);
    this.recorded.set(key, entry);
    if (this.recorded.size > MAX_REMEMBERED) this.recorded.delete(this.recorded.keys().next().value!);
  }
}
