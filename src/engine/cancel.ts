// Cancel keys. Each client session gets a key issued by the engine (its pid is the backend's, its
// secret the engine's); a CancelRequest carrying it is sent on to PostgreSQL with the key of the
// backend the session holds at that moment.

import { randomInt, timingSafeEqual } from 'node:crypto';

export interface Cancellable {
  /** Sends a cancel for whatever the session's backend is running; no-op when it holds none. */
  cancelBackend(): void;
}

interface Entry {
  secret: Buffer;
  session: Cancellable;
}

export class CancelKeys {
  private readonly entries = new Map<number, Entry>();
  private nextPid = randomInt(1000, 1 << 30);

  /**
   * Issues a fresh (pid, secret) pair for a session. The pid is `backendPid`, the pid of the backend
   * the session holds, when no live key has it: clients compare it with pg_backend_pid(), with the
   * sender of a notification (to skip their own) and pass it to pg_cancel_backend(), as they would
   * with PostgreSQL's own key. The secret is always the engine's.
   */
  issue(session: Cancellable, backendPid = 0): { pid: number; secret: number } {
    let pid: number;
    if (backendPid > 0 && !this.entries.has(backendPid)) {
      pid = backendPid;
    } else {
      pid = this.nextPid;
      while (this.entries.has(pid)) pid = pid >= 0x7fffffff ? 1000 : pid + 1;
      this.nextPid = pid >= 0x7fffffff ? 1000 : pid + 1;
    }
    const secret = randomInt(0, 0xffffffff) | 0;
    // From Node's shared pool (4 bytes of their own, no allocation per key).
    const buf = Buffer.allocUnsafe(4);
    buf.writeInt32BE(secret);
    this.entries.set(pid, { secret: buf, session });
    return { pid, secret };
  }

  revoke(pid: number): void {
    this.entries.delete(pid);
  }

  /** The session a cancel request names, if the secret matches; unknown keys yield nothing. */
  find(pid: number, secret: Buffer): Cancellable | undefined {
    const entry = this.entries.get(pid);
    if (!entry || entry.secret.length !== secret.length) return undefined;
    return timingSafeEqual(entry.secret, secret) ? entry.session : undefined;
  }

  get size(): number {
    return this.entries.size;
  }
}
