// Byte fixtures for the extended-protocol readers and writers (src/wire/extended.ts), written out by
// hand from the "Message Formats" section of the PostgreSQL protocol documentation and checked against
// pg-protocol's serializer (what node-postgres sends). Readers get whole frames from the FrameScanner,
// so each fixture is also fed through the scanner split at every offset.

import { expect } from 'chai';
import { hex, expectBytes } from '../helpers/bytes.js';
import { serialize } from 'pg-protocol';
import { FrameAction, FrameScanner, Verdict, type FrameSink } from '../../src/wire/frame.js';
import { ProtocolError } from '../../src/wire/frontend.js';
import {
  bindMessage,
  closeMessage,
  parseMessage,
  queryMessage,
  readBind,
  readClose,
  readParse,
  statementName,
} from '../../src/wire/extended.js';

// Parse: 'P', length, name "s1", query "SELECT $1", Int16 2 types: 25 (text), 0 (unspecified).
const PARSE = hex(`
  50 0000001b
  73 31 00
  53 45 4c 45 43 54 20 24 31 00
  0002 00000019 00000000
`);

// Bind: portal "", statement "s1", 1 format (text for all), 2 values: "db" and NULL, 1 result format binary.
const BIND = hex(`
  42 0000001c
  00
  73 31 00
  0001 0000
  0002 00000002 64 62  ffffffff
  0001 0001
`);

// Close statement "s1".
const CLOSE = hex('43 00000008 53 73 31 00');

// Query "SELECT 1".
const QUERY = hex('51 0000000d 53 45 4c 45 43 54 20 31 00');

/** The frames a FrameScanner hands over whole when fed `bytes` split at `cut`. */
function wholesAt(bytes: Buffer, cut: number): Buffer[] {
  const scanner = new FrameScanner({
    actions: { [0x50]: FrameAction.Whole, [0x42]: FrameAction.Whole, [0x43]: FrameAction.Whole, [0x51]: FrameAction.Whole },
    maxLength: 1 << 20,
    maxWholeLength: 1 << 20,
  });
  const out: Buffer[] = [];
  const sink: FrameSink = {
    forward: () => {},
    note: () => {},
    frame: (_type, buf, start, end) => {
      out.push(Buffer.from(buf.subarray(start, end)));
      return Verdict.Drop;
    },
    invalid: () => {
      throw new Error('invalid');
    },
  };
  scanner.feed(bytes.subarray(0, cut), sink);
  scanner.feed(bytes.subarray(cut), sink);
  return out;
}

