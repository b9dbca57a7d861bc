// A client session: the startup packet, authentication, getting a backend, then the pump until the
// client leaves. The state moves one way: startup -> authenticating -> connecting -> active -> closed,
// changed only by setState(). Clients see errors only through failClient().

import net from 'node:net';
import tls from 'node:tls';
import { Msg } from '../wire/codes.js';
import {
  AUTHENTICATION_OK,
  ENCRYPTION_ACCEPTED,
  ENCRYPTION_REFUSED,
  READY_IDLE,
  authenticationSASL,
  authenticationSASLContinue,
  authenticationSASLFinal,
  backendKeyData,
  negotiateProtocolVersion,
} from '../wire/backend.js';
import { errorResponse } from '../wire/error-response.js';
import { tlsServerEndPoint } from '../wire/scram.js';
import { ProtocolError, parseStartupPacket, startupPacketLength } from '../wire/frontend.js';
import { clipIdentifier } from '../wire/identifier.js';
import { PgxError, asPgxError } from '../errors.js';
import { ScramExchange, scramMechanisms } from './auth.js';
import type { BackendConnection } from './server.js';
import { BackendRefused, BackendUnreachable } from './backend-errors.js';
import { Pump } from './pump.js';
import { ControlSession } from './control.js';
import type { EngineContext } from './context.js';
import type { ClientReader, ClientState, EngineSession } from './session-types.js';
import { giveReadBuffer, largeReadBuffers, smallReadBuffers } from './read-buffers.js';

/** Largest authentication message we accept (PostgreSQL's PG_MAX_AUTH_TOKEN_LENGTH is 65535). */
const MAX_AUTH_MESSAGE = 65535;

/** Bytes a client may send ahead while it waits for a backend; beyond it its socket is paused. */
const MAX_PIPELINED = 65536;

/**
 * How long AuthenticationOk may wait for the greeting it goes out with. A backend at hand (pooled, or
 * a warm mint) is ready well within it, and the client then hears everything in one write; a slow one
 * (a template copy) lets AuthenticationOk go ahead alone, as PostgreSQL sends it before its startup.
 */
const AUTH_OK_HOLD_MS = 100;

/** How long a closing client may take to read its last bytes before its socket is destroyed. */
const CLOSE_GRACE_MS = 5000;

/** The same after a login timeout: the client has had its time already. */
const LOGIN_CLOSE_GRACE_MS = 1000;

/** The newest protocol 3.x minor version the engine speaks: 3.2 (PostgreSQL 18's, longer cancel keys). */
const NEWEST_PROTOCOL_MINOR = 2;

/** Startup parameters that select the pool and are not sent on as settings. */
const ROUTING_PARAMS = new Set(['user', 'database', 'replication']);

/**
 * Where a session's socket comes from: the listener makes it around the session's `onread` (net's
 * documented zero-copy read: one buffer, a callback per read, no Buffer, stream push or 'data' event
 * per read; see accept-onread.ts), or an accepted socket, paused, that the session reads
 * through 'data' events (a listener that cannot make sockets itself).
 */
export type ClientSocketSource = net.Socket | ((onread: net.OnReadOpts) => net.Socket);

export class ClientSession implements EngineSession {
  state: ClientState = 'startup';
  user = '';
  database = '';
  private inbuf: Buffer = Buffer.alloc(0);
  private startupParams = new Map<string, string>();
  private scram: ScramExchange | null = null;
  /** The client's first SASL message has been taken; the next one is its final message. */
  private scramStarted = false;
  private backend: BackendConnection | null = null;
  private pump: Pump | null = null;
  private cancelPid = 0;
  /** The protocol 3.x minor version spoken with the client: 2 gets a 32-byte cancel secret. */
  private protocolMinor = 0;
  /** The session observer was told this session started, so it must hear that it ended. */
  private observed = false;
  /** The session holds one of its database's slots (see session-slots.ts). */
  private slotHeld = false;
  /** False once the session is ended for the memory its backend holds: that backend is closed, not pooled. */
  private keepBackend = true;
  /** The session holds a share of the backends for its role and database (see backend-shares.ts). */
  private shareHeld = false;
  private readonly loginTimer: NodeJS.Timeout;
  private authTimer: NodeJS.Timeout | null = null;
  /** Holds a throttled login until its turn (askPassword). */
  private throttleTimer: NodeJS.Timeout | null = null;
  /** The client's bytes travel over TLS (the socket is then the TLS socket over the TCP one). */
  private encrypted = false;
  /** The TLS handshake has finished (until then nothing can be said to the client). */
  private handshaken = false;
  private socket: net.Socket;
  /**
   * Where plain reads land (see ClientReader); replaced when a reader keeps it. Small at first, since
   * every idle session holds one; a read that fills it moves the session to a large one, for COPY and
   * big statements. Back on its shelf (read-buffers.ts) when the socket has closed.
   */
  private readBuf: Buffer = smallReadBuffers.take();
  private reader: ClientReader | null = null;

