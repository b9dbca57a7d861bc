// Socket read buffers kept for the next connection, as PgBouncer keeps its packet buffers in slabs.
// Connections come and go by the thousand here (a database minted, queried once, dropped): a fresh
// 8 or 64 kB malloc for each, freed whenever the GC gets to it and in no particular order, leaves
// holes in the C heap that smaller allocations split, so the next 64 kB does not fit and the heap
// grows (docs/benchmarks.md, Churn). Handing the same buffers round keeps the heap's shape.
//
// A buffer only comes back once its socket has closed and nobody holds a view of it; a reader that
// keeps one (returns true from a read) makes its connection take a fresh buffer instead. Stale bytes
// from an earlier connection are never read: a read hands on only the `n` bytes it wrote.

export class ReadBufferShelf {
  private readonly free: Buffer[] = [];

  constructor(
    readonly size: number,
    /** At most this many wait on the shelf; the rest are left to the GC (after a burst of clients). */
    private readonly max: number,
  ) {}

  take(): Buffer {
    return this.free.pop() ?? Buffer.allocUnsafeSlow(this.size);
  }

  give(buf: Buffer): void {
    if (buf.length === this.size && this.free.length < this.max) this.free.push(buf);
  }

  get count(): number {
    return this.free.length;
  }
}

/** A client socket's first buffer (PgBouncer's is 4 kB): every idle session holds one. */
export const smallReadBuffers = new ReadBufferShelf(8 * 1024, 256);
/** A backend's buffer, and a client's once a read fills its small one (COPY, big statements). */
export const largeReadBuffers = new ReadBufferShelf(64 * 1024, 64);

/** Puts `buf` back on the shelf of its size (a buffer of neither size is left to the GC). */
export function giveReadBuffer(buf: Buffer): void {
  (buf.length === largeReadBuffers.size ? largeReadBuffers : smallReadBuffers).give(buf);
}
