// Byte fixtures for the frontend readers (src/wire/frontend.ts). Every fixture is written out by hand
// from the "Message Formats" section of the PostgreSQL protocol documentation, and the streaming case
// (the engine collecting a startup packet from chunks) is replayed split at every offset.

import { expect } from 'chai';
import {
  ProtocolError,
  parseSASLInitialResponse,
  parseStartupPacket,
  queryText,
  startupPacketLength,
  type StartupPacket,
} from '../../src/wire/frontend.js';

/** Bytes from a hex string; spaces and line breaks are ignored. */
function hex(s: string): Buffer {
  return Buffer.from(s.replace(/\s+/g, ''), 'hex');
}

function catch_(fn: () => unknown): unknown {
  try {
    fn();
  } catch (err) {
    return err;
  }
  throw new Error('expected a throw');
}

function expectProtocolError(fn: () => unknown, sqlstate = '08P01', message?: RegExp): ProtocolError {
  const err = catch_(fn);
  expect(err).to.be.instanceOf(ProtocolError);
  const pe = err as ProtocolError;
  expect(pe.sqlstate).to.equal(sqlstate);
  expect(pe.name).to.equal('ProtocolError');
  if (message) expect(pe.message).to.match(message);
  return pe;
}

/**
 * What client.ts does with a startup-phase stream: wait for the length word, then for the whole
 * packet, then parse it. Returns every packet parsed so far and the unread tail.
 */
class StartupAssembler {
  private buf = Buffer.alloc(0);
  readonly packets: StartupPacket[] = [];

  push(chunk: Buffer): void {
    this.buf = Buffer.concat([this.buf, chunk]);
    for (;;) {
      const len = startupPacketLength(this.buf);
      if (len < 0 || this.buf.length < len) return;
      this.packets.push(parseStartupPacket(this.buf.subarray(0, len)));
      this.buf = this.buf.subarray(len);
    }
  }

  get pending(): number {
    return this.buf.length;
  }
}

// ---- fixtures (protocol docs: StartupMessage, SSLRequest, GSSENCRequest, CancelRequest) ----

// StartupMessage, protocol 3.0: Int32 length, Int32 196608, then name/value pairs and a final NUL.
// user=postgres database=app application_name=t\xc3\xa9st (UTF-8).
const STARTUP_30 = hex(`
  00 00 00 3b
  00 03 00 00
  75 73 65 72 00  70 6f 73 74 67 72 65 73 00
  64 61 74 61 62 61 73 65 00  61 70 70 00
  61 70 70 6c 69 63 61 74 69 6f 6e 5f 6e 61 6d 65 00  74 c3 a9 73 74 00
  00
`);

// StartupMessage, protocol 3.2 with one protocol option: user=u _pq_.test_opt=1.
const STARTUP_32 = hex(`
  00 00 00 20
  00 03 00 02
  75 73 65 72 00  75 00
  5f 70 71 5f 2e 74 65 73 74 5f 6f 70 74 00  31 00
  00
`);

const SSL_REQUEST = hex('00 00 00 08 04 d2 16 2f');
const GSSENC_REQUEST = hex('00 00 00 08 04 d2 16 30');
// CancelRequest (3.0): length 16, code 80877102, pid 0x00001234, secret 0xdeadbeef.
const CANCEL_30 = hex('00 00 00 10 04 d2 16 2e 00 00 12 34 de ad be ef');

describe('wire/frontend: startupPacketLength', () => {
  it('needs four bytes before it can answer', () => {
    expect(startupPacketLength(Buffer.alloc(0))).to.equal(-1);
    expect(startupPacketLength(hex('00'))).to.equal(-1);
    expect(startupPacketLength(hex('00 00 00'))).to.equal(-1);
    expect(startupPacketLength(hex('00 00 00 08'))).to.equal(8);
    expect(startupPacketLength(STARTUP_30)).to.equal(STARTUP_30.length);
  });

  it('accepts exactly 8 to 10000 and refuses the rest with 08P01', () => {
    const len = (n: number): Buffer => {
      const b = Buffer.alloc(4);
      b.writeInt32BE(n);
      return b;
    };
    expect(startupPacketLength(len(8))).to.equal(8);
    expect(startupPacketLength(len(10000))).to.equal(10000);
    for (const bad of [0, 4, 7, 10001, 0x7fffffff, -1, -0x80000000]) {
      expectProtocolError(() => startupPacketLength(len(bad)), '08P01', /invalid length of startup packet/);
    }
  });
});

