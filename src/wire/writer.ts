// A growable buffer for building backend messages: reserve the 5-byte header, append fields, fill in
// the length at the end (the layout of pg-protocol's BufferWriter).

export class MessageWriter {
  private buf: Buffer;
  private pos = 0;

  constructor(size = 256) {
    this.buf = Buffer.allocUnsafe(size);
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    let size = Math.max(this.buf.length * 2, 64);
    while (size < this.pos + n) size *= 2;
    const grown = Buffer.allocUnsafe(size);
    this.buf.copy(grown, 0, 0, this.pos);
    this.buf = grown;
  }

  int8(v: number): this {
    this.ensure(1);
    this.buf[this.pos++] = v;
    return this;
  }

  int16(v: number): this {
    this.ensure(2);
    this.buf.writeInt16BE(v, this.pos);
    this.pos += 2;
    return this;
  }

  int32(v: number): this {
    this.ensure(4);
    this.buf.writeInt32BE(v, this.pos);
    this.pos += 4;
    return this;
  }

  /** A NUL-terminated string. */
  cstring(s: string): this {
    const len = Buffer.byteLength(s);
    this.ensure(len + 1);
    this.buf.write(s, this.pos, 'utf8');
    this.pos += len;
    this.buf[this.pos++] = 0;
    return this;
  }

  bytes(b: Uint8Array): this {
    this.ensure(b.length);
    this.buf.set(b, this.pos);
    this.pos += b.length;
    return this;
  }

  /** Closes a message begun at `start` (where the type byte sits) by writing its length. */
  private close(start: number): void {
    this.buf.writeInt32BE(this.pos - start - 1, start + 1);
  }

  /** Starts a typed message; call end() after its fields. */
  begin(type: number): number {
    const start = this.pos;
    this.ensure(5);
    this.buf[this.pos] = type;
    this.pos += 5;
    return start;
  }

  end(start: number): this {
    this.close(start);
    return this;
  }

  /** Everything written so far, as a copy the caller owns. */
  flush(): Buffer {
    const out = Buffer.from(this.buf.subarray(0, this.pos));
    this.pos = 0;
    return out;
  }
}
