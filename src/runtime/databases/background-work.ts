// What the runtime's background loops share (the warm pool's refills, the trash's drops): a backend at
// the lowest CPU priority, and a pause that new work can end early.

import os from 'node:os';
import type { Logger } from '../../log.js';
import type { SqlClient } from '../postgres/sql-client.js';

/** How often held-back background work looks again whether clients still wait. */
export const YIELD_MS = 20;
/** Background work holds back for clients at most this long in a row, so it still gets done under a steady stream. */
export const HOLD_MAX_MS = 1000;
const BACKOFF_MIN_MS = 1000;
const BACKOFF_MAX_MS = 30_000;

/** The wait after another failure in a row: doubling from 1 s, at most 30 s. */
export function nextBackoffMs(previousMs: number): number {
  return Math.min(BACKOFF_MAX_MS, Math.max(BACKOFF_MIN_MS, previousMs * 2));
}

/** The background backends' nice value: the lowest priority Linux has. */
export const BACKGROUND_NICE = 19;

/**
 * Gives the connection's backend the lowest CPU priority (nice 19): a template copy or a drop then runs
 * on what clients' backends leave, in a burst of claims as well as beside one client's first queries.
 * PostgreSQL has no setting for it. Lowering the priority of a process of the same OS user needs no
 * privilege, and root (whose PostgreSQL runs as another user) may lower any. `event` is logged if not.
 */
export async function atLowestPriority(client: SqlClient, logger: Logger, event: string): Promise<SqlClient> {
  const { rows } = await client.query('SELECT pg_catalog.pg_backend_pid()');
  const pid = Number(rows[0]?.[0]);
  try {
    os.setPriority(pid, BACKGROUND_NICE);
  } catch (err) {
    logger.warn(event, { pid, err });
  }
  return client;
}

/** A background loop's wait: `for(ms)` waits, `end()` ends the wait early (new work, or a stop). */
export class Pause {
  private wake: (() => void) | null = null;
  private timer: NodeJS.Timeout | undefined;

  for(ms: number): Promise<void> {
    return new Promise((resolve) => {
      this.wake = resolve;
      this.timer = setTimeout(() => this.end(), ms);
    });
  }

  end(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }
}