describe('wire/frontend: parseStartupPacket', () => {
  it('reads a 3.0 StartupMessage with parameters, in order', () => {
    expect(STARTUP_30.readInt32BE(0)).to.equal(STARTUP_30.length); // the fixture is self-consistent
    const p = parseStartupPacket(STARTUP_30);
    expect(p.kind).to.equal('startup');
    if (p.kind !== 'startup') return;
    expect(p.major).to.equal(3);
    expect(p.minor).to.equal(0);
    expect([...p.params]).to.deep.equal([
      ['user', 'postgres'],
      ['database', 'app'],
      ['application_name', 'tést'],
    ]);
    expect(p.protocolOptions).to.deep.equal([]);
  });

  it('reads a 3.2 StartupMessage and sets _pq_. options apart', () => {
    expect(STARTUP_32.readInt32BE(0)).to.equal(STARTUP_32.length);
    const p = parseStartupPacket(STARTUP_32);
    expect(p).to.deep.equal({
      kind: 'startup',
      major: 3,
      minor: 2,
      params: new Map([['user', 'u']]),
      protocolOptions: ['_pq_.test_opt'],
    });
  });

  it('reads a StartupMessage with no parameters at all (the engine asks for user later)', () => {
    const p = parseStartupPacket(hex('00 00 00 09 00 03 00 00 00'));
    expect(p).to.deep.equal({ kind: 'startup', major: 3, minor: 0, params: new Map(), protocolOptions: [] });
  });

  it('keeps an empty value and lets a repeated name win last', () => {
    const p = parseStartupPacket(Buffer.from('\0\0\0\x18\0\x03\0\0user\0\0user\0bob\0\0', 'latin1'));
    expect(p.kind === 'startup' && p.params.get('user')).to.equal('bob');
    const q = parseStartupPacket(Buffer.from('\0\0\0\x12\0\x03\0\0options\0\0\0', 'latin1'));
    expect(q.kind === 'startup' && [...q.params]).to.deep.equal([['options', '']]);
  });

  it('recognises SSLRequest and GSSENCRequest', () => {
    expect(parseStartupPacket(SSL_REQUEST)).to.deep.equal({ kind: 'ssl' });
    expect(parseStartupPacket(GSSENC_REQUEST)).to.deep.equal({ kind: 'gssenc' });
  });

  it('reads a 3.0 CancelRequest with a 4-byte key', () => {
    const p = parseStartupPacket(CANCEL_30);
    expect(p).to.deep.equal({ kind: 'cancel', pid: 0x1234, secret: hex('de ad be ef') });
  });

  it('reads a 3.2 CancelRequest with a longer key, up to 256 bytes', () => {
    for (const keyLen of [8, 32, 255, 256]) {
      const key = Buffer.alloc(keyLen, 0xab);
      const packet = Buffer.concat([hex('00 00 00 00 04 d2 16 2e 7f ff ff ff'), key]);
      packet.writeInt32BE(packet.length, 0);
      const p = parseStartupPacket(packet);
      expect(p).to.deep.equal({ kind: 'cancel', pid: 0x7fffffff, secret: key });
    }
  });

  it('copies the cancel key out of the packet (the input buffer is reused)', () => {
    const packet = Buffer.from(CANCEL_30);
    const p = parseStartupPacket(packet);
    packet.fill(0);
    expect(p.kind === 'cancel' && p.secret.toString('hex')).to.equal('deadbeef');
  });

  it('refuses CancelRequests with no room for a key, or a key over 256 bytes', () => {
    for (const total of [8, 12, 15, 12 + 257, 1000]) {
      const packet = Buffer.alloc(total);
      packet.writeInt32BE(total, 0);
      packet.writeInt32BE(80877102, 4);
      expectProtocolError(() => parseStartupPacket(packet), '08P01', /invalid length of cancel request/);
    }
  });

  it('refuses a protocol major version other than 3 with 0A000, naming it', () => {
    const v2 = hex('00 00 00 09 00 02 00 00 00');
    expectProtocolError(() => parseStartupPacket(v2), '0A000', /unsupported frontend protocol 2\.0: server supports 3\.0/);
    const v4 = hex('00 00 00 09 00 04 00 01 00');
    expectProtocolError(() => parseStartupPacket(v4), '0A000', /unsupported frontend protocol 4\.1/);
    // An unknown request code in the 1234.x space is just another unsupported version.
    const odd = hex('00 00 00 08 04 d2 16 31');
    expectProtocolError(() => parseStartupPacket(odd), '0A000', /unsupported frontend protocol 1234\.5681/);
  });

  it('refuses a StartupMessage whose parameters are not NUL-terminated', () => {
    const cases: Array<[string, Buffer]> = [
      ['no final terminator', Buffer.from('\0\0\0\x16\0\x03\0\0user\0postgres\0', 'latin1')],
      ['value without NUL', Buffer.from('\0\0\0\x15\0\x03\0\0user\0postgres', 'latin1')],
      ['name without NUL', Buffer.from('\0\0\0\x0c\0\x03\0\0user', 'latin1')],
      ['bytes after the terminator', Buffer.from('\0\0\0\x18\0\x03\0\0user\0postgres\0\0x', 'latin1')],
      ['nothing after the version', hex('00 00 00 08 00 03 00 00')],
    ];
    for (const [what, packet] of cases) {
      const err = catch_(() => parseStartupPacket(packet));
      expect(err, what).to.be.instanceOf(ProtocolError);
      expect((err as ProtocolError).sqlstate, what).to.equal('08P01');
      expect((err as ProtocolError).message, what).to.match(/invalid startup packet layout/);
    }
  });

  it('refuses every truncation of a StartupMessage', () => {
    for (const fixture of [STARTUP_30, STARTUP_32]) {
      for (let cut = 8; cut < fixture.length; cut++) {
        const err = catch_(() => parseStartupPacket(fixture.subarray(0, cut)));
        expect(err, `cut ${cut}`).to.be.instanceOf(ProtocolError);
      }
    }
  });

  it('refuses a packet shorter than its fixed 8-byte head with ProtocolError, not RangeError', () => {
    for (let n = 0; n < 8; n++) {
      expectProtocolError(() => parseStartupPacket(SSL_REQUEST.subarray(0, n)), '08P01');
    }
  });

  it('yields the same packets when the stream is split at every offset', () => {
    const stream = Buffer.concat([SSL_REQUEST, STARTUP_30]);
    const whole = new StartupAssembler();
    whole.push(stream);
    expect(whole.packets.map((p) => p.kind)).to.deep.equal(['ssl', 'startup']);
    for (let cut = 0; cut <= stream.length; cut++) {
      const a = new StartupAssembler();
      a.push(stream.subarray(0, cut));
      a.push(stream.subarray(cut));
      expect(a.packets, `cut ${cut}`).to.deep.equal(whole.packets);
      expect(a.pending).to.equal(0);
    }
    for (const fixture of [STARTUP_32, CANCEL_30, GSSENC_REQUEST]) {
      const expected = parseStartupPacket(fixture);
      for (let cut = 0; cut <= fixture.length; cut++) {
        const a = new StartupAssembler();
        a.push(fixture.subarray(0, cut));
        expect(a.packets.length, `cut ${cut}`).to.equal(cut === fixture.length ? 1 : 0);
        a.push(fixture.subarray(cut));
        expect(a.packets, `cut ${cut}`).to.deep.equal([expected]);
      }
    }
  });

  it('survives one byte at a time', () => {
    const stream = Buffer.concat([GSSENC_REQUEST, STARTUP_32]);
    const a = new StartupAssembler();
    for (const b of stream) a.push(Buffer.from([b]));
    expect(a.packets.map((p) => p.kind)).to.deep.equal(['gssenc', 'startup']);
  });

  it('refuses a bad length word as soon as the four bytes are there, at every split', () => {
    const bad = hex('00 00 00 04 00 03 00 00');
    for (let cut = 0; cut <= bad.length; cut++) {
      const a = new StartupAssembler();
      const first = (): void => a.push(bad.subarray(0, cut));
      if (cut < 4) {
        first();
        expectProtocolError(() => a.push(bad.subarray(cut)), '08P01', /invalid length/);
      } else {
        expectProtocolError(first, '08P01', /invalid length/);
      }
    }
  });
});

