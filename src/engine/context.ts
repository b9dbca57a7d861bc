// What every client session of one engine shares.

import type { Logger } from '../log.js';
import type { CancelFailures, CancelKeys } from './cancel.js';
import type { BackendPool } from './pool.js';
import type { EngineOptions } from './ports.js';
import type { SessionSlots } from './session-slots.js';
import type { EngineSession } from './session-types.js';
import type { ActiveSlots } from './active-slots.js';
import type { LoginFailures } from './login-failures.js';
import type { BackendShares } from './backend-shares.js';
import type { Deadlines } from './deadlines.js';

/** What the login deadlines call back: a session's login (client-login.ts). */
export interface TimedLogin {
  onLoginTimeout(): void;
  flushAuth(): void;
}

export interface EngineContext {
  options: EngineOptions;
  pool: BackendPool;
  cancelKeys: CancelKeys;
  cancelFailures: CancelFailures;
  sessions: Set<EngineSession>;
  slots: SessionSlots;
  shares: BackendShares;
  activeSlots: ActiveSlots;
  loginFailures: LoginFailures;
  /** options.mockAuthSecret, or a random one for this engine. */
  mockAuthSecret: Buffer;
  /** --login-timeout for every session still logging in (client-login.ts). */
  loginDeadlines: Deadlines<TimedLogin>;
  /** The short hold of each authenticated session's AuthenticationOk (client-login.ts). */
  authHolds: Deadlines<TimedLogin>;
  logger: Logger;
}
