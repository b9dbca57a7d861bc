// One direction of the pump's output: the slices a chunk produces, written as one write (or one corked
// batch), and the source socket paused while the destination holds a real backlog (STYLE, wire +
// engine 5).

import type net from 'node:net';

/** Bytes queued on a socket before its source is paused until drain. */
export const MAX_QUEUED = 1 << 20;

/** Collects the slices one chunk produces and writes them as one write, or one corked batch. */
export class Outbox {
  private readonly pieces: Buffer[] = [];

  constructor(
    private readonly dest: net.Socket,
    private readonly source: net.Socket,
  ) {}

  add(buf: Buffer, start: number, end: number): void {
    this.pieces.push(start === 0 && end === buf.length ? buf : buf.subarray(start, end));
  }

  /**
   * Writes what was added. Returns true when some of it is still queued on the socket (not written at
   * once), so the buffers the pieces are views of must not be reused yet.
   */
  flush(): boolean {
    const n = this.pieces.length;
    if (n === 0) return false;
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
    return this.dest.writableLength > 0;
  }

  private readonly resume = (): void => {
    if (!this.source.destroyed) this.source.resume();
  };
}