  /**
   * A socket made from `source` reads into `readBuf`; an accepted one (paused) is read through 'data'
   * events. The listener has set TCP_NODELAY on TCP connections already.
   */
  constructor(
    source: ClientSocketSource,
    private readonly ctx: EngineContext,
    /** Unix socket or loopback: trusted in trust mode. */
    private readonly local: boolean,
  ) {
    if (source instanceof net.Socket) {
      this.socket = source;
      source.on('data', this.onStreamData);
      source.resume();
    } else {
      this.socket = source({ buffer: () => this.readBuf, callback: this.onRead });
    }
    this.reader = this.onLoginData;
    this.socket.on('close', this.onClose);
    this.socket.on('error', this.onSocketError);
    this.loginTimer = setTimeout(() => this.onLoginTimeout(), ctx.options.loginTimeoutMs);
  }

  /** A plain read into `readBuf`: `n` bytes, handed to the reader. Always true (go on reading). */
  private readonly onRead = (n: number, buf: Uint8Array): boolean => {
    const reader = this.reader;
    // The buffer is the one `buffer` returned, a Buffer.
    if (reader !== null && reader((buf as Buffer).subarray(0, n))) {
      // The reader holds a view of this buffer: it is not ours to reuse or give back any more.
      this.readBuf = n === buf.length || buf.length === largeReadBuffers.size ? largeReadBuffers.take() : smallReadBuffers.take();
    } else if (n === buf.length && buf.length < largeReadBuffers.size) {
      giveReadBuffer(this.readBuf);
      this.readBuf = largeReadBuffers.take();
    }
    return true;
  };

  /** A chunk from a 'data' event (TLS, or a socket adoptAccepted could not move): the reader's to keep. */
  private readonly onStreamData = (chunk: Buffer): void => {
    this.reader?.(chunk);
  };

  /** Cancels whatever the session's backend is running (CancelRequest with the backend's key). */
  cancelBackend(): void {
    if (this.backend && this.state === 'active') this.backend.cancel(this.ctx.options.backend);
  }

  /** The backend's process id while the session runs on one (the memory watchdog reads its memory). */
  get backendPid(): number | null {
    return this.state === 'active' && this.backend !== null ? this.backend.pid : null;
  }

  /** A statement is running for the client. */
  get busy(): boolean {
    return this.pump?.busy ?? false;
  }

  /** Cancels the running statement; the client sees `error` (an ErrorResponse) in place of 57014. */
  cancelStatement(error: Buffer): void {
    if (this.pump === null || this.state !== 'active') return;
    this.pump.replaceCancelError(error);
    this.cancelBackend();
  }

  /**
   * Ends the session with FATAL `error` and closes its backend rather than pooling it: the memory a
   * backend holds between statements goes back only when its process exits (the memory watchdog).
   */
  endClosingBackend(error: PgxError): void {
    this.keepBackend = false;
    this.failClient(error);
  }

  /** Ends the session from the engine's side (shutdown, a dropped database): FATAL to the client. */
  terminate(message: string, hint?: string): void {
    this.failClient(new PgxError('ADMIN_SHUTDOWN', message, hint === undefined ? {} : { hint }));
  }

  private setState(next: ClientState): void {
    this.state = next;
  }

  // ---- login phase: startup packet and authentication, read from a small buffer ----

  /** Login bytes are few: kept as a copy (a chunk may be the reused read buffer). */
  private readonly onLoginData = (chunk: Buffer): boolean => {
    this.inbuf = this.inbuf.length === 0 ? Buffer.from(chunk) : Buffer.concat([this.inbuf, chunk]);
    if (this.state === 'connecting' && this.inbuf.length >= MAX_PIPELINED) this.socket.pause();
    try {
      this.processLogin();
    } catch (err) {
      this.failClient(err);
    }
    return false;
  };

