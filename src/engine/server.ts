// One connection from the engine to PostgreSQL over its private Unix socket: the startup handshake,
// the reset between client sessions, and the cancel side channel. While a client session holds it,
// the session reads and writes the socket directly (see pump.ts); this file only owns the phases
// where the engine itself talks to PostgreSQL.

import net from 'node:net';
import { serialize } from 'pg-protocol';
import { Auth, Msg } from '../wire/codes.js';
import { FrameAction, FrameScanner, Verdict, type FrameSink } from '../wire/frame.js';
import { parseErrorFields } from '../wire/error-response.js';
import type { BackendAddress } from './ports.js';

export type BackendState = 'connecting' | 'idle' | 'active' | 'resetting' | 'closed';

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

const ALL_WHOLE: Partial<Record<number, FrameAction>> = {};
for (let t = 0; t < 256; t++) ALL_WHOLE[t] = FrameAction.Whole;

export function socketPath(addr: BackendAddress): string {
  return `${addr.socketDir}/.s.PGSQL.${addr.port}`;
}

type PhaseHandler = (type: number, frame: Buffer) => 'more' | 'done';

export class BackendConnection {
  state: BackendState = 'connecting';
  /** ParameterStatus values as PostgreSQL last reported them. */
  readonly params = new Map<string, string>();
  pid = 0;
  secret = 0;
  /** When it last became idle (monotonic ms), for the idle timeout. */
  idleSince = 0;
  /** Bytes PostgreSQL sent after the last phase ended; the next reader consumes them first. */
  leftover: Buffer | null = null;

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
  private readonly onPhaseData = (chunk: Buffer): void => {
    const stop = this.phaseScanner!.feed(chunk, this.phaseSink);
    if (stop >= 0 && stop < chunk.length) this.leftover = chunk.subarray(stop);
  };
  private readonly onPhaseEnd = (err?: Error): void => {
    const fail = this.phaseFail;
    this.endPhase();
    this.destroy();
    fail?.(new BackendUnreachable(err ? err.message : 'PostgreSQL closed the connection', { cause: err }));
  };

  private constructor(
    readonly socket: net.Socket,
    /** Pool key: the database, user and startup parameters this backend was opened with. */
    readonly key: string,
  ) {
    socket.setNoDelay(true);
    // A closed socket while idle or resetting takes the backend out of service; while a session
    // holds it, the session's own close handler runs as well.
    socket.on('close', () => {
      this.state = 'closed';
    });
    socket.on('error', () => {});
  }

  /** Opens a backend and completes the startup handshake (trust auth on the private socket). */
  static open(addr: BackendAddress, startup: Record<string, string>, key: string): Promise<BackendConnection> {
    const socket = net.connect(socketPath(addr));
    const conn = new BackendConnection(socket, key);
    return new Promise((resolve, reject) => {
      socket.once('connect', () => socket.write(serialize.startup(startup)));
      conn.runPhase(
        (type, frame) => {
          switch (type) {
            case Msg.Authentication:
              if (frame.readInt32BE(5) !== Auth.Ok) {
                throw new BackendUnreachable('PostgreSQL asked the engine for a password on its private socket');
              }
              return 'more';
            case Msg.ParameterStatus:
              conn.recordParameter(frame);
              return 'more';
            case Msg.BackendKeyData:
              conn.pid = frame.readInt32BE(5);
              conn.secret = frame.readInt32BE(9);
              return 'more';
            case Msg.ErrorResponse: {
              const fields = parseErrorFields(frame.subarray(5));
              throw new BackendRefused(Buffer.from(frame), fields.get('C') ?? 'XX000', fields.get('M') ?? 'connection refused');
            }
            case Msg.ReadyForQuery:
              return 'done';
            default:
              return 'more';
          }
        },
        () => {
          conn.state = 'active';
          resolve(conn);
        },
        (err) => {
          conn.destroy();
          reject(err);
        },
      );
    });
  }

  /** Returns the session to its just-connected state (DISCARD ALL) so another client can have it. */
  reset(): Promise<void> {
    this.state = 'resetting';
    return new Promise((resolve, reject) => {
      this.runPhase(
        (type, frame) => {
          if (type === Msg.ParameterStatus) this.recordParameter(frame);
          else if (type === Msg.ErrorResponse) {
            const fields = parseErrorFields(frame.subarray(5));
            throw new BackendRefused(Buffer.from(frame), fields.get('C') ?? 'XX000', fields.get('M') ?? 'reset failed');
          } else if (type === Msg.ReadyForQuery) return 'done';
          return 'more';
        },
        resolve,
        (err) => {
          this.destroy();
          reject(err);
        },
      );
      this.socket.write(DISCARD_ALL);
    });
  }

  /** Sends a CancelRequest for this backend on a fresh connection, as PostgreSQL requires. */
  cancel(addr: BackendAddress): void {
    const side = net.connect(socketPath(addr));
    side.on('error', () => side.destroy());
    side.once('connect', () => side.end(serialize.cancel(this.pid, this.secret)));
  }

  /** Watches an idle pooled backend: anything PostgreSQL says unprompted (a FATAL at shutdown) ends it. */
  watchIdle(): void {
    this.socket.on('data', this.onIdleData);
  }

  unwatchIdle(): void {
    this.socket.off('data', this.onIdleData);
  }

  private readonly onIdleData = (): void => {
    this.destroy();
  };

  destroy(): void {
    if (this.state !== 'closed') this.state = 'closed';
    if (!this.socket.destroyed) {
      if (this.socket.writable) this.socket.end(TERMINATE);
      this.socket.destroySoon();
    }
  }

  private recordParameter(frame: Buffer): void {
    const nameEnd = frame.indexOf(0, 5);
    const valueEnd = frame.indexOf(0, nameEnd + 1);
    if (nameEnd < 0 || valueEnd < 0) return;
    this.params.set(frame.toString('utf8', 5, nameEnd), frame.toString('utf8', nameEnd + 1, valueEnd));
  }

  /**
   * Reads whole messages with `handler` until it answers 'done' (then `done` runs) or throws (then
   * `fail` runs). A close or socket error ends the phase with BackendUnreachable.
   */
  private runPhase(handler: PhaseHandler, done: () => void, fail: (err: Error) => void): void {
    this.phaseScanner = new FrameScanner({ actions: ALL_WHOLE, maxLength: 0x3fffffff, maxWholeLength: 0x3fffffff });
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
    this.socket.on('data', this.onPhaseData);
    this.socket.on('close', this.onPhaseEnd);
    this.socket.on('error', this.onPhaseEnd);
    const pending = this.leftover;
    if (pending) {
      this.leftover = null;
      this.onPhaseData(pending);
    }
  }

  private endPhase(): void {
    this.phase = null;
    this.phaseFail = null;
    this.socket.off('data', this.onPhaseData);
    this.socket.off('close', this.onPhaseEnd);
    this.socket.off('error', this.onPhaseEnd);
  }
}

const DISCARD_ALL = serialize.query('DISCARD ALL');
const TERMINATE = serialize.end();
