// One connection from the engine to PostgreSQL over its private Unix socket: the startup handshake,
// the phases in which the engine itself talks to PostgreSQL (the login check and reset between client
// sessions are backend-login-checks.ts's, run here as phases), and the cancel side channel. While a
// client session holds it, the session reads and writes the socket directly (see pump.ts).
//
// Reads go through net's `onread` into one reused buffer per connection, handed to whoever reads the
// backend now (a phase, the idle watch, a session's pump): no Buffer and no stream event per read.
// A reader keeps nothing from a chunk past its call unless it says so (see BackendReader).

import net from 'node:net';
import { serialize } from 'pg-protocol';
import { Auth, Msg } from '../wire/codes.js';
import { FrameAction, FrameScanner, Verdict, actionTable, type FrameSink } from '../wire/frame.js';
import { parseErrorFields } from '../wire/error-response.js';
import type { BackendAddress } from './ports.js';
import { socketPath } from '../wire/socket-path.js';
import { LOGIN_BASELINE } from './login-check.js';
import { LoginChecks, type PhaseHandler, type PhaseRunner } from './backend-login-checks.js';
import { BackendRefused, BackendUnreachable } from './backend-errors.js';
import { largeReadBuffers } from './read-buffers.js';

/** Every message is read whole while the engine itself talks to PostgreSQL. */
const ALL_WHOLE = actionTable({}, FrameAction.Whole);
const PHASE_SCANNER = { actions: ALL_WHOLE, maxLength: 0x3fffffff, maxWholeLength: 0x3fffffff };

function socketPathOf(addr: BackendAddress): string {
  return socketPath(addr.socketDir, addr.port);
}

/** Bytes kept for the next reader while nobody reads; more than this and the backend is dropped. */
const MAX_UNREAD = 1 << 20;

/**
 * Whoever reads a backend now. `chunk` is a view of a buffer the next read overwrites: the reader copies
 * what it keeps, or returns true when something still refers to it (a write that did not go out at
 * once), and the connection then reads into a fresh buffer from the next read on.
 */
export type BackendReader = (chunk: Buffer) => boolean;

export class BackendConnection {
  /**
   * The connection is ending or ended (destroyed, terminated, or closed by PostgreSQL): a fact about
   * the socket, not a pool state (the pool keeps those, pool.ts).
   */
  private ended = false;
  /** ParameterStatus messages as PostgreSQL last sent them, by name, byte for byte. */
  private readonly params = new Map<string, Buffer>();
  /** `params` in one buffer, as a client's greeting carries them; rebuilt after a change. */
  private paramFrames: Buffer | null = null;
  pid = 0;
  secret = 0;
  /** When it last became idle (monotonic ms), for the idle timeout. */
  idleSince = 0;
  /** Bytes PostgreSQL sent after the last phase ended; the next reader consumes them first. */
  leftover: Buffer | null = null;
  /** Pool key: the database, user and startup parameters this backend was started with. */
  key = '';
  /** The startup packet went out: from then on the connection ends with Terminate. */
  private started = false;
  /** The login baseline and the checks of each hand-out (backend-login-checks.ts). */
  private readonly checks = new LoginChecks();
  /** While the login baseline's answer is still to come: the reader to hand the socket to then. */
  private afterBaseline: BackendReader | null = null;
  /**
   * What PostgreSQL said between AuthenticationOk and ReadyForQuery at login, in order, when that
   * included a notice (a login event trigger's, a collation warning): the first client's greeting
   * replays it. `keyAt`: where BackendKeyData stood among them.
   */
  private loginFrames: Buffer[] | null = null;
  private loginNoticed = false;
  private keyAt = 0;

  readonly socket: net.Socket;
  /** Back on its shelf when the socket has closed (read-buffers.ts). */
  private readBuf = largeReadBuffers.take();
  private reader: BackendReader | null = null;

