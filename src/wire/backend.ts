// Writers for the backend (server -> client) messages the engine itself produces. Bodiless and
// constant messages are built once.

import { Auth, Msg, TxStatus } from './codes.js';
import { MessageWriter } from './writer.js';

function auth(code: number, data?: Uint8Array): Buffer {
  const w = new MessageWriter(16 + (data?.length ?? 0));
  const start = w.begin(Msg.Authentication);
  w.int32(code);
  if (data) w.bytes(data);
  return w.end(start).flush();
}

export const AUTHENTICATION_OK = auth(Auth.Ok);
export const READY_IDLE = readyForQuery(TxStatus.Idle);
/** The single byte answering SSLRequest/GSSENCRequest when encryption is not offered. */
export const ENCRYPTION_REFUSED = Buffer.from('N');
/** The answer to an SSLRequest when TLS is on: the TLS handshake follows on the same connection. */
export const ENCRYPTION_ACCEPTED = Buffer.from('S');

export function authenticationSASL(mechanisms: string[]): Buffer {
  const w = new MessageWriter();
  const start = w.begin(Msg.Authentication);
  w.int32(Auth.SASL);
  for (const m of mechanisms) w.cstring(m);
  w.int8(0);
  return w.end(start).flush();
}

export function authenticationSASLContinue(data: string): Buffer {
  return auth(Auth.SASLContinue, Buffer.from(data));
}

export function authenticationSASLFinal(data: string): Buffer {
  return auth(Auth.SASLFinal, Buffer.from(data));
}

export function parameterStatus(name: string, value: string): Buffer {
  const w = new MessageWriter(16 + name.length + value.length);
  const start = w.begin(Msg.ParameterStatus);
  w.cstring(name).cstring(value);
  return w.end(start).flush();
}

/**
 * BackendKeyData: the 4-byte secret of protocol 3.0 as a number, or a secret of 4 to 256 bytes as a
 * Buffer (protocol 3.2, where the length follows from the message's).
 */
export function backendKeyData(pid: number, secret: number | Buffer): Buffer {
  const w = new MessageWriter(9 + (typeof secret === 'number' ? 4 : secret.length));
  const start = w.begin(Msg.BackendKeyData);
  w.int32(pid);
  if (typeof secret === 'number') w.int32(secret);
  else w.bytes(secret);
  return w.end(start).flush();
}

/**
 * DataRow messages, back to back, for rows of text values (null: SQL NULL): what PostgreSQL sends for
 * them, so rows read elsewhere (a mint's claim) compare byte for byte with a backend's own answer.
 */
export function dataRows(rows: readonly (readonly (string | null)[])[]): Buffer {
  const w = new MessageWriter();
  for (const row of rows) {
    const start = w.begin(Msg.DataRow);
    w.int16(row.length);
    for (const value of row) {
      if (value === null) {
        w.int32(-1);
        continue;
      }
      const bytes = Buffer.from(value, 'utf8');
      w.int32(bytes.length).bytes(bytes);
    }
    w.end(start);
  }
  return w.flush();
}

export function readyForQuery(status: TxStatus): Buffer {
  const w = new MessageWriter(6);
  const start = w.begin(Msg.ReadyForQuery);
  w.int8(status);
  return w.end(start).flush();
}

/**
 * Tells a client asking for a newer minor version (or _pq_ options) what this server speaks: protocol
 * 3.`minor`, sent as the whole version number (major << 16 | minor), as PostgreSQL sends it and
 * libpq reads it (the documentation's "newest minor protocol version").
 */
export function negotiateProtocolVersion(minor: number, unrecognized: string[]): Buffer {
  const w = new MessageWriter();
  const start = w.begin(Msg.NegotiateProtocolVersion);
  w.int32((3 << 16) | minor).int32(unrecognized.length);
  for (const o of unrecognized) w.cstring(o);
  return w.end(start).flush();
}
