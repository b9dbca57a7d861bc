// The byte pump between a client and the backend it holds. Frames pass both ways as slices of the
// chunks they arrived in; the engine reads only message headers, plus the few messages it must act
// on: Terminate from the client, ReadyForQuery (transaction state) and COPY requests from the
// backend, and, when control functions are on, Query and Parse (behind a byte prefilter) and what
// control.ts asks for. Each direction makes at most one write (or one corked batch) per chunk, and a
// full socket pauses its source until drain.
//
// A control call holds the client's stream: the bytes before it go out, the call runs, the message
// control.ts rewrites goes out, and only then are the client's later bytes read, so PostgreSQL sees
// every message in the order the client sent it.
//
// Over 450 lines: both directions read and change the same state (transaction status, statements in
// flight, the held control call, the engine's own cancel), which split modules would each need whole.

import type net from 'node:net';
import { Msg, TxStatus } from '../wire/codes.js';
import { FrameAction, FrameScanner, Verdict, type FrameSink } from '../wire/frame.js';
import { parseErrorFields } from '../wire/error-response.js';
import type { Answer, ControlSession, Held } from './control.js';
import type { ActiveSlots, Waiter } from './active-slots.js';
import { MAX_QUEUED, Outbox } from './outbox.js';
import { BACKEND_TABLE, CLIENT_TABLE, CLOSE_COMPLETE, CONTROL_BACKEND_TABLE, CONTROL_CLIENT_TABLE, MAX_MESSAGE, MAX_WHOLE, PARSE_COMPLETE, QUERY_CANCELED, type BackendPort, type ClientPort, type PumpEvents } from './pump-ports.js';

/**
 * Where the client's stream stands; changed only by Pump.setState, along PUMP_MOVES.
 *   forwarding:   the client's bytes are scanned and forwarded as they come
 *   awaitingSlot: a chunk that starts a transaction waits for an active slot (active-slots.ts); it and
 *                 the client's later bytes wait in the backlog, in order
 *   holding:      a control call runs; the client's later bytes wait in the backlog
 *   terminating:  the client sent Terminate, which PostgreSQL reads only after answering what came before
 *                 it: the session ends once the statements in flight are answered, or at once if the backend
 *                 waits for COPY data the client will not send (PostgreSQL would fail that COPY on reading it)
 *   stopped:      the session let go of the pump; nothing more is read or written
 */
export type PumpState = 'forwarding' | 'awaitingSlot' | 'holding' | 'terminating' | 'stopped';

const PUMP_MOVES: Record<PumpState, readonly PumpState[]> = {
  forwarding: ['awaitingSlot', 'holding', 'terminating', 'stopped'],
  awaitingSlot: ['forwarding', 'stopped'],
  holding: ['forwarding', 'stopped'],
  terminating: ['stopped'],
  stopped: [],
};

export class Pump {
  private current: PumpState = 'forwarding';
  /** Queries and Syncs sent whose ReadyForQuery has not come back. */
  private pending = 0;
  /** Extended-protocol messages sent since the last Sync. */
  private unsynced = false;
  private tx: number = TxStatus.Idle;
  /** The backend asked for COPY data, and has not been ready for a query since. */
  private copying = false;
  /**
   * A stream broke the protocol (the client's: reported; the backend's: no longer trusted). Nothing
   * more from the client is forwarded, and the backend is not reused.
   */
  private violation: { type: number; length: number } | null = null;
  /** The client's bytes held back while awaitingSlot or holding, in order. */
  private readonly backlog: Buffer[] = [];
  /** Whether the scanners read Bind/Close, and ParseComplete/CloseComplete/ErrorResponse (see syncActions). */
  private readingStatements = false;
  private readingAnswers = false;
  /**
   * The engine cancelled the running statement itself (memory watchdog, disk guard): PostgreSQL's 57014
   * becomes this ErrorResponse, until that statement's ReadyForQuery, or the next one's if the cancel
   * request was still on its way (it cancels whichever statement runs when it lands).
   */
  private cancelledAs: Buffer | null = null;
  /** The cancel request behind `cancelledAs` is still open: PostgreSQL has not taken it. */
  private cancelInFlight = false;
  /** An ErrorResponse to send the client in place of one the backend scanner dropped. */
  private replacement: Buffer | null = null;
  /** The session holds one of its database's active slots (active-slots.ts) for its transaction. */
  private activeHeld = false;
  /** While awaitingSlot: the place in the database's queue for an active slot. */
  private waiting: Waiter | null = null;

  private readonly fromClient: FrameScanner;
  private readonly fromBackend: FrameScanner;
  private readonly toBackend: Outbox;
  private readonly toClient: Outbox;

