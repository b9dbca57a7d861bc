// The byte pump between a client and the backend it holds. Frames pass both ways as slices of the
// chunks they arrived in; the engine reads only message headers, plus the few messages it must act on:
// Terminate from the client, ReadyForQuery from the backend (transaction state). Each direction makes
// at most one write (or one corked batch) per chunk, and a full socket pauses its source until drain.

import type net from 'node:net';
import { Msg, TxStatus } from '../wire/codes.js';
import { FrameAction, FrameScanner, Verdict, type FrameSink } from '../wire/frame.js';

/** What the client may send once its session is running; anything else is a protocol violation. */
const CLIENT_ACTIONS: Partial<Record<number, FrameAction>> = {
  [Msg.Query]: FrameAction.Note,
  [Msg.Sync]: FrameAction.Note,
  [Msg.FunctionCall]: FrameAction.Note,
  [Msg.Parse]: FrameAction.Note,
  [Msg.Bind]: FrameAction.Note,
  [Msg.Execute]: FrameAction.Note,
  [Msg.Describe]: FrameAction.Note,
  [Msg.Close]: FrameAction.Note,
  [Msg.Flush]: FrameAction.Note,
  [Msg.Terminate]: FrameAction.Whole,
  [Msg.CopyData]: FrameAction.Pass,
  [Msg.CopyDone]: FrameAction.Pass,
  [Msg.CopyFail]: FrameAction.Pass,
  // PostgreSQL answers a stray password message with its own error; let it.
  [Msg.Password]: FrameAction.Pass,
};

const BACKEND_ACTIONS: Partial<Record<number, FrameAction>> = {
  [Msg.ReadyForQuery]: FrameAction.Whole,
};

/** PostgreSQL's own ceiling for a message (PQ_LARGE_MESSAGE_LIMIT). */
const MAX_MESSAGE = 0x3fffffff;
const MAX_WHOLE = 1 << 20;
/** Bytes queued on a socket before its source is paused until drain. */
const MAX_QUEUED = 1 << 20;

export interface PumpEvents {
  /** The client sent Terminate. */
  terminate(): void;
  /** The client's stream broke the protocol (bad length or message type). */
  violation(type: number, length: number): void;
}

/** Collects the slices one chunk produces and writes them as one write, or one corked batch. */
class Outbox {
  private readonly pieces: Buffer[] = [];

  constructor(
    private readonly dest: net.Socket,
    private readonly source: net.Socket,
  ) {}

  add(buf: Buffer, start: number, end: number): void {
    this.pieces.push(start === 0 && end === buf.length ? buf : buf.subarray(start, end));
  }

  flush(): void {
    const n = this.pieces.length;
    if (n === 0) return;
    if (n === 1) {
      this.dest.write(this.pieces[0]!);
    } else {
      this.dest.cork();
      for (let i = 0; i < n; i++) this.dest.write(this.pieces[i]!);
      this.dest.uncork();
    }
    this.pieces.length = 0;
    // write() says "wait" past 16 KiB queued, which a large result reaches on every chunk; pausing
    // that often costs more than it saves. Hold back only once a real backlog builds up.
    if (this.dest.writableLength > MAX_QUEUED && !this.dest.destroyed) {
      this.source.pause();
      this.dest.once('drain', this.resume);
    }
  }

  private readonly resume = (): void => {
    if (!this.source.destroyed) this.source.resume();
  };
}

export class Pump {
  /** Queries and Syncs sent whose ReadyForQuery has not come back. */
  private pending = 0;
  /** Extended-protocol messages sent since the last Sync. */
  private unsynced = false;
  private tx: number = TxStatus.Idle;
  private terminated = false;
  private violation: { type: number; length: number } | null = null;

  private readonly fromClient = new FrameScanner({ actions: CLIENT_ACTIONS, otherwise: FrameAction.Reject, maxLength: MAX_MESSAGE, maxWholeLength: MAX_WHOLE });
  private readonly fromBackend = new FrameScanner({ actions: BACKEND_ACTIONS, maxLength: MAX_MESSAGE, maxWholeLength: MAX_WHOLE });
  private readonly toBackend: Outbox;
  private readonly toClient: Outbox;

  private readonly clientSink: FrameSink = {
    forward: (buf, start, end) => this.toBackend.add(buf, start, end),
    note: (type) => {
      if (type === Msg.Query || type === Msg.FunctionCall) this.pending++;
      else if (type === Msg.Sync) {
        this.pending++;
        this.unsynced = false;
      } else this.unsynced = true;
    },
    frame: () => {
      // Only Terminate is Whole in this direction.
      this.terminated = true;
      return Verdict.DropAndPause;
    },
    invalid: (type, length) => {
      this.violation = { type, length };
    },
  };

  private readonly backendSink: FrameSink = {
    forward: (buf, start, end) => this.toClient.add(buf, start, end),
    note: () => {},
    frame: (_type, buf, _start, end) => {
      // Only ReadyForQuery is Whole in this direction; its last byte is the transaction status.
      this.tx = buf[end - 1]!;
      if (this.pending > 0) this.pending--;
      return Verdict.Forward;
    },
    invalid: () => {
      // PostgreSQL does not send malformed frames; if it seems to, stop trusting the stream.
      this.violation = { type: -1, length: -1 };
    },
  };

  constructor(
    private readonly client: net.Socket,
    private readonly backend: net.Socket,
    private readonly events: PumpEvents,
  ) {
    this.toBackend = new Outbox(backend, client);
    this.toClient = new Outbox(client, backend);
  }

  /** Starts forwarding; bytes that arrived before (from either side) go first. */
  start(clientLeftover: Buffer | null, backendLeftover: Buffer | null): void {
    this.client.on('data', this.onClientData);
    this.backend.on('data', this.onBackendData);
    if (backendLeftover) this.onBackendData(backendLeftover);
    if (clientLeftover) this.onClientData(clientLeftover);
  }

  /** Stops forwarding; the sockets stay open for their owners to close or reuse. */
  stop(): void {
    this.client.off('data', this.onClientData);
    this.backend.off('data', this.onBackendData);
    if (this.client.isPaused()) this.client.resume();
    if (this.backend.isPaused()) this.backend.resume();
  }

  /** True when the backend sits idle outside a transaction with nothing in flight: safe to reuse. */
  get reusable(): boolean {
    return (
      this.pending === 0 &&
      !this.unsynced &&
      this.tx === TxStatus.Idle &&
      this.violation === null &&
      this.fromClient.atBoundary &&
      this.fromBackend.atBoundary
    );
  }

  private readonly onClientData = (chunk: Buffer): void => {
    if (this.terminated || this.violation) return;
    this.fromClient.feed(chunk, this.clientSink);
    this.toBackend.flush();
    // Read back through a getter: the sink may have set these during feed().
    const violation = this.currentViolation();
    if (violation) this.events.violation(violation.type, violation.length);
    else if (this.terminated) this.events.terminate();
  };

  private currentViolation(): { type: number; length: number } | null {
    return this.violation;
  }

  private readonly onBackendData = (chunk: Buffer): void => {
    this.fromBackend.feed(chunk, this.backendSink);
    this.toClient.flush();
  };
}