// SASLInitialResponse body (after 'p' and the length): mechanism name, Int32 length of the data (-1 for
// none), the data. The client-first message here is `n,,n=,r=abc`.
const SASL_INITIAL = Buffer.concat([Buffer.from('SCRAM-SHA-256\0'), hex('00 00 00 0b'), Buffer.from('n,,n=,r=abc')]);
const SASL_INITIAL_NONE = Buffer.concat([Buffer.from('SCRAM-SHA-256\0'), hex('ff ff ff ff')]);

describe('wire/frontend: parseSASLInitialResponse', () => {
  it('reads the mechanism and the client-first data', () => {
    const r = parseSASLInitialResponse(SASL_INITIAL);
    expect(r.mechanism).to.equal('SCRAM-SHA-256');
    expect(r.data.toString()).to.equal('n,,n=,r=abc');
  });

  it('reads length -1 as no data', () => {
    const r = parseSASLInitialResponse(SASL_INITIAL_NONE);
    expect(r.mechanism).to.equal('SCRAM-SHA-256');
    expect(r.data.length).to.equal(0);
  });

  it('refuses bytes after a -1 length, as PostgreSQL (pq_getmsgend) does', () => {
    expectProtocolError(() => parseSASLInitialResponse(Buffer.concat([SASL_INITIAL_NONE, Buffer.from('x')])), '08P01', /malformed/);
  });

  it('reads an empty mechanism and empty data', () => {
    const r = parseSASLInitialResponse(hex('00 00 00 00 00'));
    expect(r.mechanism).to.equal('');
    expect(r.data.length).to.equal(0);
  });

  it('refuses every truncation', () => {
    for (const fixture of [SASL_INITIAL, SASL_INITIAL_NONE]) {
      for (let cut = 0; cut < fixture.length; cut++) {
        expectProtocolError(() => parseSASLInitialResponse(fixture.subarray(0, cut)), '08P01', /malformed SASLInitialResponse/);
      }
    }
  });

  it('refuses a data length that disagrees with the message, or below -1', () => {
    const withLen = (n: number, data = 'n,,n=,r=abc'): Buffer => {
      const b = Buffer.concat([Buffer.from('SCRAM-SHA-256\0'), Buffer.alloc(4), Buffer.from(data)]);
      b.writeInt32BE(n, 14);
      return b;
    };
    for (const n of [0, 10, 12, -2, -0x80000000, 0x7fffffff]) {
      expectProtocolError(() => parseSASLInitialResponse(withLen(n)), '08P01', /malformed SASLInitialResponse/);
    }
    expect(parseSASLInitialResponse(withLen(11)).data.toString()).to.equal('n,,n=,r=abc');
  });

  it('refuses a mechanism name without its NUL', () => {
    expectProtocolError(() => parseSASLInitialResponse(Buffer.from('SCRAM-SHA-256')), '08P01');
  });
});

describe('wire/frontend: queryText', () => {
  it('reads the NUL-terminated query string', () => {
    expect(queryText(Buffer.from('SELECT 1\0'))).to.equal('SELECT 1');
    expect(queryText(Buffer.from('\0'))).to.equal('');
    expect(queryText(Buffer.from('SELECT \'é\'\0'))).to.equal("SELECT 'é'");
  });

  it('refuses a missing terminator, an embedded NUL, or an empty body', () => {
    for (const bad of [Buffer.from('SELECT 1'), Buffer.from('SELECT\x001\0'), Buffer.from('SELECT 1\0\0'), Buffer.alloc(0)]) {
      expectProtocolError(() => queryText(bad), '08P01', /invalid string in message/);
    }
  });
});
