// A client session: its login (client-login.ts: the startup packet, TLS, authentication), getting a
// backend, then the pump until the client leaves. The state moves one way: startup -> authenticating
// -> connecting -> active -> closed, changed only by setState() (the login asks for its moves).
// Clients see errors only through failClient().

import net from 'node:net';
import tls from 'node:tls';
import { ENCRYPTION_ACCEPTED, READY_IDLE, backendKeyData, dataRows } from '../wire/backend.js';
import { errorResponse } from '../wire/error-response.js';
import { ProtocolError } from '../wire/frontend.js';
import { PgxError, asPgxError } from '../errors.js';
import type { BackendConnection } from './server.js';
import { BackendRefused, BackendUnreachable } from './backend-errors.js';
import { Pump } from './pump.js';
import { ControlSession } from './control.js';
import { ClientLogin, type LoginHost } from './client-login.js';
import type { EngineContext } from './context.js';
import type { ClientReader, ClientState, EngineSession } from './session-types.js';
import { giveReadBuffer, largeReadBuffers, smallReadBuffers } from './read-buffers.js';

/** How long a closing client may take to read its last bytes before its socket is destroyed. */
const CLOSE_GRACE_MS = 5000;

/** Startup parameters that select the pool and are not sent on as settings. */
const ROUTING_PARAMS = new Set(['user', 'database', 'replication']);

/**
 * Where a session's socket comes from: the listener makes it around the session's `onread` (net's
 * documented zero-copy read: one buffer, a callback per read, no Buffer, stream push or 'data' event
 * per read; see accept-onread.ts), or an accepted socket, paused, that the session reads
 * through 'data' events (a listener that cannot make sockets itself).
 */
export type ClientSocketSource = net.Socket | ((onread: net.OnReadOpts) => net.Socket);

/**
 * Where a client connects from, as the listener accepted it: read once there (a getpeername call),
 * not from the socket on every check.
 */
export interface ClientPeer {
  /** Over the Unix socket: no address, no TLS, the admin's way in. */
  unix: boolean;
  /** The TCP peer's address; undefined over the Unix socket. */
  address: string | undefined;
}