  private readonly clientSink: FrameSink = {
    forward: (buf, start, end) => this.toBackend.add(buf, start, end),
    note: (type) => {
      this.count(type);
      if (this.control !== null && (type === Msg.Sync || type === Msg.FunctionCall || type === Msg.Query || type === Msg.Parse || type === Msg.Close)) {
        this.control.clientNote(type, this.pending);
      }
    },
    frame: (type, buf, start, end) => {
      if (type === Msg.Terminate) {
        this.setState('terminating');
        return Verdict.DropAndPause;
      }
      // Any other Whole type is one a control session reads.
      this.count(type);
      // Failed transaction, nothing in flight that could end it: PostgreSQL would refuse the call.
      const aborted = this.tx === TxStatus.Failed && this.pending === (type === Msg.Query ? 1 : 0);
      return this.control!.clientFrame(type, buf, start, end, aborted, this.pending);
    },
    invalid: (type, length) => {
      this.violation = { type, length };
    },
  };

  private readonly backendSink: FrameSink = {
    forward: (buf, start, end) => this.toClient.add(buf, start, end),
    note: (type) => {
      if (type === Msg.CopyInResponse || type === Msg.CopyBothResponse) {
        this.copying = true;
      } else {
        // ParseComplete and CloseComplete, noted only for a control session.
        this.control!.backendNote();
      }
    },
    frame: (type, buf, start, end) => {
      if (type === Msg.ReadyForQuery) {
        // Its last byte is the transaction status.
        this.tx = buf[end - 1]!;
        if (this.pending > 0) this.pending--;
        this.copying = false;
        if (this.activeHeld && this.betweenTransactions) {
          this.activeHeld = false;
          this.gate!.slots.release(this.gate!.database);
        }
        this.control?.readyForQuery();
        if (this.cancelledAs !== null && !this.cancelInFlight) {
          this.cancelledAs = null;
          this.syncErrorAction();
        }
        return Verdict.Forward;
      }
      if (type === Msg.ErrorResponse && this.cancelledAs !== null) {
        if (parseErrorFields(buf.subarray(start + 5, end)).get('C') === QUERY_CANCELED) {
          this.replacement = this.cancelledAs;
          this.cancelledAs = null;
          // What control expected in this segment is over too (PostgreSQL skips to Sync after an error).
          this.control?.backendFrame(type, buf, start, end);
          this.control?.takeBackend();
          return Verdict.DropAndPause;
        }
      }
      if (this.control === null) return Verdict.Forward;
      // ParseComplete, CloseComplete, ErrorResponse: read only while control expects an answer.
      return this.control.backendFrame(type, buf, start, end);
    },
    invalid: () => {
      // PostgreSQL does not send malformed frames; if it seems to, stop trusting the stream.
      this.violation = { type: -1, length: -1 };
    },
  };

  private readonly backend: net.Socket;
  private readonly client: net.Socket;

  constructor(
    private readonly clientPort: ClientPort,
    private readonly backendPort: BackendPort,
    private readonly events: PumpEvents,
    /** Control functions for this session; null: nothing is intercepted. */
    private readonly control: ControlSession | null = null,
    /** The database's cap on active sessions; null: none. */
    private readonly gate: { slots: ActiveSlots; database: string } | null = null,
  ) {
    this.backend = backendPort.socket;
    this.client = clientPort.socket;
    this.fromClient = new FrameScanner({
      actions: control ? CONTROL_CLIENT_TABLE : CLIENT_TABLE,
      maxLength: MAX_MESSAGE,
      maxWholeLength: MAX_WHOLE,
    });
    this.fromBackend = new FrameScanner({
      actions: control ? CONTROL_BACKEND_TABLE : BACKEND_TABLE,
      maxLength: MAX_MESSAGE,
      maxWholeLength: MAX_WHOLE,
    });
    this.toBackend = new Outbox(this.backend, this.client);
    this.toClient = new Outbox(this.client, this.backend);
  }

  /** Starts forwarding; bytes that arrived before (from either side) go first. */
  start(clientLeftover: Buffer | null, backendLeftover: Buffer | null): void {
    this.clientPort.setReader(this.onClientData);
    this.backendPort.setReader(this.onBackendData);
    if (backendLeftover) this.onBackendData(backendLeftover);
    if (clientLeftover) this.onClientData(clientLeftover);
  }

  /**
   * The one place the state changes. A move not in PUMP_MOVES is a bug: the session ends with an
   * internal error (the pump is inside a socket callback, which must not throw).
   */
  private setState(next: PumpState): void {
    const from = this.current;
    if (next === from) return;
    if (!PUMP_MOVES[from].includes(next)) {
      this.events.failed(new Error(`internal error: pump moved from ${from} to ${next}`));
      return;
    }
    this.current = next;
  }

