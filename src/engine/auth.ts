// Password authentication for client sessions: SCRAM-SHA-256 against the verifier PostgreSQL stores
// for the role. An unknown role runs the same exchange against a mock verifier, so it fails exactly
// like a wrong password and a client cannot probe which roles exist. Over TLS, SCRAM-SHA-256-PLUS is
// offered too, bound to the engine's certificate (tls-server-end-point), as PostgreSQL offers it:
// the engine terminates TLS, so the binding is to the certificate the client actually sees.

import { mockVerifier, parseVerifier, startExchange, verifyClientFinal, type ScramExchangeState } from '../wire/scram.js';
import { parseSASLInitialResponse, ProtocolError } from '../wire/frontend.js';
import { PgxError } from '../errors.js';
import type { Credentials } from './ports.js';

const SCRAM_MECHANISM = 'SCRAM-SHA-256';
const SCRAM_PLUS_MECHANISM = 'SCRAM-SHA-256-PLUS';

/** The SASL mechanisms to offer: PLUS first when the connection can bind (as PostgreSQL lists them). */
export function scramMechanisms(bindingData: Buffer | null): string[] {
  return bindingData === null ? [SCRAM_MECHANISM] : [SCRAM_PLUS_MECHANISM, SCRAM_MECHANISM];
}

function passwordFailed(user: string): PgxError {
  return new PgxError('INVALID_PASSWORD', `password authentication failed for user "${user}"`);
}

/** One SCRAM exchange: begin() after the client's initial response, finish() after its final one. */
export class ScramExchange {
  private state: ScramExchangeState | null = null;
  private known = false;

  constructor(
    private readonly user: string,
    private readonly credentials: Credentials,
    /** What an unknown role's mock salt derives from (stable across restarts). */
    private readonly mockSecret: Buffer,
    /** tls-server-end-point data of the engine's certificate over TLS; null: no binding offered. */
    private readonly bindingData: Buffer | null = null,
  ) {}

  /** Reads SASLInitialResponse; returns the server-first message for AuthenticationSASLContinue. */
  async begin(body: Buffer): Promise<string> {
    const { mechanism, data } = parseSASLInitialResponse(body);
    const plus = mechanism === SCRAM_PLUS_MECHANISM && this.bindingData !== null;
    if (mechanism !== SCRAM_MECHANISM && !plus) {
      throw new ProtocolError('client selected an invalid SASL authentication mechanism');
    }
    const stored = await this.credentials.scramVerifier(this.user);
    const verifier = stored === null ? null : parseVerifier(stored);
    this.known = verifier !== null;
    const binding = this.bindingData === null ? undefined : { selected: plus, data: this.bindingData };
    const started = startExchange(data, verifier ?? mockVerifier(this.user, this.mockSecret), undefined, binding);
    if (!started.ok) throw new ProtocolError(started.error.message, started.error.sqlstate);
    this.state = started.state;
    return started.serverFirst;
  }

  /** Reads SASLResponse; returns the server-final message, or throws 28P01. */
  finish(body: Buffer): string {
    if (!this.state) throw new ProtocolError('unexpected SASL response');
    const result = verifyClientFinal(body, this.state);
    if (!result.ok) {
      if (result.error.kind === 'INVALID_PASSWORD') throw passwordFailed(this.user);
      throw new ProtocolError(result.error.message, result.error.sqlstate);
    }
    // A mock verifier cannot verify, but guard against it anyway.
    if (!this.known) throw passwordFailed(this.user);
    return result.serverFinal;
  }
}
