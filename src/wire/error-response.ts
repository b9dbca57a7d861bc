// ErrorResponse and NoticeResponse: a list of (field code, string) pairs, NUL-terminated.

import { Msg } from './codes.js';
import { MessageWriter } from './writer.js';

export type Severity = 'ERROR' | 'FATAL' | 'PANIC' | 'WARNING' | 'NOTICE' | 'DEBUG' | 'INFO' | 'LOG';

export interface ErrorFields {
  severity: Severity;
  code: string;
  message: string;
  detail?: string | undefined;
  hint?: string | undefined;
}

/** Field codes, as PostgreSQL's protocol documentation names them. */
const FIELD = {
  severity: 0x53, // S (localised)
  severityRaw: 0x56, // V (never localised)
  code: 0x43, // C
  message: 0x4d, // M
  detail: 0x44, // D
  hint: 0x48, // H
} as const;

function writeFields(w: MessageWriter, type: number, f: ErrorFields): void {
  const start = w.begin(type);
  w.int8(FIELD.severity).cstring(f.severity);
  w.int8(FIELD.severityRaw).cstring(f.severity);
  w.int8(FIELD.code).cstring(f.code);
  w.int8(FIELD.message).cstring(f.message);
  if (f.detail !== undefined) w.int8(FIELD.detail).cstring(f.detail);
  if (f.hint !== undefined) w.int8(FIELD.hint).cstring(f.hint);
  w.int8(0);
  w.end(start);
}

export function errorResponse(f: ErrorFields): Buffer {
  const w = new MessageWriter(64 + f.message.length);
  writeFields(w, Msg.ErrorResponse, f);
  return w.flush();
}

export function noticeResponse(f: ErrorFields): Buffer {
  const w = new MessageWriter(64 + f.message.length);
  writeFields(w, Msg.NoticeResponse, f);
  return w.flush();
}

/** Reads the fields of an ErrorResponse/NoticeResponse body (after the 5-byte header). */
export function parseErrorFields(body: Buffer): Map<string, string> {
  const fields = new Map<string, string>();
  let pos = 0;
  while (pos < body.length) {
    const code = body[pos]!;
    if (code === 0) break;
    const end = body.indexOf(0, pos + 1);
    if (end < 0) break;
    fields.set(String.fromCharCode(code), body.toString('utf8', pos + 1, end));
    pos = end + 1;
  }
  return fields;
}
