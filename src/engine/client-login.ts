// A client session's login phase (client.ts owns the session and its state): the startup packet, and
// the SSLRequest, GSSENCRequest or CancelRequest that may come in its place; the password exchange
// (SCRAM, auth.ts) behind the failed-login throttle (login-failures.ts); --login-timeout. It ends
// when the client is authenticated; AuthenticationOk is then held back briefly so that it goes out in
// one write with the greeting (withAuth), and the bytes the client sent ahead wait for the pump.

import type net from 'node:net';
import type tls from 'node:tls';
import { Msg } from '../wire/codes.js';
import { AUTHENTICATION_OK, ENCRYPTION_REFUSED, authenticationSASL, authenticationSASLContinue, authenticationSASLFinal, negotiateProtocolVersion } from '../wire/backend.js';
import { tlsServerEndPoint } from '../wire/scram.js';
import { ProtocolError, parseStartupPacket, startupPacketLength } from '../wire/frontend.js';
import { clipIdentifier } from '../wire/identifier.js';
import { PgxError } from '../errors.js';
import { ScramExchange, scramMechanisms } from './auth.js';
import type { EngineContext } from './context.js';
import type { ClientState } from './session-types.js';

/** Largest authentication message we accept (PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH is 65535). */
const MAX_AUTH_MESSAGE = 65535;

/**
 * Unread bytes a client may have before it is authenticated: one message, as large as one can be (a
 * SASL message with its type byte; a startup packet is smaller). A client sends nothing until asked,
 * so more is a flood, at a login held for its turn (askPassword) above all: PostgreSQL reads nothing
 * then, and the engine keeps no more than the one message it will read next.
 */
const MAX_LOGIN_UNREAD = MAX_AUTH_MESSAGE + 1;

/** Bytes a client may send ahead while it waits for a backend; beyond it its socket is paused. */
const MAX_PIPELINED = 65536;

/**
 * How long AuthenticationOk may wait for the greeting it goes out with. A backend at hand (pooled, or
 * a warm mint) is ready well within it, and the client then hears everything in one write; a slow one
 * (a template copy) lets AuthenticationOk go ahead alone, as PostgreSQL sends it before its startup.
 */
export const AUTH_OK_HOLD_MS = 100;

/** How long a closing client may take to read its last bytes after a login timeout: it has had its time. */
const LOGIN_CLOSE_GRACE_MS = 1000;

/** The newest protocol 3.x minor version the engine speaks: 3.2 (PostgreSQL 18's, longer cancel keys). */
const NEWEST_PROTOCOL_MINOR = 2;

/**
 * What the login needs of its session: the session itself (client.ts), so that a login costs no host
 * object and no closures of its own.
 */
export interface LoginHost {
  /** The client's socket now (the TLS one once the connection is upgraded). */
  readonly socket: net.Socket;
  /** Where the client connects from: the Unix socket (TLS is for TCP only, as in PostgreSQL), or a TCP address. */
  readonly peer: { readonly unix: boolean; readonly address: string | undefined };
  readonly state: ClientState;
  /** The client's bytes travel over TLS; `handshaken`: its handshake has finished. */
  readonly encrypted: boolean;
  readonly handshaken: boolean;
  /** The startup packet named this user and database (as PostgreSQL will see them). */
  named(user: string, database: string): void;
  /** A password is asked for. */
  authenticating(): void;
  /** The client is authenticated: the session gets its backend. */
  authenticated(): void;
  /** Answers an SSLRequest: true when the connection goes on over TLS, false to refuse it. */
  startTls(bufferedBytes: number): boolean;
  failClient(err: unknown): void;
  close(): void;
}

/** Shared, never written: a session's login starts with it instead of allocating its own. */
const NO_PARAMS: ReadonlyMap<string, string> = new Map();

export class ClientLogin {
  /**
   * The client's bytes not yet read, in the order they came: a message is merged into one buffer only
   * once it is all there (peek), so a client dripping bytes costs no copy of what came before each time.
   */
  private chunks: Buffer[] = [];
  private buffered = 0;
  /** The startup packet's parameters. */
  params: ReadonlyMap<string, string> = NO_PARAMS;
  /** The protocol 3.x minor version spoken with the client: 2 gets a 32-byte cancel secret. */
  protocolMinor = 0;
  private user = '';
  private scram: ScramExchange | null = null;
  /** The client's first SASL message has been taken; the next one is its final message. */
  private scramStarted = false;
  /** Holds a throttled login until its turn (askPassword). */
  private throttleTimer: NodeJS.Timeout | null = null;
  /** AuthenticationOk (and SASLFinal) not yet written: they precede whatever the client hears next. */
  private authPending: Buffer | null = null;

