// What the engine needs from the rest of the runtime. The CLI wires real implementations in; the
// engine never imports runtime/ (and runtime/ never imports engine/).

import type { Logger } from '../log.js';
import type { Clock } from '../clock.js';

/** Where the supervised PostgreSQL listens: its private Unix socket. */
export interface BackendAddress {
  socketDir: string;
  port: number;
}

export interface BackendStatus {
  /** True while PostgreSQL answers; false while it starts, restarts or stops. */
  accepting(): boolean;
}

export interface Credentials {
  /** The SCRAM-SHA-256 verifier stored for a role, or null if the role has none (or does not exist). */
  scramVerifier(user: string): Promise<string | null>;
}

export type AuthMode = 'trust' | 'scram';

export interface EngineOptions {
  host: string;
  port: number;
  /** Directory for the engine's own Unix socket (.s.PGSQL.<port>), or null for TCP only. */
  socketDir: string | null;
  backend: BackendAddress;
  backendStatus: BackendStatus;
  credentials: Credentials;
  /** trust: loopback and Unix socket connections need no password; others use SCRAM. */
  auth: AuthMode;
  /** Client sessions at once; beyond it 53300. */
  maxClients: number;
  /** PostgreSQL backends the engine may hold open (active and idle). */
  maxBackends: number;
  /** How long an idle pooled backend is kept. */
  backendIdleTimeoutMs: number;
  /** How long a client may wait for a backend when all are busy. */
  backendWaitTimeoutMs: number;
  /** How long a client may take from connect to authenticated. */
  loginTimeoutMs: number;
  logger: Logger;
  clock: Clock;
}