/** Loopback TCP peers are trusted in trust mode, as the Unix socket is. */
function isLoopback(address: string | undefined): boolean {
  if (!address) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

export class ClientSession implements EngineSession, LoginHost {
  state: ClientState = 'startup';
  user = '';
  database = '';
  /** The login phase: startup packet, TLS, password, and what it leaves for the session. */
  private readonly login: ClientLogin;
  private backend: BackendConnection | null = null;
  private pump: Pump | null = null;
  private cancelPid = 0;
  /** The session observer was told this session started, so it must hear that it ended. */
  private observed = false;
  /** The session holds one of its database's slots (see session-slots.ts). */
  private slotHeld = false;
  /** False once the session is ended for the memory its backend holds: that backend is closed, not pooled. */
  private keepBackend = true;
  /** The session holds a share of the backends for its role and database (see backend-shares.ts). */
  private shareHeld = false;
  /** The client's bytes travel over TLS (the socket is then the TLS socket over the TCP one). */
  encrypted = false;
  /** The TLS handshake has finished (until then nothing can be said to the client). */
  handshaken = false;
  /** The client's socket: the TLS one once the connection is upgraded. */
  socket: net.Socket;
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
    /** Where the client connects from: the Unix socket, or TCP from `address`. */
    readonly peer: ClientPeer,
  ) {
    if (source instanceof net.Socket) {
      this.socket = source;
      source.on('data', this.onStreamData);
      source.resume();
    } else {
      this.socket = source({ buffer: () => this.readBuf, callback: this.onRead });
    }
    this.socket.on('close', this.onClose);
    this.socket.on('error', this.onSocketError);
    this.login = new ClientLogin(ctx, peer.unix || isLoopback(peer.address), this);
    this.reader = this.login.onData;
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
    const pump = this.pump;
    if (pump === null || this.state !== 'active' || this.backend === null) return;
    pump.replaceCancelError(error);
    this.backend.cancel(this.ctx.options.backend, () => pump.cancelTaken());
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

  // ---- from the login to the backend (the login calls these: LoginHost) ----

  /** The startup packet named this user and database (as PostgreSQL will see them). */
  named(user: string, database: string): void {
    this.user = user;
    this.database = database;
  }

  /** A password is asked for. */
  authenticating(): void {
    this.setState('authenticating');
  }

  /**
   * Answers an SSLRequest with 'S' and continues over TLS, when a certificate is configured; false
   * when the request is to be refused ('N'): no certificate, a Unix socket, or TLS already on.
   */
  startTls(buffered: number): boolean {
    const options = this.ctx.options.tls;
    if (!options || this.peer.unix) return false;
    if (this.encrypted) throw new ProtocolError('received SSLRequest on an encrypted connection');
    // Bytes sent before the handshake would be read as if they came over TLS (CVE-2021-23214).
    if (buffered > 0) throw new ProtocolError('received unencrypted data after SSL request');
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

  /**
   * The login authenticated the client (its AuthenticationOk is held back for the greeting, see
   * client-login.ts): the session gets a backend, through its database's cap and its share.
   */
  authenticated(): void {
    this.setState('connecting');
    const startup: Record<string, string> = { user: this.user, database: this.database };
    const keyParts = [this.database, this.user];
    for (const [name, value] of [...this.login.params].sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))) {
      if (ROUTING_PARAMS.has(name)) continue;
      startup[name] = value;
      keyParts.push(name, value);
    }
    if (!this.ctx.options.backendStatus.accepting()) {
      this.failClient(notAccepting());
      return;
    }
    const router = this.ctx.options.router;
    const routed = router ? router.route({ user: this.user, database: this.database }, true) : Promise.resolve();
    // One hop from the route to the pool's answer: the backend's promise is not adopted by another.
    routed.then((route) => {
      if (this.state !== 'connecting') return;
      const limit = route && route.maxSessions !== undefined ? route.maxSessions : (this.ctx.options.maxSessionsPerDatabase ?? null);
      const key = keyParts.join('\0');
      // As the DataRows the backend's own baseline query would send: the checks compare them byte for byte.
      const baseline = route?.loginBaselineRows ? dataRows(route.loginBaselineRows) : undefined;
      try {
        const login = this.takeSlot(limit) ? this.acquire(key, startup, baseline) : this.admitOverCap(limit).then(() => this.acquire(key, startup, baseline));
        const backend = route?.made ? this.besideMint(route.made, login, () => this.ctx.pool.acquire(key, startup, this.isAdmin, baseline)) : login;
        backend?.then(this.onBackend, this.onConnectFailed);
      } catch (err) {
        this.failClient(err);
      }
    }, this.onConnectFailed);
  }

  /**
   * A login that went out while the router was still making the database (Route.made): its backend
   * is the session's once the database is made. One that looked the name up before it existed
   * (3D000) logs in `again`; one for a mint that failed is closed unserved, whatever it logged into.
   */
  private async besideMint(made: Promise<unknown>, login: Promise<BackendConnection | null> | null, again: () => Promise<BackendConnection>): Promise<BackendConnection | null> {
    const [mint, backend] = await Promise.allSettled([made, login]);
    if (mint.status === 'rejected') {
      if (backend.status === 'fulfilled' && backend.value !== null) this.ctx.pool.release(backend.value, false);
      throw mint.reason;
    }
    if (backend.status === 'fulfilled') return backend.value;
    if (backend.reason instanceof BackendRefused && backend.reason.sqlstate === '3D000' && this.state === 'connecting') {
      // PostgreSQL logged the early login's FATAL (database does not exist): this says why.
      this.ctx.logger.debug('login-beside-mint-retried', { database: this.database, reason: 'the login looked the name up before its claim committed' });
      return again();
    }
    throw backend.reason;
  }

  /** A backend from the pool, through the session's share (the admin's sessions take none); null if the client left. */
  private acquire(key: string, startup: Record<string, string>, loginBaseline?: Buffer): Promise<BackendConnection> | null {
    if (this.state !== 'connecting') return null;
    const admin = this.isAdmin;
    if (!admin) {
      this.ctx.shares.take(this.user, this.database);
      this.shareHeld = true;
    }
    return this.ctx.pool.acquire(key, startup, admin, loginBaseline);
  }

  private readonly onBackend = (backend: BackendConnection | null): void => {
    if (backend) this.attach(backend);
  };

  private readonly onConnectFailed = (err: unknown): void => this.failClient(err);

  /** The runtime's own roles, or any client on the Unix socket: no share, and the reserved backends. */
  private get isAdmin(): boolean {
    return this.peer.unix || this.ctx.options.adminRoles?.includes(this.user) === true;
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
    const key = this.ctx.cancelKeys.issue(this, backend.pid, this.login.protocolMinor >= 2);
    this.cancelPid = key.pid;
    const keyData = backendKeyData(key.pid, key.secret);
    // A fresh backend's first client hears what PostgreSQL said at login (a login trigger's notices).
    const login = backend.takeLoginGreeting();
    this.socket.write(login ? this.login.withAuth(login[0], keyData, login[1], READY_IDLE) : this.login.withAuth(backend.parameterFrames(), keyData, READY_IDLE));
    this.setState('active');
    this.ctx.options.sessionObserver?.sessionStarted(this.database);
    this.observed = true;
    this.reader = null;
    const leftover = this.login.takePipelined();
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
    // Paused by the login's reader if it sent too much ahead; the pump may pause it again for backpressure.
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
    if (!this.socket.destroyed && this.socket.writable) this.socket.write(this.login.withAuth(frame));
    this.close();
  }

  /**
   * Releases everything the session holds; idempotent. `terminated`: the client sent Terminate, so
   * once everything written has gone out there is nothing to wait for (see the end).
   */
  close(terminated = false): void {
    if (this.state === 'closed') return;
    this.setState('closed');
    this.login.stop();
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