  // The phase running now (see runPhase): its handler, and whom to tell when it ends or fails.
  private phase: PhaseHandler | null = null;
  private phaseDone: (() => void) | null = null;
  private phaseFail: ((err: Error) => void) | null = null;
  private phaseScanner: FrameScanner | null = null;
  private readonly phaseSink: FrameSink = {
    forward: () => {},
    note: () => {},
    invalid: () => this.destroy(),
    frame: (type, buf, start, end) => (this.phase !== null && this.onPhaseFrame(this.phase, type, buf.subarray(start, end)) ? Verdict.DropAndPause : Verdict.Drop),
  };
  /** One message to the phase's handler; true when the phase has ended (done, or failed). */
  private onPhaseFrame(handler: PhaseHandler, type: number, frame: Buffer): boolean {
    const done = this.phaseDone;
    const fail = this.phaseFail;
    try {
      if (handler(type, frame) === 'more') return false;
    } catch (err) {
      this.endPhase();
      fail?.(err instanceof Error ? err : new Error(String(err)));
      return true;
    }
    this.endPhase();
    done?.();
    return true;
  }
  private readonly onPhaseData = (chunk: Buffer): boolean => {
    const stop = this.phaseScanner!.feed(chunk, this.phaseSink);
    if (stop < 0 || stop >= chunk.length) return false;
    // The rest after the phase: to the session that took the backend during it (the login baseline's
    // answer, see start), else copied for the next reader (the scanner copies what straddles chunks).
    const rest = chunk.subarray(stop);
    const next = this.reader;
    if (next !== null && next !== this.onPhaseData) return next(rest);
    this.leftover = Buffer.from(rest);
    return false;
  };
  private readonly onPhaseEnd = (err?: Error): void => {
    const fail = this.phaseFail;
    this.endPhase();
    this.destroy();
    fail?.(new BackendUnreachable(err ? err.message : 'PostgreSQL closed the connection', { cause: err }));
  };

  private constructor(
    path: string,
    /** When the socket was opened (monotonic ms). */
    readonly openedAt: number,
  ) {
    const socket = net.connect({
      path,
      onread: {
        // Asked once at first, then after every read: the buffer for the next one.
        buffer: () => this.readBuf,
        callback: this.onRead,
      },
    });
    this.socket = socket;
    socket.setNoDelay(true);
    // A closed socket while idle or resetting takes the backend out of service; while a session
    // holds it, the session's own close handler runs as well. A close or error during a phase ends it.
    socket.on('close', () => {
      this.ended = true;
      // No read can come any more, and whoever read the last one copied what it kept.
      largeReadBuffers.give(this.readBuf);
      if (this.phase !== null) this.onPhaseEnd();
    });
    socket.on('error', (err) => {
      if (this.phase !== null) this.onPhaseEnd(err);
    });
  }

  /**
   * Opens the socket and nothing more. PostgreSQL forks a backend for it at once, which then waits
   * (up to its authentication_timeout) for the startup packet: start() later skips the fork, about a
   * quarter of a backend's connect time (see pool.ts, prepared connections).
   */
  static prepare(addr: BackendAddress, now: number): BackendConnection {
    return new BackendConnection(socketPathOf(addr), now);
  }

