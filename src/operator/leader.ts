// Leader election on a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it (client-node
// has none): a candidate takes the Lease only when its holder has not renewed it for a whole lease
// duration, timed on the candidate's own monotonic clock from when it last saw the record change (so
// clocks that disagree between nodes do not matter); every write is a replace carrying the
// resourceVersion read, so of two candidates racing one gets 409 Conflict. The leader renews every
// retry period and steps down when it has not renewed for renewDeadline, which is shorter than the
// lease duration: by the time another replica may take over, this one has stopped acting.

import type { V1Lease } from '@kubernetes/client-node';
import type { Clock } from '../clock.js';
import type { Logger } from '../log.js';
import type { Kube } from './kube.js';
import { isConflict, isNotFound, kubeMessage } from './kube.js';

export interface LeaderOptions {
  namespace: string;
  name: string;
  identity: string;
  /** How long a Lease holds without renewal. */
  leaseDurationMs: number;
  /** The leader steps down when it could not renew for this long (< leaseDurationMs). */
  renewDeadlineMs: number;
  /** How often to try to acquire or renew. */
  retryPeriodMs: number;
}

export class LeaderElector {
  private leading = false;
  private timer: NodeJS.Timeout | null = null;
  private stopped = false;
  private observed: { holder: string; renew: string } | null = null;
  private observedAt = 0;
  private lastRenewed = 0;
  private running: Promise<void> = Promise.resolve();

  constructor(
    private readonly kube: Kube,
    private readonly opts: LeaderOptions,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly onChange: (leading: boolean) => void,
  ) {}

  get isLeader(): boolean {
    return this.leading;
  }

  start(): void {
    this.tick();
  }

  /** Stops contending; a leader gives the Lease up so another replica need not wait it out. */
  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
    if (this.leading) {
      this.setLeading(false);
      await this.release().catch((err: unknown) => this.logger.warn('lease not released', { lease: this.opts.name, error: kubeMessage(err) }));
    }
  }

  private tick(): void {
    if (this.stopped) return;
    this.running = this.attempt().finally(() => {
      if (this.stopped) return;
      this.timer = setTimeout(() => this.tick(), this.opts.retryPeriodMs);
      this.timer.unref();
    });
  }

  private async attempt(): Promise<void> {
    let ok = false;
    try {
      ok = await this.tryAcquireOrRenew();
    } catch (err) {
      this.logger.warn('lease not acquired or renewed', { lease: this.opts.name, error: kubeMessage(err) });
    }
    if (this.stopped) return;
    const now = this.clock.monotonic();
    if (ok) {
      this.lastRenewed = now;
      if (!this.leading) this.setLeading(true);
    } else if (this.leading && now - this.lastRenewed >= this.opts.renewDeadlineMs) {
      this.setLeading(false);
    }
  }

  private setLeading(leading: boolean): void {
    this.leading = leading;
    this.logger.info(leading ? 'became leader' : 'stopped leading', { lease: `${this.opts.namespace}/${this.opts.name}`, identity: this.opts.identity });
    this.onChange(leading);
  }

  private async tryAcquireOrRenew(): Promise<boolean> {
    const { namespace, name, identity } = this.opts;
    const now = microTime(this.clock.now());
    const seconds = Math.max(1, Math.ceil(this.opts.leaseDurationMs / 1000));
    let lease: V1Lease;
    try {
      lease = await this.kube.coordination.readNamespacedLease({ name, namespace });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      try {
        await this.kube.coordination.createNamespacedLease({
          namespace,
          body: { metadata: { name, namespace }, spec: { holderIdentity: identity, leaseDurationSeconds: seconds, acquireTime: now, renewTime: now, leaseTransitions: 0 } },
        });
        return true;
      } catch (e) {
        if (isConflict(e)) return false; // another replica created it first
        throw e;
      }
    }
    const spec = lease.spec ?? {};
    const holder = spec.holderIdentity ?? '';
    const record = { holder, renew: String(spec.renewTime instanceof Date ? spec.renewTime.toISOString() : (spec.renewTime ?? '')) };
    if (this.observed === null || this.observed.holder !== record.holder || this.observed.renew !== record.renew) {
      this.observed = record;
      this.observedAt = this.clock.monotonic();
    }
    const mine = holder === identity;
    const heldByOther = holder !== '' && !mine && this.clock.monotonic() - this.observedAt < this.opts.leaseDurationMs;
    // While we lead, a record we did not write means someone took over: do not fight for it.
    if (heldByOther || (this.leading && !mine)) return false;
    try {
      await this.kube.coordination.replaceNamespacedLease({
        name,
        namespace,
        body: {
          ...lease,
          spec: {
            ...spec,
            holderIdentity: identity,
            leaseDurationSeconds: seconds,
            renewTime: now,
            acquireTime: mine ? spec.acquireTime ?? now : now,
            leaseTransitions: (spec.leaseTransitions ?? 0) + (mine ? 0 : 1),
          },
        },
      });
      return true;
    } catch (err) {
      if (isConflict(err)) return false;
      throw err;
    }
  }

  private async release(): Promise<void> {
    const { namespace, name, identity } = this.opts;
    const lease = await this.kube.coordination.readNamespacedLease({ name, namespace });
    if (lease.spec?.holderIdentity !== identity) return;
    await this.kube.coordination.replaceNamespacedLease({
      name,
      namespace,
      body: { ...lease, spec: { ...lease.spec, holderIdentity: '', leaseDurationSeconds: 1, renewTime: microTime(this.clock.now()) } },
    });
  }
}

/**
 * A Lease's acquireTime and renewTime are MicroTime: RFC 3339 with exactly six fractional digits. A
 * Date would go out as toISOString's three, which a real API server refuses (400, "cannot parse
 * \".579Z\" as \".000000\""); client-node passes a string through as it is (and hands the server's
 * string back unparsed), so the Lease is written with a string in the model's Date field.
 */
export function microTime(ms: number): Date {
  return new Date(ms).toISOString().replace(/\.(\d{3})Z$/, '.$1000Z') as unknown as Date;
}

