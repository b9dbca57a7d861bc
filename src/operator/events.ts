// Events a user sees in `kubectl describe`: what the operator did or why it is stuck. Controllers call
// this only when something changed (a condition flipped, a database was made), so a stuck object
// gets one Event, not one per pass. Failing to record an Event never fails a reconcile.

import crypto from 'node:crypto';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { CustomObject, Kube } from './kube.js';
import { kubeMessage } from './kube.js';

export type EventType = 'Normal' | 'Warning';

export class EventRecorder {
  constructor(
    private readonly kube: Kube,
    private readonly clock: Clock,
    private readonly logger: Logger,
    /** Who reports: the operator's identity (pod name), shown as the Event's source host. */
    private readonly instance: string,
  ) {}

  async record(obj: CustomObject, type: EventType, reason: string, message: string): Promise<void> {
    const namespace = obj.metadata!.namespace!;
    const now = new Date(this.clock.now());
    try {
      await this.kube.core.createNamespacedEvent({
        namespace,
        body: {
          metadata: { name: `${obj.metadata!.name}.${crypto.randomBytes(8).toString('hex')}`, namespace },
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
    } catch (err) {
      this.logger.warn('event not recorded', { object: `${namespace}/${obj.metadata!.name}`, reason, error: kubeMessage(err) });
    }
  }
}