  constructor(
    private readonly ctx: EngineContext,
    /** Unix socket or loopback: trusted in trust mode. */
    private readonly local: boolean,
    private readonly host: LoginHost,
  ) {
    ctx.loginDeadlines.add(this);
  }

  /** The client's reader until the pump takes over. Login bytes are few: kept as a copy (a chunk may be the reused read buffer). */
  readonly onData = (chunk: Buffer): boolean => {
    this.chunks.push(Buffer.from(chunk));
    this.buffered += chunk.length;
    if (this.host.state === 'connecting' && this.buffered >= MAX_PIPELINED) this.host.socket.pause();
    this.processSafely();
    return false;
  };

  /** The bytes the client sent ahead of its greeting, for the pump; null if none. */
  takePipelined(): Buffer | null {
    const chunks = this.chunks;
    const pipelined = this.buffered === 0 ? null : chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks, this.buffered);
    this.chunks = [];
    this.buffered = 0;
    return pipelined;
  }

  /** `frames` in one buffer, preceded by any held-back authentication messages. */
  withAuth(...frames: Buffer[]): Buffer {
    const pending = this.authPending;
    if (pending !== null) {
      this.authPending = null;
      this.ctx.authHolds.delete(this);
      frames.unshift(pending);
    }
    return frames.length === 1 ? frames[0]! : Buffer.concat(frames);
  }

  /** The session closed: no timer of the login's may fire, nothing held back goes out. */
  stop(): void {
    this.ctx.loginDeadlines.delete(this);
    if (this.throttleTimer !== null) clearTimeout(this.throttleTimer);
    this.ctx.authHolds.delete(this);
    this.authPending = null;
  }

  private processSafely(): void {
    try {
      this.process();
      const state = this.host.state;
      if (this.buffered > MAX_LOGIN_UNREAD && (state === 'startup' || state === 'authenticating')) {
        throw new ProtocolError('received more data during authentication than one message can hold');
      }
    } catch (err) {
      this.host.failClient(err);
    }
  }

  private process(): void {
    for (let state = this.host.state; state === 'startup' || state === 'authenticating'; state = this.host.state) {
      if (state === 'startup') {
        const head = this.peek(4);
        if (head === null) return;
        const len = startupPacketLength(head);
        if (this.peek(len) === null) return;
        this.onStartupPacket(this.take(len));
      } else {
        // Held for its turn (askPassword): nothing is read until the challenge has gone out.
        if (this.scram === null) return;
        const head = this.peek(5);
        if (head === null) return;
        const type = head[0]!;
        const len = head.readInt32BE(1);
        if (type !== Msg.Password) throw new ProtocolError(`expected SASL response, got message type ${type}`);
        if (len < 4 || len > MAX_AUTH_MESSAGE) throw new ProtocolError('invalid message length');
        if (this.peek(len + 1) === null) return;
        this.onPasswordMessage(this.take(len + 1).subarray(5));
        return; // the next message is read when this one is answered
      }
    }
  }

  /**
   * The first `n` unread bytes in one buffer, or null until that many have come. The chunks are merged
   * only when a message spans them, and then all at once: at most once per message read.
   */
  private peek(n: number): Buffer | null {
    if (this.buffered < n) return null;
    const first = this.chunks[0]!;
    if (first.length >= n) return first;
    const merged = Buffer.concat(this.chunks, this.buffered);
    this.chunks = [merged];
    return merged;
  }

  /** Takes the first `n` unread bytes (peek has seen them). */
  private take(n: number): Buffer {
    const first = this.chunks[0]!;
    if (first.length === n) this.chunks.shift();
    else this.chunks[0] = first.subarray(n);
    this.buffered -= n;
    return first.subarray(0, n);
  }

  private onStartupPacket(packet: Buffer): void {
    const socket = this.host.socket;
    const msg = parseStartupPacket(packet);
    switch (msg.kind) {
      case 'ssl':
        if (this.host.startTls(this.buffered)) return;
        socket.write(ENCRYPTION_REFUSED);
        return;
      case 'gssenc':
        // GSSAPI encryption is not offered: the client goes on in plain text or tries TLS.
        socket.write(ENCRYPTION_REFUSED);
        return;
      case 'cancel':
        this.onCancelRequest(msg.pid, msg.secret);
        return;
      case 'startup':
        break;
    }
    // Every name as PostgreSQL will see it (cut to 63 bytes): routing, the credential wall, session
    // caps and the pool key all use the name in force, not the one the client typed.
    const sent = msg.params.get('user');
    const user = sent ? clipIdentifier(sent) : sent;
    if (!user) throw new PgxError('INVALID_AUTHORIZATION', 'no PostgreSQL user name specified in startup packet');
    if (this.ctx.options.tls?.require && !this.host.encrypted && !this.host.peer.unix) {
      // As PostgreSQL words a hostssl-only pg_hba.conf refusing a plain connection.
      throw new PgxError('INVALID_AUTHORIZATION', `no pg_hba.conf entry for host "${this.host.peer.address}", user "${user}", database "${msg.params.get('database') || user}", no encryption`, {
        hint: 'This server accepts TCP connections over TLS only: connect with sslmode=require (or verify-full).',
      });
    }
    if (msg.params.has('replication') && msg.params.get('replication') !== 'false') {
      throw new PgxError('FEATURE_NOT_SUPPORTED', 'replication connections are not supported by PGX', {
        hint: 'Connect to PostgreSQL directly for replication; PGX serves ordinary sessions.',
      });
    }
    this.user = user;
    this.host.named(user, clipIdentifier(msg.params.get('database') || user));
    this.params = msg.params;
    this.protocolMinor = Math.min(msg.minor, NEWEST_PROTOCOL_MINOR);
    if (msg.minor > NEWEST_PROTOCOL_MINOR || msg.protocolOptions.length > 0) {
      socket.write(negotiateProtocolVersion(this.protocolMinor, msg.protocolOptions));
    }
    if (this.ctx.sessions.size > this.ctx.options.maxClients) {
      throw new PgxError('TOO_MANY_CONNECTIONS', 'sorry, too many clients already', {
        hint: `The engine holds at most ${this.ctx.options.maxClients} client sessions (--max-clients).`,
      });
    }
    if (this.local && this.ctx.options.auth === 'trust') {
      this.authenticated();
      return;
    }
    this.host.authenticating();
    this.askPassword();
  }

  /**
   * Asks for a password now, or when this (source, user)'s turn comes if its failed logins are past
   * --login-failure-limit (login-failures.ts); refuses it (28000) when that turn is too far off. The
   * admin on the Unix socket is never held or refused: a local guesser must not lock the operator out.
   */
  private askPassword(): void {
    const wait = this.throttleExempt ? 0 : this.ctx.loginFailures.admit(this.source, this.user);
    if (wait === null) {
      const retryS = Math.max(1, Math.ceil(this.ctx.loginFailures.retryAfterMs(this.source, this.user) / 1000));
      this.ctx.logger.warn('login-rate-limited', { source: this.source, user: this.user, refused: true });
      throw new PgxError('INVALID_AUTHORIZATION', `too many failed login attempts for user "${this.user}" from ${this.source}`, {
        hint: `Try again in ${retryS} s with the right password: past --login-failure-limit failures within a minute, this user's logins from this address take turns.`,
      });
    }
    if (wait === 0) {
      this.sendChallenge();
      return;
    }
    this.ctx.logger.info('login-rate-limited', { source: this.source, user: this.user, waitMs: Math.round(wait) });
    this.throttleTimer = setTimeout(() => {
      this.throttleTimer = null;
      if (this.host.state !== 'authenticating') return;
      this.sendChallenge();
      this.processSafely();
    }, wait);
  }

  private sendChallenge(): void {
    const socket = this.host.socket;
    const binding = this.host.encrypted ? channelBindingData(socket as tls.TLSSocket) : null;
    this.scram = new ScramExchange(this.user, this.ctx.options.credentials, this.ctx.mockAuthSecret, binding);
    socket.write(authenticationSASL(scramMechanisms(binding)));
  }

  /** The admin over the Unix socket: its failures are counted and logged but never hold it up. */
  private get throttleExempt(): boolean {
    return this.host.peer.unix && this.user === (this.ctx.options.adminUser ?? 'postgres');
  }

  /**
   * A CancelRequest: a match cancels that session's statement; anything else closes silently. Wrong
   * short (4-byte) keys are counted per source, and past the limit that source's short-key requests
   * are dropped unread (cancel.ts): a 32-bit secret must not be guessable at network speed.
   */
  private onCancelRequest(pid: number, secret: Buffer): void {
    const failures = this.ctx.cancelFailures;
    const short = secret.length <= 4;
    if (!short || failures.allowed(this.source)) {
      const session = this.ctx.cancelKeys.find(pid, secret);
      if (session) session.cancelBackend();
      else if (short && failures.failed(this.source)) {
        this.ctx.logger.warn('cancel-rate-limited', { source: this.source, hint: 'Wrong cancel keys from this address: its 4-byte-key cancel requests are dropped for a while. Clients speaking protocol 3.2 get 32-byte keys, which are never throttled.' });
      }
    }
    this.host.close();
  }

  /** Where the client connects from, for the failed-login limit: its address, or the Unix socket. */
  private get source(): string {
    if (this.host.peer.unix) return 'the Unix socket';
    // A TCP peer gone before accept read its address is still not the Unix socket (the admin's way in).
    return this.host.peer.address ?? 'an unknown TCP address';
  }

  private onPasswordMessage(body: Buffer): void {
    const scram = this.scram!;
    if (!this.scramStarted) {
      this.scramStarted = true;
      scram.begin(body).then(
        (serverFirst) => {
          if (this.host.state !== 'authenticating') return;
          this.host.socket.write(authenticationSASLContinue(serverFirst));
          this.processSafely();
        },
        (err: unknown) => this.host.failClient(err),
      );
      return;
    }
    let serverFinal: string;
    try {
      serverFinal = scram.finish(body);
    } catch (err) {
      if (err instanceof PgxError && err.code === 'INVALID_PASSWORD') throw this.loginFailed(err);
      throw err;
    }
    // SASLFinal and AuthenticationOk go out with the greeting (see authenticated()).
    this.authenticated(authenticationSASLFinal(serverFinal));
  }

  /** Counts and logs a wrong password; past the limit the 28P01 says that further attempts are slowed. */
  private loginFailed(err: PgxError): PgxError {
    const { failures, nextWaitMs } = this.ctx.loginFailures.record(this.source, this.user);
    this.ctx.logger.info('login-failed', { source: this.source, user: this.user, failures });
    if (nextWaitMs === 0 || this.throttleExempt) return err;
    return new PgxError('INVALID_PASSWORD', err.message, {
      hint: `${failures} failed logins for this user from ${this.source} within a minute (--login-failure-limit): its next attempt waits ${Math.ceil(nextWaitMs / 100) / 10} s for its turn.`,
    });
  }

  /**
   * Authentication succeeded. AuthenticationOk (after `prefix`, SCRAM's SASLFinal) is held back so it
   * goes out in one write with the greeting when a backend is ready within AUTH_OK_HOLD_MS; if getting
   * one takes longer, it goes out alone. A failure to get a backend still follows it (see failClient).
   */
  private authenticated(prefix?: Buffer): void {
    this.ctx.loginDeadlines.delete(this);
    this.scram = null;
    this.authPending = prefix ? Buffer.concat([prefix, AUTHENTICATION_OK]) : AUTHENTICATION_OK;
    this.ctx.authHolds.add(this);
    this.host.authenticated();
  }

  /** The hold ran out (ctx.authHolds): AuthenticationOk goes out alone. */
  flushAuth(): void {
    const pending = this.authPending;
    if (pending === null) return;
    this.authPending = null;
    const socket = this.host.socket;
    if (!socket.destroyed && socket.writable) socket.write(pending);
  }

  /**
   * --login-timeout runs from accept to authenticated, the TLS handshake included: a handshake not
   * finished by then is cut (no error can be sent before it ends), as is a socket that does not take
   * the FATAL within a second after it.
   */
  onLoginTimeout(): void {
    const state = this.host.state;
    if (state !== 'startup' && state !== 'authenticating') return;
    if (this.host.encrypted && !this.host.handshaken) {
      this.ctx.logger.info('protocol violation', { reason: 'TLS handshake not finished within --login-timeout' });
      this.host.close();
      this.host.socket.destroy();
      return;
    }
    this.host.failClient(new ProtocolError('canceling authentication due to timeout', '08P01'));
    const socket = this.host.socket;
    if (!socket.destroyed) socket.setTimeout(LOGIN_CLOSE_GRACE_MS, () => socket.destroy());
  }
}

/** tls-server-end-point data for the certificate this TLS connection presented; null if none fits. */
function channelBindingData(socket: tls.TLSSocket): Buffer | null {
  const cert = socket.getCertificate() as { raw?: Buffer } | null;
  return cert?.raw ? tlsServerEndPoint(cert.raw) : null;
}
