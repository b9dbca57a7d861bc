// Frame scanner: walks the 5-byte headers of a stream of typed protocol messages and decides, per
// message type, whether the bytes only pass through (unread), pass through with a notice of their
// type, or must be seen whole (assembled if they straddle chunks). Passthrough bytes are handed back
// as contiguous runs of the input chunk, so a caller forwards one slice per run, not one per frame.
//
// Pure and allocation-free on the hot path: integers are read in place; only a header or a whole
// frame that straddles chunks is copied.

export const enum FrameAction {
  /** Forward unread. */
  Pass = 0,
  /** Forward unread, but tell the sink the type (for state tracking that needs no body). */
  Note = 1,
  /** Hand the complete frame to the sink, which decides whether it is forwarded. */
  Whole = 2,
  /** A type that must not appear in this stream: the sink hears of it and scanning stops. */
  Reject = 3,
}

export const enum Verdict {
  /** Forward the frame in place, as part of the current run. */
  Forward = 0,
  /** Drop the frame; scanning continues after it. */
  Drop = 1,
  /** Drop the frame and stop: feed() returns the offset after it; the caller feeds the rest later. */
  DropAndPause = 2,
}

export interface FrameSink {
  /** Bytes [start, end) of buf are to be forwarded unchanged, in order. */
  forward(buf: Buffer, start: number, end: number): void;
  /** A Note frame's header was read. */
  note(type: number, length: number): void;
  /**
   * A Whole frame, complete in buf[start, end) including its header. The sink only records what it
   * needs and returns a verdict; acting on it (writing, closing) happens after feed() returns.
   */
  frame(type: number, buf: Buffer, start: number, end: number): Verdict;
  /**
   * A header carried a length the protocol cannot have, or a Reject type; the stream cannot be
   * trusted after it. Bytes before it have been forwarded.
   */
  invalid(type: number, length: number): void;
}

/** Action per message type byte, as a 256-entry table (see actionTable). */
export type ActionTable = Uint8Array;

/**
 * Builds the 256-entry action table for `actions`, every other type getting `otherwise`. Build it
 * once (at module level) and hand it to every scanner: a scanner copies it only if setAction is used.
 */
export function actionTable(actions: Partial<Record<number, FrameAction>>, otherwise: FrameAction = FrameAction.Pass): ActionTable {
  const table = new Uint8Array(256).fill(otherwise);
  for (const [type, action] of Object.entries(actions)) table[Number(type)] = action ?? FrameAction.Pass;
  return table;
}

export interface ScannerOptions {
  /** Action per message type byte: a precomputed table (shared, never written), or a map. */
  actions: ActionTable | Partial<Record<number, FrameAction>>;
  /** Action for types absent from `actions` when it is a map (default Pass); ignored for a table. */
  otherwise?: FrameAction;
  /** Largest length (the Int32 in the header) accepted at all. */
  maxLength: number;
  /** Whole frames longer than this are not assembled; they degrade to Note. */
  maxWholeLength: number;
}

export class FrameScanner {
  private actions: ActionTable;
  /** False while `actions` is a shared table: setAction copies it first. */
  private ownsActions: boolean;
  private readonly maxLength: number;
  private readonly maxWholeLength: number;

  /** Body bytes of a passing frame still to come in later chunks. */
  private skip = 0;
  /**
   * A header that straddles chunks. Made the first time one does: most scanners (a short session's)
   * never need it, and three are made per connection.
   */
  private headerBuf: Buffer | null = null;
  private headerLen = 0;
  /** A Whole frame that straddles chunks. */
  private whole: Buffer | null = null;
  private wholeFilled = 0;
  /** Set once an invalid header was seen: nothing more is read. */
  private broken = false;

  constructor(opts: ScannerOptions) {
    if (opts.actions instanceof Uint8Array) {
      if (opts.actions.length !== 256) throw new RangeError('an action table has 256 entries');
      this.actions = opts.actions;
      this.ownsActions = false;
    } else {
      this.actions = actionTable(opts.actions, opts.otherwise);
      this.ownsActions = true;
    }
    this.maxLength = opts.maxLength;
    this.maxWholeLength = opts.maxWholeLength;
  }

  /**
   * Changes what happens to one message type from the next header on: a session reads some types
   * only while it has a reason to (a prepared control call, an answer it must rewrite).
   */
  setAction(type: number, action: FrameAction): void {
    if (this.actions[type] === action) return;
    if (!this.ownsActions) {
      this.actions = this.actions.slice();
      this.ownsActions = true;
    }
    this.actions[type] = action;
  }

