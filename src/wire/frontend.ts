// Readers for the frontend (client -> server) messages the engine decodes: the untyped startup-phase
// packets, and the authentication responses. Everything here returns a result or a ProtocolError;
// nothing throws on bad bytes except ProtocolError, which callers turn into FATAL 08P01.

import { CANCEL_REQUEST_CODE, GSSENC_REQUEST_CODE, MAX_STARTUP_PACKET, SSL_REQUEST_CODE } from './codes.js';

export class ProtocolError extends Error {
  constructor(
    message: string,
    /** The SQLSTATE PostgreSQL uses for this case (08P01 unless stated). */
    readonly sqlstate = '08P01',
  ) {
    super(message);
    this.name = 'ProtocolError';
  }
}

export type StartupPacket =
  | { kind: 'ssl' }
  | { kind: 'gssenc' }
  | { kind: 'cancel'; pid: number; secret: Buffer }
  | {
      kind: 'startup';
      major: number;
      minor: number;
      /** Ordinary parameters, in the order sent (user, database, options, application_name, ...). */
      params: Map<string, string>;
      /** Protocol options (`_pq_.*`) this server does not know. */
      protocolOptions: string[];
    };

/**
 * Length of the startup-phase packet at the start of buf, or -1 if fewer than 4 bytes are there.
 * Throws ProtocolError for lengths PostgreSQL refuses.
 */
export function startupPacketLength(buf: Buffer): number {
  if (buf.length < 4) return -1;
  const len = buf.readInt32BE(0);
  if (len < 8 || len > MAX_STARTUP_PACKET) throw new ProtocolError('invalid length of startup packet');
  return len;
}

/** Parses one complete startup-phase packet (including its length word). */
export function parseStartupPacket(packet: Buffer): StartupPacket {
  if (packet.length < 8) throw new ProtocolError('invalid length of startup packet');
  const code = packet.readInt32BE(4);
  if (code === SSL_REQUEST_CODE) return { kind: 'ssl' };
  if (code === GSSENC_REQUEST_CODE) return { kind: 'gssenc' };
  if (code === CANCEL_REQUEST_CODE) {
    // Protocol 3.2 allows keys of up to 256 bytes; 3.0 uses 4.
    if (packet.length < 16 || packet.length > 12 + 256) throw new ProtocolError('invalid length of cancel request');
    return { kind: 'cancel', pid: packet.readInt32BE(8), secret: Buffer.from(packet.subarray(12)) };
  }
  const major = code >>> 16;
  const minor = code & 0xffff;
  if (major !== 3) {
    throw new ProtocolError(
      `unsupported frontend protocol ${major}.${minor}: server supports 3.0 to 3.2`,
      '0A000',
    );
  }
  const params = new Map<string, string>();
  const protocolOptions: string[] = [];
  let pos = 8;
  for (;;) {
    if (pos >= packet.length) throw new ProtocolError('invalid startup packet layout: expected terminator as last byte');
    if (packet[pos] === 0) {
      if (pos !== packet.length - 1) throw new ProtocolError('invalid startup packet layout: expected terminator as last byte');
      break;
    }
    const nameEnd = packet.indexOf(0, pos);
    if (nameEnd < 0) throw new ProtocolError('invalid startup packet layout: expected terminator as last byte');
    const valueEnd = packet.indexOf(0, nameEnd + 1);
    if (valueEnd < 0) throw new ProtocolError('invalid startup packet layout: expected terminator as last byte');
    const name = packet.toString('utf8', pos, nameEnd);
    const value = packet.toString('utf8', nameEnd + 1, valueEnd);
    if (name.startsWith('_pq_.')) protocolOptions.push(name);
    else params.set(name, value);
    pos = valueEnd + 1;
  }
  return { kind: 'startup', major, minor, params, protocolOptions };
}

/** SASLInitialResponse body: mechanism name, then Int32 length (-1: none) and the client-first data. */
export function parseSASLInitialResponse(body: Buffer): { mechanism: string; data: Buffer } {
  const nameEnd = body.indexOf(0);
  if (nameEnd < 0 || nameEnd + 5 > body.length) throw new ProtocolError('malformed SASLInitialResponse message');
  const mechanism = body.toString('utf8', 0, nameEnd);
  const len = body.readInt32BE(nameEnd + 1);
  const dataStart = nameEnd + 5;
  if (len === -1 && dataStart === body.length) return { mechanism, data: Buffer.alloc(0) };
  if (len < 0 || dataStart + len !== body.length) throw new ProtocolError('malformed SASLInitialResponse message');
  return { mechanism, data: body.subarray(dataStart) };
}

/** Text of a Query message body (NUL-terminated string). */
export function queryText(body: Buffer): string {
  const end = body.indexOf(0);
  if (end < 0 || end !== body.length - 1) throw new ProtocolError('invalid string in message');
  return body.toString('utf8', 0, end);
}