  private processLogin(): void {
    while (this.state === 'startup' || this.state === 'authenticating') {
      if (this.state === 'startup') {
        const len = startupPacketLength(this.inbuf);
        if (len < 0 || this.inbuf.length < len) return;
        const packet = this.inbuf.subarray(0, len);
        this.inbuf = this.inbuf.subarray(len);
        this.onStartupPacket(packet);
      } else {
        if (this.scram === null || this.inbuf.length < 5) return;
        const type = this.inbuf[0]!;
        const len = this.inbuf.readInt32BE(1);
        if (type !== Msg.Password) throw new ProtocolError(`expected SASL response, got message type ${type}`);
        if (len < 4 || len > MAX_AUTH_MESSAGE) throw new ProtocolError('invalid message length');
        if (this.inbuf.length < len + 1) return;
        const body = this.inbuf.subarray(5, len + 1);
        this.inbuf = this.inbuf.subarray(len + 1);
        this.onPasswordMessage(body);
        return; // the next message is read when this one is answered
      }
    }
  }

  private onStartupPacket(packet: Buffer): void {
    const msg = parseStartupPacket(packet);
    switch (msg.kind) {
      case 'ssl':
        if (this.startTls()) return;
        this.socket.write(ENCRYPTION_REFUSED);
        return;
      case 'gssenc':
        // GSSAPI encryption is not offered: the client goes on in plain text or tries TLS.
        this.socket.write(ENCRYPTION_REFUSED);
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
    if (this.ctx.options.tls?.require && !this.encrypted && !this.overUnixSocket) {
      // As PostgreSQL words a hostssl-only pg_hba.conf refusing a plain connection.
      throw new PgxError('INVALID_AUTHORIZATION', `no pg_hba.conf entry for host "${this.socket.remoteAddress}", user "${user}", database "${msg.params.get('database') || user}", no encryption`, {
        hint: 'This server accepts TCP connections over TLS only: connect with sslmode=require (or verify-full).',
      });
    }
    if (msg.params.has('replication') && msg.params.get('replication') !== 'false') {
      throw new PgxError('FEATURE_NOT_SUPPORTED', 'replication connections are not supported by PGX', {
        hint: 'Connect to PostgreSQL directly for replication; PGX serves ordinary sessions.',
      });
    }
    this.user = user;
    this.database = clipIdentifier(msg.params.get('database') || user);
    this.startupParams = msg.params;
    this.protocolMinor = Math.min(msg.minor, NEWEST_PROTOCOL_MINOR);
    if (msg.minor > NEWEST_PROTOCOL_MINOR || msg.protocolOptions.length > 0) {
      this.socket.write(negotiateProtocolVersion(this.protocolMinor, msg.protocolOptions));
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
    this.setState('authenticating');
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
      if (this.state !== 'authenticating') return;
      this.sendChallenge();
      this.processLoginSafely();
    }, wait);
  }

  private sendChallenge(): void {
    const binding = this.encrypted ? channelBindingData(this.socket as tls.TLSSocket) : null;
    this.scram = new ScramExchange(this.user, this.ctx.options.credentials, this.ctx.mockAuthSecret, binding);
    this.socket.write(authenticationSASL(scramMechanisms(binding)));
  }

  /** The admin over the Unix socket: its failures are counted and logged but never hold it up. */
  private get throttleExempt(): boolean {
    return this.overUnixSocket && this.user === (this.ctx.options.adminUser ?? 'postgres');
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
    this.close();
  }

  /** Where the client connects from, for the failed-login limit: its address, or the Unix socket. */
  private get source(): string {
    return this.socket.remoteAddress ?? 'the Unix socket';
  }

  /** Unix-socket clients have no remote address; TLS is for TCP only, as in PostgreSQL. */
  private get overUnixSocket(): boolean {
    return this.socket.remoteAddress === undefined;
  }

