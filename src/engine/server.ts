// One connection from the engine to PostgreSQL over its private Unix socket: the startup handshake,
// the login check and reset between client sessions (one write, see checkLogin), and the cancel side
// channel. While a client session holds it, the session reads and writes the socket directly (see
// pump.ts); this file only owns the phases where the engine itself talks to PostgreSQL.
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
import { FULL_CHECK, FUNCTION_RESULT_AT, LOGIN_BASELINE, SNAPSHOT, columnByte, copyColumn, valueEquals } from './login-check.js';
import { largeReadBuffers } from './read-buffers.js';

/** PostgreSQL refused the connection with an ErrorResponse; `frame` is that message, byte for byte. */
export class BackendRefused extends Error {
  constructor(
    readonly frame: Buffer,
    readonly sqlstate: string,
    message: string,
  ) {
    super(message);
    this.name = 'BackendRefused';
  }
}

/** The socket failed or closed before PostgreSQL answered. */
export class BackendUnreachable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BackendUnreachable';
  }
}

/** Every message is read whole while the engine itself talks to PostgreSQL. */
const ALL_WHOLE = actionTable({}, FrameAction.Whole);
const PHASE_SCANNER = { actions: ALL_WHOLE, maxLength: 0x3fffffff, maxWholeLength: 0x3fffffff };

export function socketPath(addr: BackendAddress): string {
  return `${addr.socketDir}/.s.PGSQL.${addr.port}`;
}

type PhaseHandler = (type: number, frame: Buffer) => 'more' | 'done';

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
  /**
   * What the login's defaults came from: LOGIN_BASELINE's DataRows as PostgreSQL sent them, end to end
   * (see login-check.ts); null: unknown (the query failed), and the backend is never handed to
   * another client.
   */
  private loginBaseline: Buffer | null = null;
  private baselineRows: Buffer[] | null = null;
  /**
   * The login baseline's answer is still to come: the backend was handed to its first client at the
   * login's ReadyForQuery, and the baseline's messages are read off before anything reaches that
   * client (PostgreSQL answers in order, so they come first). `afterBaseline`: the reader to hand the
   * socket to then.
   */
  private baselinePending = false;
  private afterBaseline: BackendReader | null = null;
  /** Settles when the baseline's answer has been read (or the backend failed meanwhile). */
  private baselineRead: Promise<void> = Promise.resolve();
  private settleBaseline: () => void = () => {};
  /**
   * The last session's state is still in the backend: the reset (DISCARD ALL) goes out with the next
   * login check, in the same write, so a reuse costs one round trip (see pool.ts).
   */
  dirty = false;
  /** The snapshot column of the last full check that passed without a connection limit; null: none. */
  private verifiedSnapshot: Buffer | null = null;
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

  private phase: PhaseHandler | null = null;
  private phaseScanner: FrameScanner | null = null;
  private phaseFail: ((err: Error) => void) | null = null;
  private readonly phaseSink: FrameSink = {
    forward: () => {},
    note: () => {},
    invalid: () => this.destroy(),
    frame: (type, buf, start, end) =>
      this.phase !== null && this.phase(type, buf.subarray(start, end)) === 'done' ? Verdict.DropAndPause : Verdict.Drop,
  };
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
    return new BackendConnection(socketPath(addr), now);
  }

  /**
   * Sends the startup packet and completes the handshake (trust auth on the private socket). With
   * `baseline`, the login baseline query goes out behind the startup packet in the same write; the
   * backend is handed over at the login's ReadyForQuery all the same, and the baseline's answer is read
   * off ahead of the first client's (see baselinePending), so a new backend's client does not wait
   * for a round trip it does not need. Without (a pool that keeps no idle backend), the backend never
   * serves a second client.
   */
  start(startup: Record<string, string>, key: string, baseline = true): Promise<BackendConnection> {
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
        if (baseline) socket.write(LOGIN_BASELINE);
        socket.uncork();
      };
      if (socket.connecting) socket.once('connect', send);
      else send();
      let loggedIn = false;
      this.runPhase(
        (type, frame) => {
          if (loggedIn) return this.onBaseline(type, frame);
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
              if (baseline) {
                this.baselinePending = true;
                this.baselineRows = [];
                this.baselineRead = new Promise((settle) => (this.settleBaseline = settle));
              }
              resolve(this);
              return baseline ? 'more' : 'done';
            default:
              return 'more';
          }
        },
        () => {},
        (err) => {
          // Before the login's ReadyForQuery: the caller learns why. After it (the baseline failed
          // with the socket): the session holding the backend sees it close.
          this.destroy();
          this.baselineSettled();
          reject(err);
        },
      );
    });
  }

  /** The baseline query's answer: its rows are kept; an error leaves the backend unpoolable. */
  private onBaseline(type: number, frame: Buffer): 'more' | 'done' {
    if (type === Msg.DataRow) this.baselineRows?.push(Buffer.from(frame));
    else if (type === Msg.ErrorResponse) this.baselineRows = null;
    else if (type === Msg.ReadyForQuery) {
      this.loginBaseline = this.baselineRows === null ? null : Buffer.concat(this.baselineRows);
      this.baselineRows = null;
      this.baselineSettled();
      return 'done';
    }
    return 'more';
  }

  private baselineSettled(): void {
    this.baselinePending = false;
    this.settleBaseline();
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
    return this.loginBaseline !== null || this.baselinePending;
  }

  /**
   * Whether a fresh login now would give what this backend has (see login-check.ts): resolves false
   * (never rejects) when it would not, or could not be told; the caller then closes it.
   */
  checkLogin(): Promise<boolean> {
    // Its first client left before the baseline's answer came (a connect and Terminate).
    if (this.baselinePending) return this.baselineRead.then(() => this.checkLogin());
    if (this.loginBaseline === null || this.ended) return Promise.resolve(false);
    return new Promise((resolve) => {
      let verdict = false;
      // A dirty backend answers DISCARD ALL first: its messages, up to its ReadyForQuery, are the reset's.
      let resetting = this.dirty;
      let resetFailed = false;
      const reset = (type: number, frame: Buffer): 'more' | 'done' => {
        if (type === Msg.ParameterStatus) this.recordParameter(frame);
        else if (type === Msg.ErrorResponse) resetFailed = true;
        else if (type === Msg.ReadyForQuery) resetting = false;
        return 'more';
      };
      const full = (): void => {
        const check = new FullCheck(this.loginBaseline!);
        this.runPhase(
          (type, frame) => {
            if (resetting) return reset(type, frame);
            if (type === Msg.ReadyForQuery) return 'done';
            check.read(type, frame);
            return 'more';
          },
          () => {
            const passed = check.passed() && !resetFailed;
            this.verifiedSnapshot = passed ? check.reusableSnapshot : null;
            resolve(passed);
          },
          () => resolve(false),
        );
        this.send(FULL_CHECK);
      };
      if (this.verifiedSnapshot === null) return full();
      this.runPhase(
        (type, frame) => {
          if (resetting) return reset(type, frame);
          if (type === Msg.FunctionCallResponse) verdict = valueEquals(frame, FUNCTION_RESULT_AT, this.verifiedSnapshot!);
          else if (type === Msg.ReadyForQuery) return 'done';
          return 'more';
        },
        () => (resetFailed ? resolve(false) : verdict ? resolve(true) : full()),
        () => resolve(false),
      );
      this.send(SNAPSHOT);
    });
  }

  /** Writes a check, behind DISCARD ALL in the same write when the backend is dirty. */
  private send(check: Buffer): void {
    if (!this.dirty) {
      this.socket.write(check);
      return;
    }
    this.dirty = false;
    this.socket.cork();
    this.socket.write(DISCARD_ALL);
    this.socket.write(check);
    this.socket.uncork();
  }

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
  cancel(addr: BackendAddress): void {
    const side = net.connect(socketPath(addr));
    side.on('error', () => side.destroy());
    side.once('connect', () => side.end(serialize.cancel(this.pid, this.secret)));
  }

  /**
   * Hands the backend's reads to `reader` (a session's pump) from now on; null: nobody reads, and bytes
   * that arrive are kept in `leftover` for the next reader.
   */
  setReader(reader: BackendReader | null): void {
    if (this.baselinePending) this.afterBaseline = reader;
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
    this.phaseFail = fail;
    this.phase = (type, frame) => {
      try {
        if (handler(type, frame) === 'more') return 'more';
      } catch (err) {
        this.endPhase();
        fail(err instanceof Error ? err : new Error(String(err)));
        return 'done';
      }
      this.endPhase();
      done();
      return 'done';
    };
    this.reader = this.onPhaseData;
    const pending = this.leftover;
    if (pending) {
      this.leftover = null;
      this.onPhaseData(pending);
    }
  }

  private endPhase(): void {
    this.phase = null;
    this.phaseFail = null;
    if (this.reader === this.onPhaseData) this.reader = this.afterBaseline;
    this.afterBaseline = null;
  }
}

