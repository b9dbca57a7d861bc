// Readers and writers for the frontend messages the engine rewrites to answer control functions:
// Parse, Bind and Close of the extended protocol, and Query. Readers take one complete frame, header
// included, as the FrameScanner hands it over; writers build whole frames. A malformed frame throws
// ProtocolError; the engine then forwards it untouched and lets PostgreSQL answer it.

import { Msg } from './codes.js';
import { ProtocolError } from './frontend.js';
import { MessageWriter } from './writer.js';

export interface ParseMessage {
  /** Prepared statement name; '' is the unnamed statement. */
  name: string;
  query: string;
  /** Declared parameter type OIDs (0: unspecified). */
  paramTypes: number[];
}

export interface BindMessage {
  portal: string;
  statement: string;
  /** 0 text, 1 binary: none (all text), one (for all) or one per parameter. */
  paramFormats: number[];
  /** Parameter values, as views into the frame they were read from; null is SQL NULL. */
  params: (Buffer | null)[];
  resultFormats: number[];
}

export interface CloseMessage {
  /** 'S' a prepared statement, 'P' a portal. */
  kind: 'S' | 'P';
  name: string;
}

/** Walks the body of one frame; every read checks the bounds PostgreSQL's pq_getmsg* check. */
class BodyReader {
  private pos: number;

  constructor(
    private readonly buf: Buffer,
    start: number,
    private readonly end: number,
  ) {
    this.pos = start + 5;
  }

  cstring(): string {
    const nul = this.buf.indexOf(0, this.pos);
    if (nul < 0 || nul >= this.end) throw new ProtocolError('invalid string in message');
    const s = this.buf.toString('utf8', this.pos, nul);
    this.pos = nul + 1;
    return s;
  }

  int16(): number {
    this.need(2);
    const v = this.buf.readInt16BE(this.pos);
    this.pos += 2;
    return v;
  }

  int32(): number {
    this.need(4);
    const v = this.buf.readInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  uint32(): number {
    this.need(4);
    const v = this.buf.readUInt32BE(this.pos);
    this.pos += 4;
    return v;
  }

  bytes(n: number): Buffer {
    this.need(n);
    const b = this.buf.subarray(this.pos, this.pos + n);
    this.pos += n;
    return b;
  }

  /** PostgreSQL refuses a message with bytes left over (pq_getmsgend). */
  done(): void {
    if (this.pos !== this.end) throw new ProtocolError('invalid message format');
  }

  private need(n: number): void {
    if (n < 0 || this.pos + n > this.end) throw new ProtocolError('insufficient data left in message');
  }
}

function counted<T>(r: BodyReader, read: () => T): T[] {
  const n = r.int16();
  if (n < 0) throw new ProtocolError('invalid message format');
  const out: T[] = [];
  for (let i = 0; i < n; i++) out.push(read());
  return out;
}

export function readParse(buf: Buffer, start: number, end: number): ParseMessage {
  const r = new BodyReader(buf, start, end);
  const name = r.cstring();
  const query = r.cstring();
  const paramTypes = counted(r, () => r.uint32());
  r.done();
  return { name, query, paramTypes };
}

export function readBind(buf: Buffer, start: number, end: number): BindMessage {
  const r = new BodyReader(buf, start, end);
  const portal = r.cstring();
  const statement = r.cstring();
  const paramFormats = counted(r, () => r.int16());
  const params = counted(r, () => {
    const len = r.int32();
    return len === -1 ? null : r.bytes(len);
  });
  const resultFormats = counted(r, () => r.int16());
  r.done();
  return { portal, statement, paramFormats, params, resultFormats };
}

export function readClose(buf: Buffer, start: number, end: number): CloseMessage {
  const r = new BodyReader(buf, start, end);
  const kind = r.bytes(1)[0];
  if (kind !== 0x53 && kind !== 0x50) throw new ProtocolError(`invalid CLOSE message subtype ${kind}`);
  const name = r.cstring();
  r.done();
  return { kind: kind === 0x53 ? 'S' : 'P', name };
}

/**
 * The statement name of a Parse (its first field) or of a Bind (its second), without reading the
 * rest: the engine asks this of every such message once a session has prepared a control call.
 */
export function statementName(buf: Buffer, start: number, end: number): string {
  const r = new BodyReader(buf, start, end);
  if (buf[start] === Msg.Bind) r.cstring();
  return r.cstring();
}

export function queryMessage(text: string): Buffer {
  const w = new MessageWriter(Buffer.byteLength(text) + 6);
  const start = w.begin(Msg.Query);
  w.cstring(text);
  return w.end(start).flush();
}

export function parseMessage(m: ParseMessage): Buffer {
  const w = new MessageWriter(Buffer.byteLength(m.query) + 32);
  const start = w.begin(Msg.Parse);
  w.cstring(m.name).cstring(m.query).int16(m.paramTypes.length);
  for (const oid of m.paramTypes) w.int32(oid | 0);
  return w.end(start).flush();
}

export function bindMessage(m: BindMessage): Buffer {
  const w = new MessageWriter();
  const start = w.begin(Msg.Bind);
  w.cstring(m.portal).cstring(m.statement);
  w.int16(m.paramFormats.length);
  for (const f of m.paramFormats) w.int16(f);
  w.int16(m.params.length);
  for (const p of m.params) {
    if (p === null) w.int32(-1);
    else w.int32(p.length).bytes(p);
  }
  w.int16(m.resultFormats.length);
  for (const f of m.resultFormats) w.int16(f);
  return w.end(start).flush();
}

export function closeMessage(m: CloseMessage): Buffer {
  const w = new MessageWriter(Buffer.byteLength(m.name) + 8);
  const start = w.begin(Msg.Close);
  w.int8(m.kind.charCodeAt(0)).cstring(m.name);
  return w.end(start).flush();
}