  /**
   * Answers an SSLRequest with 'S' and continues over TLS, when a certificate is configured; false
   * when the request is to be refused ('N'): no certificate, a Unix socket, or TLS already on.
   */
  private startTls(): boolean {
    const options = this.ctx.options.tls;
    if (!options || this.overUnixSocket) return false;
    if (this.encrypted) throw new ProtocolError('received SSLRequest on an encrypted connection');
    // Bytes sent before the handshake would be read as if they came over TLS (CVE-2021-23214).
    if (this.inbuf.length > 0) throw new ProtocolError('received unencrypted data after SSL request');
    const raw = this.socket;
    raw.write(ENCRYPTION_ACCEPTED);
    raw.off('data', this.onStreamData);
    raw.off('close', this.onClose);
    raw.off('error', this.onSocketError);
    // From here on TLS reads the TCP socket itself (its onread callback hears nothing more); the
    // plaintext arrives as 'data' events on the TLS socket.
    const secure = new tls.TLSSocket(raw, { isServer: true, secureContext: options.secureContext() });
    secure.once('secure', () => (this.handshaken = true));
    secure.on('data', this.onStreamData);
    secure.on('close', this.onClose);
    secure.on('error', this.onSocketError);
    this.socket = secure;
    this.encrypted = true;
    return true;
  }