describe('wire/extended: readers', () => {
  it('reads Parse: name, query, declared types (as unsigned OIDs)', () => {
    expect(readParse(PARSE, 0, PARSE.length)).to.deep.equal({ name: 's1', query: 'SELECT $1', paramTypes: [25, 0] });
    const big = serialize.parse({ name: '', text: 'SELECT $1', types: [0xfffffffe] });
    expect(readParse(big, 0, big.length).paramTypes).to.deep.equal([0xfffffffe]);
  });

  it('reads Bind: formats, values as views with NULL, result formats', () => {
    const b = readBind(BIND, 0, BIND.length);
    expect(b.portal).to.equal('');
    expect(b.statement).to.equal('s1');
    expect(b.paramFormats).to.deep.equal([0]);
    expect(b.params.map((p) => (p === null ? null : p.toString()))).to.deep.equal(['db', null]);
    expect(b.resultFormats).to.deep.equal([1]);
    expect(b.params[0]!.buffer).to.equal(BIND.buffer); // a view, not a copy
  });

  it('reads Close of a statement and of a portal', () => {
    expect(readClose(CLOSE, 0, CLOSE.length)).to.deep.equal({ kind: 'S', name: 's1' });
    const portal = serialize.close({ type: 'P', name: 'p' });
    expect(readClose(portal, 0, portal.length)).to.deep.equal({ kind: 'P', name: 'p' });
  });

  it('reads the statement name of a Parse or a Bind without the rest', () => {
    expect(statementName(PARSE, 0, PARSE.length)).to.equal('s1');
    expect(statementName(BIND, 0, BIND.length)).to.equal('s1');
  });

  it('reads a frame in the middle of a larger buffer', () => {
    const buf = Buffer.concat([QUERY, BIND, CLOSE]);
    expect(readBind(buf, QUERY.length, QUERY.length + BIND.length).statement).to.equal('s1');
    expect(readClose(buf, QUERY.length + BIND.length, buf.length).name).to.equal('s1');
  });

  it('refuses truncated, overlong and malformed frames with ProtocolError', () => {
    for (let n = 6; n < BIND.length; n++) expect(() => readBind(BIND, 0, n), `bind cut at ${n}`).to.throw(ProtocolError);
    for (let n = 6; n < PARSE.length; n++) expect(() => readParse(PARSE, 0, n), `parse cut at ${n}`).to.throw(ProtocolError);
    const trailing = Buffer.concat([CLOSE, hex('00')]);
    expect(() => readClose(trailing, 0, trailing.length)).to.throw(ProtocolError, /invalid message format/);
    expect(() => readClose(hex('43 00000007 58 61 00'), 0, 8)).to.throw(ProtocolError, /subtype/);
    const negative = hex('42 0000000e 00 00 0000 0001 fffffffe 0000');
    expect(() => readBind(negative, 0, negative.length)).to.throw(ProtocolError);
  });

  it('gives the same result whichever offset the stream is split at', () => {
    const stream = Buffer.concat([QUERY, PARSE, BIND, CLOSE]);
    for (let cut = 0; cut <= stream.length; cut++) {
      const [q, p, b, c] = wholesAt(stream, cut);
      expectBytes(q!, QUERY);
      expect(readParse(p!, 0, p!.length)).to.deep.equal({ name: 's1', query: 'SELECT $1', paramTypes: [25, 0] });
      expect(readBind(b!, 0, b!.length).params.map((x) => x?.toString() ?? null)).to.deep.equal(['db', null]);
      expect(readClose(c!, 0, c!.length)).to.deep.equal({ kind: 'S', name: 's1' });
    }
  });
});

describe('wire/extended: writers', () => {
  it('writes the fixtures byte for byte', () => {
    expectBytes(parseMessage({ name: 's1', query: 'SELECT $1', paramTypes: [25, 0] }), PARSE);
    expectBytes(
      bindMessage({ portal: '', statement: 's1', paramFormats: [0], params: [Buffer.from('db'), null], resultFormats: [1] }),
      BIND,
    );
    expectBytes(closeMessage({ kind: 'S', name: 's1' }), CLOSE);
    expectBytes(queryMessage('SELECT 1'), QUERY);
  });

  it('writes what pg-protocol writes', () => {
    expectBytes(parseMessage({ name: 'x', query: 'SELECT $1::text', paramTypes: [25] }), serialize.parse({ name: 'x', text: 'SELECT $1::text', types: [25] }));
    expectBytes(
      bindMessage({ portal: 'p', statement: 'x', paramFormats: [0, 0], params: [Buffer.from('é'), null], resultFormats: [0] }),
      serialize.bind({ portal: 'p', statement: 'x', values: ['é', null] }),
    );
    expectBytes(closeMessage({ kind: 'P', name: 'p' }), serialize.close({ type: 'P', name: 'p' }));
    expectBytes(queryMessage("SELECT 'ü'"), serialize.query("SELECT 'ü'"));
  });

  it('round-trips through the readers', () => {
    const bind = { portal: 'por', statement: '', paramFormats: [], params: [Buffer.from('a'), Buffer.alloc(0), null], resultFormats: [0, 1] };
    const b = bindMessage(bind);
    expect(readBind(b, 0, b.length)).to.deep.equal(bind);
    const p = parseMessage({ name: '', query: 'SELECT 1', paramTypes: [] });
    expect(readParse(p, 0, p.length)).to.deep.equal({ name: '', query: 'SELECT 1', paramTypes: [] });
  });
});