/**
 * FULL_CHECK's answer, message by message: the verdict row of its first statement, then its second
 * statement's rows compared in order with the login's (`baseline`, the same query's rows then).
 */
class FullCheck {
  private verdict = -1;
  /** The verdict row's snapshot, when no connection limit applies (the fast path may then rely on it). */
  reusableSnapshot: Buffer | null = null;
  /** Statements answered so far (CommandComplete). */
  private completed = 0;
  /** How much of `baseline` the rows so far matched; -1 once one did not. */
  private matched = 0;

  constructor(private readonly baseline: Buffer) {}

  read(type: number, frame: Buffer): void {
    if (type === Msg.CommandComplete) this.completed++;
    else if (type === Msg.ErrorResponse) this.matched = -1;
    else if (type !== Msg.DataRow) return;
    else if (this.completed === 0) {
      this.verdict = columnByte(frame, 0);
      if (this.verdict === Y) this.reusableSnapshot = copyColumn(frame, 1);
    } else if (this.matched >= 0) {
      const end = this.matched + frame.length;
      this.matched = end <= this.baseline.length && this.baseline.compare(frame, 0, frame.length, this.matched, end) === 0 ? end : -1;
    }
  }

  /** A fresh login would pass (y or c), the role is the same, and the settings rows are the login's. */
  passed(): boolean {
    return (this.verdict === Y || this.verdict === C) && this.completed === 2 && this.matched === this.baseline.length;
  }
}

const DISCARD_ALL = serialize.query('DISCARD ALL');
const Y = 0x79;
const C = 0x63;
/** How long closeAndWait waits for PostgreSQL to close before destroying the socket itself. */
const CLOSE_WAIT_MS = 2000;
const TERMINATE = serialize.end();