  /**
   * Sends the startup packet and completes the handshake (trust auth on the private socket). With
   * `baseline` true, the login baseline query goes out behind the startup packet in the same write; the
   * backend is handed over at the login's ReadyForQuery all the same, and the baseline's answer is read
   * off ahead of the first client's (see baselinePending), so a new backend's client does not wait
   * for a round trip it does not need. A Buffer is that answer's rows read before the login (a warm
   * mint's claim): nothing is sent behind the startup packet. False (a pool that keeps no idle
   * backend): the backend never serves a second client.
   */
  start(startup: Record<string, string>, key: string, baseline: boolean | Buffer = true): Promise<BackendConnection> {
    const socket = this.socket;
    if (this.ended || socket.destroyed) {
      return Promise.reject(new BackendUnreachable('PostgreSQL closed the connection before its startup'));
    }
    this.key = key;
    this.started = true;
    const frames: Buffer[] = [];
    this.loginFrames = frames;
    return new Promise((resolve, reject) => {
      const send = (): void => {
        socket.cork();
        socket.write(serialize.startup(startup));
        if (baseline === true) socket.write(LOGIN_BASELINE);
        socket.uncork();
      };
      if (socket.connecting) socket.once('connect', send);
      else send();
      let loggedIn = false;
      this.runPhase(
        (type, frame) => {
          if (loggedIn) return this.checks.onBaseline(type, frame);
          switch (type) {
            case Msg.Authentication:
              if (frame.readInt32BE(5) !== Auth.Ok) {
                throw new BackendUnreachable('PostgreSQL asked the engine for a password on its private socket');
              }
              return 'more';
            case Msg.ParameterStatus:
              frames.push(this.recordParameter(frame));
              return 'more';
            case Msg.NoticeResponse:
              frames.push(Buffer.from(frame));
              this.loginNoticed = true;
              return 'more';
            case Msg.BackendKeyData:
              this.pid = frame.readInt32BE(5);
              this.secret = frame.readInt32BE(9);
              this.keyAt = frames.length;
              return 'more';
            case Msg.ErrorResponse: {
              const fields = parseErrorFields(frame.subarray(5));
              throw new BackendRefused(Buffer.from(frame), fields.get('C') ?? 'XX000', fields.get('M') ?? 'connection refused');
            }
            case Msg.ReadyForQuery:
              loggedIn = true;
              if (!this.loginNoticed) this.loginFrames = null;
              if (baseline === true) this.checks.expectBaseline();
              else if (baseline) this.checks.adopt(baseline);
              resolve(this);
              return baseline === true ? 'more' : 'done';
            default:
              return 'more';
          }
        },
        () => {},
        (err) => {
          // Before the login's ReadyForQuery: the caller learns why. After it (the baseline failed
          // with the socket): the session holding the backend sees it close.
          this.destroy();
          this.checks.settled();
          reject(err);
        },
      );
    });
  }

  /**
   * The greeting for the first client of a fresh backend when PostgreSQL said more than parameters at
   * login: [frames before BackendKeyData, frames after it], as sent; null otherwise (then the greeting
   * is parameterFrames()). Given once.
   */
  takeLoginGreeting(): [Buffer, Buffer] | null {
    const frames = this.loginFrames;
    if (frames === null) return null;
    this.loginFrames = null;
    return [Buffer.concat(frames.slice(0, this.keyAt)), Buffer.concat(frames.slice(this.keyAt))];
  }

  /** Ending or ended: it can serve nobody any more. */
  get closed(): boolean {
    return this.ended;
  }

  /** False when this backend must not serve another client: its login could not be checked. */
  get poolable(): boolean {
    return this.checks.poolable;
  }

  /** The last session left its state in the backend: the next login check goes out behind DISCARD ALL. */
  set dirty(dirty: boolean) {
    this.checks.dirty = dirty;
  }

  /**
   * Whether a fresh login now would give what this backend has (see login-check.ts): `done(false)`
   * when it would not, or could not be told; the caller then closes it.
   */
  checkLogin(done: (ok: boolean) => void): void {
    this.checks.check(this.phases, done);
  }

  /** What the login checks use of this connection. */
  private readonly phases: PhaseRunner = {
    runPhase: (handler, done, fail) => this.runPhase(handler, done, fail),
    write: (frame) => void this.socket.write(frame),
    recordParameter: (frame) => void this.recordParameter(frame),
    closed: () => this.ended,
  };

  /**
   * Ends the connection and resolves once PostgreSQL has closed it: its backend has then left the
   * process array, so a new login no longer counts it against a connection limit.
   */
  closeAndWait(): Promise<void> {
    return new Promise((resolve) => {
      if (this.socket.destroyed) return resolve();
      const timer = setTimeout(() => this.socket.destroy(), CLOSE_WAIT_MS);
      this.socket.once('close', () => {
        clearTimeout(timer);
        resolve();
      });
      this.ended = true;
      if (this.socket.writable) this.socket.end(TERMINATE);
      else this.socket.destroy();
    });
  }

  /** Sends a CancelRequest for this backend on a fresh connection, as PostgreSQL requires. */
  cancel(addr: BackendAddress, taken?: () => void): void {
    const side = net.connect(socketPathOf(addr));
    side.on('error', () => side.destroy());
    side.once('connect', () => side.end(serialize.cancel(this.pid, this.secret)));
    // PostgreSQL closes the connection once it has signalled the backend (or found no such backend).
    if (taken) side.once('close', taken);
  }