  private onPasswordMessage(body: Buffer): void {
    const scram = this.scram!;
    if (!this.scramStarted) {
      this.scramStarted = true;
      scram.begin(body).then(
        (serverFirst) => {
          if (this.state !== 'authenticating') return;
          this.socket.write(authenticationSASLContinue(serverFirst));
          this.processLoginSafely();
        },
        (err: unknown) => this.failClient(err),
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

  /** AuthenticationOk (and SASLFinal) not yet written: they precede whatever the client hears next. */
  private authPending: Buffer | null = null;

  private readonly flushAuth = (): void => {
    this.authTimer = null;
    const pending = this.authPending;
    if (pending === null) return;
    this.authPending = null;
    if (!this.socket.destroyed && this.socket.writable) this.socket.write(pending);
  };

  /** `frames` in one buffer, preceded by any held-back authentication messages. */
  private withAuth(...frames: Buffer[]): Buffer {
    const pending = this.authPending;
    if (pending !== null) {
      this.authPending = null;
      this.clearAuthTimer();
      frames.unshift(pending);
    }
    return frames.length === 1 ? frames[0]! : Buffer.concat(frames);
  }

  private clearAuthTimer(): void {
    if (this.authTimer === null) return;
    clearTimeout(this.authTimer);
    this.authTimer = null;
  }

  private processLoginSafely(): void {
    try {
      this.processLogin();
    } catch (err) {
      this.failClient(err);
    }
  }

  /**
   * Authentication succeeded. AuthenticationOk (after `prefix`, SCRAM's SASLFinal) is held back so it
   * goes out in one write with the greeting when a backend is ready within AUTH_OK_HOLD_MS; if getting
   * one takes longer, it goes out alone. A failure to get a backend still follows it (see failClient).
   */
  private authenticated(prefix?: Buffer): void {
    clearTimeout(this.loginTimer);
    this.setState('connecting');
    this.scram = null;
    this.authPending = prefix ? Buffer.concat([prefix, AUTHENTICATION_OK]) : AUTHENTICATION_OK;
    this.authTimer = setTimeout(this.flushAuth, AUTH_OK_HOLD_MS);
    const startup: Record<string, string> = { user: this.user, database: this.database };
    const keyParts = [this.database, this.user];
    for (const [name, value] of [...this.startupParams].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (ROUTING_PARAMS.has(name)) continue;
      startup[name] = value;
      keyParts.push(name, value);
    }
    if (!this.ctx.options.backendStatus.accepting()) {
      this.failClient(notAccepting());
      return;
    }
    const router = this.ctx.options.router;
    const routed = router ? router.route({ user: this.user, database: this.database }) : Promise.resolve();
    routed
      .then((route) => {
        if (this.state !== 'connecting') return null;
        const key = keyParts.join('\0');
        const limit = route && route.maxSessions !== undefined ? route.maxSessions : (this.ctx.options.maxSessionsPerDatabase ?? null);
        const acquire = (): Promise<BackendConnection> | null => {
          if (this.state !== 'connecting') return null;
          const admin = this.isAdmin;
          if (!admin) {
            this.ctx.shares.take(this.user, this.database);
            this.shareHeld = true;
          }
          return this.ctx.pool.acquire(key, startup, admin);
        };
        if (this.takeSlot(limit)) return acquire();
        return this.admitOverCap(limit).then(acquire);
      })
      .then(
        (backend) => {
          if (backend) this.attach(backend);
        },
        (err: unknown) => this.failClient(err),
      );
  }

  /** The runtime's own roles, or any client on the Unix socket: no share, and the reserved backends. */
  private get isAdmin(): boolean {
    return this.overUnixSocket || this.ctx.options.adminRoles?.includes(this.user) === true;
  }

  /** Admits the session on its database's cap; false when the cap is reached. */
  private takeSlot(limit: number | null): boolean {
    if (!this.ctx.slots.take(this.database, limit)) return false;
    this.slotHeld = true;
    return true;
  }

  /**
   * At the cap, a superuser is admitted anyway (its session counts, as PostgreSQL counts it in a
   * database's connections while letting it past datconnlimit); anyone else gets 53300 as PostgreSQL
   * words it. The catalog is asked only here, so a session under its cap costs no lookup.
   */
  private async admitOverCap(limit: number | null): Promise<void> {
    const superuser = (await this.ctx.options.credentials.isSuperuser?.(this.user)) ?? false;
    if (this.state !== 'connecting') return;
    if (!superuser) {
      throw new PgxError('TOO_MANY_CONNECTIONS', `too many connections for database "${this.database}"`, {
        detail: `The database allows ${limit} sessions at once.`,
        hint: 'Close idle sessions (or connect through a client pool), or raise the limit: --max-sessions-per-db, or the database\'s connection_limit.',
      });
    }
    this.takeSlot(null);
  }

  private attach(backend: BackendConnection): void {
    if (this.state !== 'connecting') {
      // The client left while we waited: the backend is untouched and goes straight back.
      this.ctx.pool.release(backend, true);
      return;
    }
    this.backend = backend;
    const key = this.ctx.cancelKeys.issue(this, backend.pid, this.protocolMinor >= 2);
    this.cancelPid = key.pid;
    const keyData = backendKeyData(key.pid, key.secret);
    // A fresh backend's first client hears what PostgreSQL said at login (a login trigger's notices).
    const login = backend.takeLoginGreeting();
    this.socket.write(login ? this.withAuth(login[0], keyData, login[1], READY_IDLE) : this.withAuth(backend.parameterFrames(), keyData, READY_IDLE));
    this.setState('active');
    this.ctx.options.sessionObserver?.sessionStarted(this.database);
    this.observed = true;
    this.reader = null;
    const leftover = this.inbuf.length > 0 ? this.inbuf : null;
    this.inbuf = Buffer.alloc(0);
    const backendLeftover = backend.leftover;
    backend.leftover = null;
    backend.socket.on('close', this.onBackendClose);
    const control = this.ctx.options.control;
    this.pump = new Pump(
      { socket: this.socket, setReader: (reader) => (this.reader = reader) },
      backend,
      {
        terminate: () => this.close(true),
        violation: (type, length) => this.failClient(violationError(type, length)),
        failed: (err) => this.failClient(err),
      },
      control ? new ControlSession(control, { user: this.user, database: this.database }, this.ctx.logger) : null,
      this.ctx.activeSlots.enabled ? { slots: this.ctx.activeSlots, database: this.database } : null,
    );
    // Paused by onLoginData if it sent too much ahead; the pump may pause it again for backpressure.
    if (this.socket.isPaused()) this.socket.resume();
    this.pump.start(leftover, backendLeftover);
  }

  // ---- ending ----

  private readonly onBackendClose = (): void => {
    // PostgreSQL ended the session (FATAL, shutdown): what it said has been forwarded; follow it.
    this.backend = null;
    this.pump?.stop();
    this.pump = null;
    this.close();
  };

  private readonly onSocketError = (err: Error): void => {
    this.ctx.logger.debug('client socket error', { err: err.message, user: this.user, database: this.database });
  };

  private readonly onClose = (): void => {
    this.close();
    // Closed: no read can come any more, and no reader holds a view of the current buffer.
    giveReadBuffer(this.readBuf);
  };

  /**
   * --login-timeout runs from accept to authenticated, the TLS handshake included: a handshake not
   * finished by then is cut (no error can be sent before it ends), as is a socket that does not take
   * the FATAL within a second after it.
   */
  private onLoginTimeout(): void {
    if (this.state !== 'startup' && this.state !== 'authenticating') return;
    if (this.encrypted && !this.handshaken) {
      this.ctx.logger.info('protocol violation', { reason: 'TLS handshake not finished within --login-timeout' });
      this.close();
      this.socket.destroy();
      return;
    }
    this.failClient(new ProtocolError('canceling authentication due to timeout', '08P01'));
    if (!this.socket.destroyed) this.socket.setTimeout(LOGIN_CLOSE_GRACE_MS, () => this.socket.destroy());
  }

  /**
   * The one way errors reach a client: an ErrorResponse with severity FATAL, SQLSTATE, message and
   * hint, then the connection closes. Internal errors are logged with their cause and shown as XX000.
   */
  failClient(err: unknown): void {
    if (this.state === 'closed') return;
    let frame: Buffer;
    if (err instanceof BackendRefused) {
      frame = err.frame;
    } else if (err instanceof ProtocolError) {
      frame = errorResponse({ severity: 'FATAL', code: err.sqlstate, message: err.message });
      this.ctx.logger.info('protocol violation', { reason: err.message, user: this.user || undefined });
    } else if (err instanceof BackendUnreachable) {
      frame = toFrame(notAccepting());
      this.ctx.logger.warn('backend unreachable', { reason: err.message });
    } else {
      const e = asPgxError(err);
      if (e.code === 'INTERNAL') this.ctx.logger.error('internal error in client session', { err: e.cause ?? e });
      frame = toFrame(e);
    }
    if (!this.socket.destroyed && this.socket.writable) this.socket.write(this.withAuth(frame));
    this.close();
  }

  /**
   * Releases everything the session holds; idempotent. `terminated`: the client sent Terminate, so
   * once everything written has gone out there is nothing to wait for (see the end).
   */
  close(terminated = false): void {
    if (this.state === 'closed') return;
    this.setState('closed');
    clearTimeout(this.loginTimer);
    if (this.throttleTimer !== null) clearTimeout(this.throttleTimer);
    this.clearAuthTimer();
    this.authPending = null;
    this.ctx.sessions.delete(this);
    if (this.cancelPid) this.ctx.cancelKeys.revoke(this.cancelPid);
    const backend = this.backend;
    this.backend = null;
    if (this.observed) this.ctx.options.sessionObserver?.sessionEnded(this.database);
    if (this.slotHeld) {
      this.slotHeld = false;
      this.ctx.slots.give(this.database);
    }
    if (this.shareHeld) {
      this.shareHeld = false;
      this.ctx.shares.give(this.user, this.database);
    }
    if (backend) {
      backend.socket.off('close', this.onBackendClose);
      const reusable = this.keepBackend && (this.pump?.reusable ?? false);
      this.pump?.stop();
      this.ctx.pool.release(backend, reusable);
    }
    this.pump = null;
    this.reader = null;
    if (!this.socket.destroyed) {
      // After Terminate with nothing left to send, a plain socket closes at once, as PostgreSQL and
      // PgBouncer close it (no shutdown, no wait for the client's FIN, no grace timer). TLS ends
      // with end(), which sends close_notify first, as PostgreSQL does.
      if (terminated && !this.encrypted && this.socket.writableLength === 0) {
        this.socket.destroy();
        return;
      }
      this.socket.end();
      // A client that never reads its socket must not hold it open forever.
      this.socket.setTimeout(CLOSE_GRACE_MS, () => this.socket.destroy());
      this.socket.once('close', () => this.socket.setTimeout(0));
    }
  }
}

/** tls-server-end-point data for the certificate this TLS connection presented; null if none fits. */
function channelBindingData(socket: tls.TLSSocket): Buffer | null {
  const cert = socket.getCertificate() as { raw?: Buffer } | null;
  return cert?.raw ? tlsServerEndPoint(cert.raw) : null;
}

function toFrame(e: PgxError): Buffer {
  return errorResponse({ severity: 'FATAL', code: e.sqlstate, message: e.message, detail: e.detail, hint: e.hint });
}

function notAccepting(): PgxError {
  return new PgxError('CANNOT_CONNECT_NOW', 'the database system is not accepting connections', {
    hint: 'PostgreSQL is starting or restarting under the PGX runtime; retry in a moment (see `pgx status`).',
  });
}

function violationError(type: number, length: number): ProtocolError {
  if (length < 4 || length > 0x3fffffff) return new ProtocolError(`invalid message length ${length}`);
  return new ProtocolError(`invalid frontend message type ${type}`);
}