  /** Where the client's stream stands (see PumpState). */
  get state(): PumpState {
    return this.current;
  }

  /** The client's bytes are read as they come (not held back, not stopped). */
  private get admitting(): boolean {
    return this.state === 'forwarding' || this.state === 'terminating';
  }

  /** Stops forwarding; the sockets stay open for their owners to close or reuse. */
  stop(): void {
    if (this.state === 'stopped') return;
    this.setState('stopped');
    this.backlog.length = 0;
    this.waiting?.abandon();
    this.waiting = null;
    if (this.activeHeld) {
      this.activeHeld = false;
      this.gate!.slots.release(this.gate!.database);
    }
    this.clientPort.setReader(null);
    this.backendPort.setReader(null);
    if (this.client.isPaused()) this.client.resume();
    if (this.backend.isPaused()) this.backend.resume();
  }

  /**
   * True when the backend sits idle outside a transaction with nothing in flight, and the session
   * sent nothing that leaves state DISCARD ALL cannot undo (residue.ts): safe to reuse.
   */
  get reusable(): boolean {
    return (
      this.pending === 0 &&
      !(this.control?.residue ?? false) &&
      !this.unsynced &&
      this.admitting &&
      this.tx === TxStatus.Idle &&
      this.violation === null &&
      this.fromClient.atBoundary &&
      this.fromBackend.atBoundary
    );
  }

  /** No transaction open and nothing in flight or half-sent: the next byte starts a new transaction. */
  private get betweenTransactions(): boolean {
    return this.pending === 0 && this.tx === TxStatus.Idle && !this.unsynced && this.fromClient.atBoundary;
  }

  /** A statement (or a Sync's worth of them) is in flight: the backend is working for the client. */
  get busy(): boolean {
    return this.pending > 0;
  }

  /**
   * The engine is about to cancel the running statement: when PostgreSQL answers the cancel with 57014,
   * the client gets `error` (an ErrorResponse) instead; the session goes on as after any error.
   */
  replaceCancelError(error: Buffer): void {
    this.cancelledAs = error;
    this.cancelInFlight = true;
    this.syncErrorAction();
  }

  /** PostgreSQL took the cancel request; nothing running now, it found the backend waiting and dropped it. */
  cancelTaken(): void {
    this.cancelInFlight = false;
    if (this.cancelledAs !== null && this.pending === 0) {
      this.cancelledAs = null;
      this.syncErrorAction();
    }
  }

  private count(type: number): void {
    if (type === Msg.Query || type === Msg.FunctionCall) this.pending++;
    else if (type === Msg.Sync) {
      this.pending++;
      this.unsynced = false;
    } else this.unsynced = true;
  }

  /** Returns true when something still refers to `chunk` past the call (see ClientReader). */
  private readonly onClientData = (chunk: Buffer): boolean => {
    if (this.state === 'stopped') return false;
    if (!this.admitting) {
      this.backlog.push(chunk);
      this.client.pause();
      return true;
    }
    return this.admit(chunk);
  };

  /**
   * Processes a client chunk, first taking an active slot if it starts a transaction (else it waits).
   * True when `chunk` is still referred to: kept in the backlog or by a held call, or queued on the backend.
   */
  private admit(chunk: Buffer): boolean {
    if (this.gate !== null && this.state === 'forwarding' && !this.activeHeld && this.betweenTransactions) {
      const waiter = this.gate.slots.acquire(this.gate.database);
      if (waiter !== null) {
        this.waitForSlot(waiter, chunk);
        return true;
      }
      this.activeHeld = true;
    }
    return this.process(chunk);
  }

  private waitForSlot(waiter: Waiter, chunk: Buffer): void {
    this.setState('awaitingSlot');
    this.waiting = waiter;
    this.backlog.unshift(chunk);
    this.client.pause();
    waiter.granted.then(
      () => {
        if (this.state === 'stopped') return; // stop() gave the slot back through abandon()
        this.waiting = null;
        this.setState('forwarding');
        this.activeHeld = true;
        this.drainBacklog();
      },
      (err: unknown) => {
        if (this.state === 'stopped') return;
        this.waiting = null;
        this.setState('forwarding');
        this.events.failed(err);
      },
    );
  }

  /** The client's bytes held while a control call ran or a slot was awaited, in order. */
  private drainBacklog(): void {
    while (this.admitting && this.backlog.length > 0) this.admit(this.backlog.shift()!);
    // Past MAX_QUEUED the outbox has paused the client itself and resumes it on drain.
    if (this.admitting && this.backend.writableLength <= MAX_QUEUED) this.client.resume();
  }

