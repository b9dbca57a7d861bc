// What the engine's parts know of a client session without importing the session itself: its
// states, the reader its socket's bytes go to, and the face it shows the listener (which counts and
// ends sessions) and the memory watchdog (which reads and cancels them). Kept apart so that the
// context, the pump and the watchdog name these types without an import cycle through client.ts.

import type { PgxError } from '../errors.js';
import type { Cancellable } from './cancel.js';

/** A session's state moves one way: startup -> authenticating -> connecting -> active -> closed. */
export type ClientState = 'startup' | 'authenticating' | 'connecting' | 'active' | 'closed';

/**
 * Whoever reads the client now (the login phase, then the session's pump). `chunk` is a view of a
 * buffer the next read overwrites: the reader copies what it keeps, or returns true when something
 * still refers to it (a write that did not go out at once, bytes held back), and the session then
 * reads into a fresh buffer from the next read on. Chunks from a TLS socket are the reader's to keep.
 */
export type ClientReader = (chunk: Buffer) => boolean;

/** A client session as the listener and the memory watchdog see it. */
export interface EngineSession extends Cancellable {
  readonly state: ClientState;
  readonly user: string;
  readonly database: string;
  /** The backend's process id while the session runs on one. */
  readonly backendPid: number | null;
  /** A statement is running for the client. */
  readonly busy: boolean;
  /** Cancels the running statement; the client sees `error` (an ErrorResponse) in place of 57014. */
  cancelStatement(error: Buffer): void;
  /** Ends the session with FATAL `error`, closing its backend rather than pooling it. */
  endClosingBackend(error: PgxError): void;
  /** Ends the session from the engine's side: FATAL to the client. */
  terminate(message: string, hint?: string): void;
}