  private get header(): Buffer {
    return (this.headerBuf ??= Buffer.allocUnsafe(5));
  }

  /** True when the scanner sits exactly on a message boundary. */
  get atBoundary(): boolean {
    return this.skip === 0 && this.headerLen === 0 && this.whole === null;
  }

  /**
   * Scans chunk[from..]. Returns the offset where scanning stopped: chunk.length when consumed, less
   * when the sink paused (feed the remainder again later), or -1 after an invalid header.
   */
  feed(chunk: Buffer, sink: FrameSink, from = 0): number {
    if (this.broken) return -1;
    const n = chunk.length;
    let pos = from;
    // Where the current run of passthrough bytes began in this chunk.
    let runStart = from;

    if (this.skip > 0) {
      // The body of a passing frame continues: those bytes open the run.
      pos += Math.min(this.skip, n - pos);
      this.skip -= pos - from;
    } else if (this.headerLen > 0) {
      const k = Math.min(5 - this.headerLen, n - pos);
      chunk.copy(this.header, this.headerLen, pos, pos + k);
      this.headerLen += k;
      pos += k;
      runStart = pos;
      if (this.headerLen < 5) return n;
      this.headerLen = 0;
      const type = this.header[0]!;
      const length = this.header.readInt32BE(1);
      const action = this.actionFor(type, length);
      if (action === FrameAction.Reject || !this.validLength(length)) return this.fail(sink, type, length);
      if (action === FrameAction.Whole) {
        this.whole = Buffer.allocUnsafe(length + 1);
        this.header.copy(this.whole, 0, 0, 5);
        this.wholeFilled = 5;
      } else {
        if (action === FrameAction.Note) sink.note(type, length);
        sink.forward(Buffer.from(this.header), 0, 5);
        const body = length - 4;
        const k2 = Math.min(body, n - pos);
        this.skip = body - k2;
        pos += k2;
      }
    }
    if (this.whole !== null) {
      const whole = this.whole;
      const k = Math.min(whole.length - this.wholeFilled, n - pos);
      chunk.copy(whole, this.wholeFilled, pos, pos + k);
      this.wholeFilled += k;
      pos += k;
      runStart = pos;
      if (this.wholeFilled < whole.length) return n;
      this.whole = null;
      const verdict = sink.frame(whole[0]!, whole, 0, whole.length);
      if (verdict === Verdict.Forward) sink.forward(whole, 0, whole.length);
      else if (verdict === Verdict.DropAndPause) return pos;
    }

    while (pos < n) {
      if (n - pos < 5) {
        if (pos > runStart) sink.forward(chunk, runStart, pos);
        chunk.copy(this.header, 0, pos, n);
        this.headerLen = n - pos;
        return n;
      }
      const type = chunk[pos]!;
      const length = chunk.readInt32BE(pos + 1);
      const action = this.actionFor(type, length);
      if (action === FrameAction.Reject || !this.validLength(length)) {
        if (pos > runStart) sink.forward(chunk, runStart, pos);
        return this.fail(sink, type, length);
      }
      const end = pos + 1 + length;
      if (action === FrameAction.Whole) {
        if (end > n) {
          if (pos > runStart) sink.forward(chunk, runStart, pos);
          this.whole = Buffer.allocUnsafe(length + 1);
          chunk.copy(this.whole, 0, pos, n);
          this.wholeFilled = n - pos;
          return n;
        }
        const verdict = sink.frame(type, chunk, pos, end);
        if (verdict !== Verdict.Forward) {
          if (pos > runStart) sink.forward(chunk, runStart, pos);
          runStart = end;
          if (verdict === Verdict.DropAndPause) return end;
        }
        pos = end;
      } else {
        if (action === FrameAction.Note) sink.note(type, length);
        if (end <= n) {
          pos = end;
        } else {
          this.skip = end - n;
          pos = n;
        }
      }
    }
    if (n > runStart) sink.forward(chunk, runStart, n);
    return n;
  }

  private actionFor(type: number, length: number): FrameAction {
    const action = this.actions[type] as FrameAction;
    if (action === FrameAction.Whole && length > this.maxWholeLength) return FrameAction.Note;
    return action;
  }

  private validLength(length: number): boolean {
    return length >= 4 && length <= this.maxLength;
  }

  private fail(sink: FrameSink, type: number, length: number): number {
    this.broken = true;
    sink.invalid(type, length);
    return -1;
  }
}
