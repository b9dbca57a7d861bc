// PostgreSQL's messages built by name, for engine tests that run without PostgreSQL (pg-protocol's
// src/testing/test-buffers.ts does the same): a test reads as the conversation it plays, and each
// builder writes exactly the bytes the protocol documentation gives for that message. Frontend
// messages come from pg-protocol's own serializer. Also a frame reader for what a fake server is sent.

import { serialize } from 'pg-protocol';

/** One message: type byte, Int32 length (itself included), body. */
function message(type: string, body: Buffer = Buffer.alloc(0)): Buffer {
  const head = Buffer.alloc(5);
  head.write(type, 0, 'latin1');
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

const cstring = (s: string): Buffer => Buffer.from(`${s}\0`, 'utf8');
const int32 = (n: number): Buffer => {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n);
  return b;
};
const int16 = (n: number): Buffer => {
  const b = Buffer.alloc(2);
  b.writeInt16BE(n);
  return b;
};
/** A value as DataRow and FunctionCallResponse carry it: Int32 length (-1: NULL), bytes. */
const value = (v: string | null): Buffer => (v === null ? int32(-1) : Buffer.concat([int32(Buffer.byteLength(v)), Buffer.from(v)]));

/** Fields of an ErrorResponse or NoticeResponse by code letter (S, V, C, M, H...). */
function fields(f: Record<string, string>): Buffer {
  return Buffer.concat([...Object.entries(f).map(([code, text]) => cstring(code + text)), Buffer.from([0])]);
}

export const backendMessages = {
  authenticationOk: (): Buffer => message('R', int32(0)),
  parameterStatus: (name: string, val: string): Buffer => message('S', Buffer.concat([cstring(name), cstring(val)])),
  backendKeyData: (pid: number, secret: number): Buffer => message('K', Buffer.concat([int32(pid), int32(secret)])),
  /** `status`: I (idle), T (in a transaction), E (in a failed transaction). */
  readyForQuery: (status: 'I' | 'T' | 'E' = 'I'): Buffer => message('Z', Buffer.from(status)),
  dataRow: (columns: Array<string | null>): Buffer => message('D', Buffer.concat([int16(columns.length), ...columns.map(value)])),
  commandComplete: (tag: string): Buffer => message('C', cstring(tag)),
  emptyQueryResponse: (): Buffer => message('I'),
  parseComplete: (): Buffer => message('1'),
  bindComplete: (): Buffer => message('2'),
  functionCallResponse: (result: string | null): Buffer => message('V', value(result)),
  errorResponse: (f: Record<string, string>): Buffer => message('E', fields({ S: 'ERROR', V: 'ERROR', ...f })),
  noticeResponse: (f: Record<string, string>): Buffer => message('N', fields({ S: 'NOTICE', V: 'NOTICE', ...f })),
  /** COPY FROM STDIN's answer: text format, no columns. */
  copyInResponse: (): Buffer => message('G', Buffer.concat([Buffer.from([0]), int16(0)])),
};

export const frontendMessages = {
  query: (text: string): Buffer => serialize.query(text),
  parse: (text: string, name = ''): Buffer => serialize.parse({ name, text }),
  bind: (): Buffer => serialize.bind(),
  execute: (): Buffer => serialize.execute(),
  sync: (): Buffer => serialize.sync(),
  terminate: (): Buffer => serialize.end(),
  copyDone: (): Buffer => serialize.copyDone(),
  /** A message of a type no frontend sends, for protocol violations. */
  raw: (type: string, body: Buffer = Buffer.alloc(0)): Buffer => message(type, body),
};

/** A startup packet's parameters, or null while `buf` holds less than the whole packet. */
export function readStartupPacket(buf: Buffer): { length: number; params: Map<string, string> } | null {
  if (buf.length < 4 || buf.length < buf.readInt32BE(0)) return null;
  const length = buf.readInt32BE(0);
  const parts = buf.toString('utf8', 8, length - 1).split('\0');
  const params = new Map<string, string>();
  for (let i = 0; i + 1 < parts.length; i += 2) params.set(parts[i]!, parts[i + 1]!);
  return { length, params };
}

/** Splits `buf` into whole typed messages; the incomplete tail is returned as `rest`. */
export function readMessages(buf: Buffer): { messages: Buffer[]; rest: Buffer } {
  const messages: Buffer[] = [];
  let at = 0;
  while (buf.length - at >= 5) {
    const end = at + 1 + buf.readInt32BE(at + 1);
    if (end > buf.length) break;
    messages.push(buf.subarray(at, end));
    at = end;
  }
  return { messages, rest: buf.subarray(at) };
}
