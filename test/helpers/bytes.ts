// Byte fixtures for codec tests: hex literals, exact comparisons, and node-postgres' own parser as an
// independent reader of what our writers produce.

import { expect } from 'chai';
import { PassThrough } from 'node:stream';
import { parse } from 'pg-protocol';

/** A buffer from hex digits; whitespace is ignored so fixtures can be laid out by field. */
export function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

export function expectBytes(actual: Buffer, expected: Buffer): void {
  expect(actual.toString('hex')).to.equal(expected.toString('hex'));
}

/** Messages pg-protocol reads from `chunks`, as plain objects. */
export async function pgParse(chunks: Buffer[]): Promise<Array<Record<string, unknown>>> {
  const stream = new PassThrough();
  const out: Array<Record<string, unknown>> = [];
  const done = parse(stream, (msg) => {
    // Own properties, enumerable or not (an Error's message is not).
    const copy: Record<string, unknown> = {};
    for (const k of Object.getOwnPropertyNames(msg)) if (k !== 'stack') copy[k] = (msg as unknown as Record<string, unknown>)[k];
    out.push(copy);
  });
  // Copies: pg-protocol owns the chunks it is given and compacts partial messages in place.
  for (const c of chunks) stream.write(Buffer.from(c));
  stream.end();
  await done;
  return out;
}