  /**
   * Scans a client chunk, forwarding it in place and sending what control gives for what it holds.
   * True when `chunk` is still referred to (a held call's frame and the rest, or a queued write).
   */
  private process(chunk: Buffer): boolean {
    if (this.terminating || this.violation) return false;
    let pos = 0;
    for (;;) {
      pos = this.fromClient.feed(chunk, this.clientSink, pos);
      const work = this.control === null ? null : this.control.take();
      if (work === null) break;
      if (Buffer.isBuffer(work)) {
        this.toBackend.add(work, 0, work.length);
        this.syncActions();
      } else {
        // The held call refers to its frame in `chunk` (a Bind's parameters), the backlog to the rest.
        this.hold(work, pos < chunk.length ? chunk.subarray(pos) : null);
        return true;
      }
      if (pos >= chunk.length) break;
    }
    const queued = this.toBackend.flush();
    this.syncActions();
    // Read back through a getter: the sink may have set these during feed().
    const violation = this.currentViolation();
    if (violation) this.events.violation(violation.type, violation.length);
    else if (this.canEnd) this.events.terminate();
    // Read nothing more, not even the client's end of stream: a client that shuts down its side
    // after Terminate still gets its answers.
    else if (this.terminating) this.client.pause();
    return queued;
  }

  /** After Terminate: nothing is left in flight, or the backend waits for COPY data. */
  private get canEnd(): boolean {
    return this.terminating && (this.pending === 0 || this.copying);
  }

  // Read through getters: the sinks may set these during feed(), where the compiler cannot see.
  private get terminating(): boolean {
    return this.state === 'terminating';
  }
  private currentViolation(): { type: number; length: number } | null {
    return this.violation;
  }

  /** Holds the client's stream while a control call runs; what came before it goes out now. */
  private hold(held: Held, rest: Buffer | null): void {
    this.toBackend.flush();
    this.setState('holding');
    if (rest) this.backlog.unshift(rest);
    this.client.pause();
    this.control!.evaluate(held).then(
      (answer) => this.answered(answer),
      (err: unknown) => this.events.failed(err),
    );
  }

  private answered(answer: Answer): void {
    if (this.state === 'stopped') return;
    try {
      const bytes = this.control!.emit(answer, this.pending);
      this.toBackend.add(bytes, 0, bytes.length);
      this.syncActions();
      this.setState('forwarding');
      this.toBackend.flush();
      this.drainBacklog();
    } catch (err) {
      this.events.failed(err);
    }
  }

  /** Returns true when bytes of `chunk` are still queued for the client (see BackendReader). */
  private readonly onBackendData = (chunk: Buffer): boolean => {
    let pos = 0;
    for (;;) {
      pos = this.fromBackend.feed(chunk, this.backendSink, pos);
      // The scan paused to put a rewritten ErrorResponse in place of the one it dropped.
      const replacement = this.takeReplacement();
      if (replacement === null) break;
      this.toClient.add(replacement, 0, replacement.length);
      if (pos < 0 || pos >= chunk.length) break;
    }
    const queued = this.toClient.flush();
    if (this.control !== null) this.syncActions();
    if (this.canEnd) this.events.terminate();
    return queued;
  };

  private takeReplacement(): Buffer | null {
    const own = this.replacement;
    if (own !== null) {
      this.replacement = null;
      return own;
    }
    return this.control === null ? null : this.control.takeBackend();
  }

  /** ErrorResponse is read whole while control awaits an answer or a cancel of ours is pending. */
  private syncErrorAction(): void {
    const whole = this.readingAnswers || this.cancelledAs !== null;
    this.fromBackend.setAction(Msg.ErrorResponse, whole ? FrameAction.Whole : FrameAction.Pass);
  }

  /** Reads Bind/Close only while a control statement is prepared, and answers whole only while one is awaited. */
  private syncActions(): void {
    const control = this.control;
    if (control === null) return;
    const statements = control.tracksStatements;
    if (statements !== this.readingStatements) {
      this.readingStatements = statements;
      const action = statements ? FrameAction.Whole : FrameAction.Note;
      this.fromClient.setAction(Msg.Bind, action);
      this.fromClient.setAction(Msg.Close, action);
    }
    const answers = control.expecting;
    if (answers !== this.readingAnswers) {
      this.readingAnswers = answers;
      this.fromBackend.setAction(PARSE_COMPLETE, answers ? FrameAction.Whole : FrameAction.Note);
      this.fromBackend.setAction(CLOSE_COMPLETE, answers ? FrameAction.Whole : FrameAction.Note);
      this.syncErrorAction();
    }
  }
}
