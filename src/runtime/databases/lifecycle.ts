// Where the disposable databases are in their life (new, starting, running, stopping, stopped): set by
// disposable-databases.ts alone, read by the router and the operations, which refuse new work unless running.

import { PgxError } from '../../errors.js';

export type LifecycleState = 'new' | 'starting' | 'running' | 'stopping' | 'stopped';

export class Lifecycle {
  state: LifecycleState = 'new';

  /** Refuses `what` (57P03) unless running. */
  assertRunning(what: string): void {
    if (this.state !== 'running') throw new PgxError('CANNOT_CONNECT_NOW', `${what}: the runtime is not running`, { hint: 'Try again in a moment.' });
  }
}