  /**
   * Hands the backend's reads to `reader` (a session's pump) from now on; null: nobody reads, and bytes
   * that arrive are kept in `leftover` for the next reader.
   */
  setReader(reader: BackendReader | null): void {
    if (this.checks.pending) this.afterBaseline = reader;
    else this.reader = reader;
  }

  /** Always true (go on reading): backpressure pauses the socket itself (pump.ts), as onread allows. */
  private readonly onRead = (n: number, buf: Uint8Array): boolean => {
    // The buffer is the one `buffer` returned, a Buffer.
    const chunk = (buf as Buffer).subarray(0, n);
    const reader = this.reader;
    if (reader === null) this.keep(chunk);
    else if (reader(chunk)) this.readBuf = largeReadBuffers.take();
    return true;
  };

  /**
   * Between readers PostgreSQL has nothing to say but the odd unprompted message: it waits in
   * `leftover` for the next reader. A backend on its way out (a session left mid-result) is not
   * listened to at all, and one that says too much is dropped.
   */
  private keep(chunk: Buffer): void {
    if (this.ended) return;
    const kept = this.leftover;
    if (kept !== null && kept.length + chunk.length > MAX_UNREAD) {
      this.leftover = null;
      this.destroy();
      return;
    }
    this.leftover = kept === null ? Buffer.from(chunk) : Buffer.concat([kept, chunk]);
  }

  /** Watches an idle pooled backend: anything PostgreSQL says unprompted (a FATAL at shutdown) ends it. */
  watchIdle(): void {
    this.setReader(this.onIdleData);
  }

  unwatchIdle(): void {
    if (this.afterBaseline === this.onIdleData) this.afterBaseline = null;
    if (this.reader === this.onIdleData) this.reader = null;
  }

  private readonly onIdleData = (): boolean => {
    this.destroy();
    return false;
  };

  destroy(): void {
    this.ended = true;
    if (!this.socket.destroyed) {
      // Before its startup PostgreSQL would read Terminate as a malformed startup packet and log it.
      if (this.started && this.socket.writable) this.socket.end(TERMINATE);
      this.socket.destroySoon();
    }
  }

  /** Every ParameterStatus PostgreSQL has sent, the latest per name, as it sent them: a client's greeting. */
  parameterFrames(): Buffer {
    this.paramFrames ??= Buffer.concat([...this.params.values()]);
    return this.paramFrames;
  }

  /** Keeps a ParameterStatus; returns the copy kept (`frame` is a view of the read buffer). */
  private recordParameter(frame: Buffer): Buffer {
    const copy = Buffer.from(frame);
    const nameEnd = frame.indexOf(0, 5);
    if (nameEnd < 0 || frame.indexOf(0, nameEnd + 1) < 0) return copy;
    this.params.set(frame.toString('utf8', 5, nameEnd), copy);
    this.paramFrames = null;
    return copy;
  }

  /**
   * Reads whole messages with `handler` until it answers 'done' (then `done` runs) or throws (then
   * `fail` runs). A close or socket error ends the phase with BackendUnreachable.
   */
  private runPhase(handler: PhaseHandler, done: () => void, fail: (err: Error) => void): void {
    // A phase ends on a message boundary (a whole ReadyForQuery), so the scanner serves the next one;
    // a phase that broke off mid-message took the connection with it.
    if (this.phaseScanner === null || !this.phaseScanner.atBoundary) this.phaseScanner = new FrameScanner(PHASE_SCANNER);
    this.phase = handler;
    this.phaseDone = done;
    this.phaseFail = fail;
    this.reader = this.onPhaseData;
    const pending = this.leftover;
    if (pending) {
      this.leftover = null;
      this.onPhaseData(pending);
    }
  }

  private endPhase(): void {
    this.phase = null;
    this.phaseDone = null;
    this.phaseFail = null;
    if (this.reader === this.onPhaseData) this.reader = this.afterBaseline;
    this.afterBaseline = null;
  }
}

/** How long closeAndWait waits for PostgreSQL to close before destroying the socket itself. */
const CLOSE_WAIT_MS = 2000;
const TERMINATE = serialize.end();
