// Property-based fuzzing of the wire decoders (fast-check, fixed seeds, bounded runs).
// - The startup-phase readers throw nothing but ProtocolError, whatever the bytes.
// - FrameScanner forwards exactly the bytes of the frames it does not drop, in order, however the
//   stream is split; on garbage it never throws and stops at the first invalid header, which a simple
//   reference model finds.

import { expect } from 'chai';
import fc from 'fast-check';
import { CANCEL_REQUEST_CODE, GSSENC_REQUEST_CODE, PROTOCOL_3_0, SSL_REQUEST_CODE } from '../../src/wire/codes.js';
import { FrameAction, FrameScanner, Verdict, type FrameSink } from '../../src/wire/frame.js';
import { ProtocolError, parseSASLInitialResponse, parseStartupPacket, queryText, startupPacketLength } from '../../src/wire/frontend.js';

const SEED = 0x5eed;

function onlyProtocolErrors(fn: () => unknown): void {
  try {
    fn();
  } catch (err) {
    if (!(err instanceof ProtocolError)) throw new Error(`threw ${String(err)} (${(err as Error)?.name}), not ProtocolError`);
    expect(err.sqlstate).to.match(/^[0-9A-Z]{5}$/);
  }
}

function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n | 0);
  return b;
}

const bytes = (maxLength: number): fc.Arbitrary<Buffer> => fc.uint8Array({ maxLength }).map((a) => Buffer.from(a));

/** Startup-shaped packets: a length word (right or wrong), a request code near the interesting ones, a tail. */
const startupShaped: fc.Arbitrary<Buffer> = fc
  .tuple(
    fc.oneof(
      fc.constantFrom(SSL_REQUEST_CODE, GSSENC_REQUEST_CODE, CANCEL_REQUEST_CODE, PROTOCOL_3_0, PROTOCOL_3_0 + 2, 2 << 16),
      fc.integer({ min: -0x80000000, max: 0x7fffffff }),
    ),
    fc.oneof(
      bytes(300),
      // name/value pairs with NULs in and out of place
      fc
        .array(fc.tuple(fc.string({ maxLength: 12 }), fc.string({ maxLength: 12 })), { maxLength: 6 })
        .chain((pairs) =>
          fc.tuple(fc.constant(pairs), fc.constantFrom('', '\0', '\0\0', 'x')).map(([ps, end]) =>
            Buffer.from(ps.map(([k, v]) => `${k}\0${v}\0`).join('') + end),
          ),
        ),
    ),
    fc.boolean(),
  )
  .map(([code, tail, honest]) => {
    const packet = Buffer.concat([int32(0), int32(code), tail]);
    packet.writeInt32BE(honest ? packet.length : (packet.length * 7919) | 0, 0);
    return packet;
  });

describe('wire/fuzz: startup-phase readers', () => {
  it('parseStartupPacket on arbitrary bytes throws nothing but ProtocolError', () => {
    fc.assert(
      fc.property(fc.oneof(bytes(400), startupShaped), (buf) => {
        onlyProtocolErrors(() => {
          const p = parseStartupPacket(buf);
          // Whatever it accepts is well-formed.
          if (p.kind === 'startup') expect(p.major).to.equal(3);
          if (p.kind === 'cancel') expect(p.secret.length).to.be.within(4, 256);
        });
      }),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('startupPacketLength answers -1, a length in [8, 10000], or ProtocolError', () => {
    fc.assert(
      fc.property(fc.oneof(bytes(12), startupShaped), (buf) => {
        onlyProtocolErrors(() => {
          const n = startupPacketLength(buf);
          if (buf.length < 4) expect(n).to.equal(-1);
          else expect(n).to.be.within(8, 10000);
        });
      }),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('parseSASLInitialResponse on arbitrary bytes throws nothing but ProtocolError', () => {
    const saslShaped = fc
      .tuple(fc.constantFrom('SCRAM-SHA-256', '', 'x'), fc.integer({ min: -3, max: 40 }), bytes(40), fc.boolean())
      .map(([mech, len, data, honest]) => Buffer.concat([Buffer.from(`${mech}\0`), int32(honest ? data.length : len), data]));
    fc.assert(
      fc.property(fc.oneof(bytes(80), saslShaped), (buf) => {
        onlyProtocolErrors(() => {
          const r = parseSASLInitialResponse(buf);
          expect(Buffer.byteLength(r.mechanism)).to.be.at.most(buf.length);
          expect(r.data.length).to.be.at.most(buf.length);
        });
      }),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('queryText on arbitrary bytes throws nothing but ProtocolError', () => {
    fc.assert(
      fc.property(bytes(60), (buf) => onlyProtocolErrors(() => queryText(buf))),
      { seed: SEED, numRuns: 2000 },
    );
  });
});

// ---- FrameScanner ----

const Z = 0x5a; // Whole
const S = 0x53; // Note
const X = 0x58; // Reject
const MAX_LENGTH = 2000;
const MAX_WHOLE = 24;
const ACTIONS = { [Z]: FrameAction.Whole, [S]: FrameAction.Note, [X]: FrameAction.Reject };

function scanner(): FrameScanner {
  return new FrameScanner({ actions: ACTIONS, maxLength: MAX_LENGTH, maxWholeLength: MAX_WHOLE });
}

function frame(type: number, body: Buffer): Buffer {
  return Buffer.concat([Buffer.from([type]), int32(body.length + 4), body]);
}

interface Events {
  forwarded: Buffer[];
  notes: number[];
  wholes: Buffer[];
  invalid: Array<[number, number]>;
  /** Per feed() call: forward() calls that pointed into the chunk itself, and frames dropped. */
  feeds: Array<{ chunkRuns: number; drops: number; lastEnd: number; ordered: boolean }>;
}

/** A recording sink; `verdicts` answers Whole frames in turn (Forward when exhausted). */
function recordingSink(verdicts: Verdict[]): { sink: FrameSink; ev: Events; setChunk(c: Buffer): void } {
  const ev: Events = { forwarded: [], notes: [], wholes: [], invalid: [], feeds: [] };
  let chunk: Buffer | null = null;
  let i = 0;
  const cur = () => ev.feeds[ev.feeds.length - 1]!;
  const sink: FrameSink = {
    forward(buf, start, end) {
      expect(start).to.be.lessThan(end);
      ev.forwarded.push(Buffer.from(buf.subarray(start, end)));
      if (buf === chunk) {
        const f = cur();
        f.chunkRuns++;
        if (start < f.lastEnd) f.ordered = false;
        f.lastEnd = end;
      }
    },
    note(type) {
      ev.notes.push(type);
    },
    frame(type, buf, start, end) {
      expect(buf[start]).to.equal(type);
      expect(buf.readInt32BE(start + 1)).to.equal(end - start - 1);
      ev.wholes.push(Buffer.from(buf.subarray(start, end)));
      const v = verdicts[i++] ?? Verdict.Forward;
      if (v !== Verdict.Forward) cur().drops++;
      return v;
    },
    invalid(type, length) {
      ev.invalid.push([type, length]);
    },
  };
  return {
    sink,
    ev,
    setChunk(c) {
      chunk = c;
      ev.feeds.push({ chunkRuns: 0, drops: 0, lastEnd: 0, ordered: true });
    },
  };
}

/** Feeds the chunks in order, re-feeding after a pause, as the pump does. Returns false once broken. */
function feedAll(s: FrameScanner, rec: ReturnType<typeof recordingSink>, chunks: Buffer[]): boolean {
  for (const c of chunks) {
    let from = 0;
    for (;;) {
      rec.setChunk(c);
      const stop = s.feed(c, rec.sink, from);
      if (stop < 0) return false;
      expect(stop).to.be.within(from, c.length);
      if (stop === c.length) break;
      from = stop;
    }
  }
  return true;
}

/** Splits buf at the given cut points (any numbers; taken modulo length+1, sorted). */
function split(buf: Buffer, cuts: number[]): Buffer[] {
  const points = [...new Set(cuts.map((c) => c % (buf.length + 1)))].sort((a, b) => a - b);
  const out: Buffer[] = [];
  let prev = 0;
  for (const p of points) {
    out.push(buf.subarray(prev, p));
    prev = p;
  }
  out.push(buf.subarray(prev));
  return out;
}

/** Copies each chunk into its own buffer, so forward() into a chunk can be told apart. */
function own(chunks: Buffer[]): Buffer[] {
  return chunks.map((c) => Buffer.from(c));
}

const validMessage = fc.record({
  type: fc.oneof(fc.constantFrom(Z, S, 0x44, 0x43, 0x54, 0x64), fc.integer({ min: 0, max: 255 }).filter((t) => t !== X)),
  body: fc.oneof(bytes(8), bytes(40), bytes(300)),
  verdict: fc.constantFrom(Verdict.Forward, Verdict.Forward, Verdict.Drop, Verdict.DropAndPause),
});

describe('wire/fuzz: FrameScanner', () => {
  it('forwards exactly the non-dropped frames, in order, however the stream is split', () => {
    fc.assert(
      fc.property(fc.array(validMessage, { maxLength: 25 }), fc.array(fc.nat(), { maxLength: 12 }), (msgs, cuts) => {
        const frames = msgs.map((m) => frame(m.type, m.body));
        const stream = Buffer.concat(frames);
        // Which frames reach the sink whole, and which of those it drops.
        const assembled = msgs.map((m) => m.type === Z && m.body.length + 4 <= MAX_WHOLE);
        const verdicts = msgs.filter((_, i) => assembled[i]).map((m) => m.verdict);
        const expected = Buffer.concat(frames.filter((_, i) => !assembled[i] || msgs[i]!.verdict === Verdict.Forward));
        const expectedNotes = msgs.filter((m, i) => m.type === S || (m.type === Z && !assembled[i])).map((m) => m.type);

        const s = scanner();
        const rec = recordingSink(verdicts);
        const chunks = own(split(stream, cuts));
        expect(feedAll(s, rec, chunks)).to.equal(true);

        expect(Buffer.concat(rec.ev.forwarded).equals(expected)).to.equal(true);
        expect(rec.ev.wholes.map((w) => w.toString('hex'))).to.deep.equal(frames.filter((_, i) => assembled[i]).map((f) => f.toString('hex')));
        expect(rec.ev.notes).to.deep.equal(expectedNotes);
        expect(rec.ev.invalid).to.deep.equal([]);
        expect(s.atBoundary).to.equal(true);
        // One slice of the chunk per contiguous run: a new run only starts after a dropped frame.
        for (const f of rec.ev.feeds) {
          expect(f.ordered).to.equal(true);
          expect(f.chunkRuns).to.be.at.most(1 + f.drops);
        }
      }),
      { seed: SEED, numRuns: 1500 },
    );
  });

  it('on arbitrary garbage never throws, and stops at the first invalid header', () => {
    // Garbage: pieces that are sometimes valid frames (so the scan gets deep), sometimes raw bytes,
    // sometimes headers with absurd lengths or a rejected type.
    const piece = fc.oneof(
      bytes(12),
      validMessage.map((m) => frame(m.type, m.body)),
      fc.tuple(fc.integer({ min: 0, max: 255 }), fc.integer({ min: -0x80000000, max: 0x7fffffff })).map(([t, len]) =>
        Buffer.concat([Buffer.from([t]), int32(len)]),
      ),
      fc.constant(frame(X, Buffer.alloc(0))),
    );
    fc.assert(
      fc.property(fc.array(piece, { maxLength: 12 }), fc.array(fc.nat(), { maxLength: 10 }), (pieces, cuts) => {
        const stream = Buffer.concat(pieces);
        const model = referenceScan(stream);

        const s = scanner();
        const rec = recordingSink([]);
        const chunks = own(split(stream, cuts));
        const ok = feedAll(s, rec, chunks);

        expect(ok).to.equal(model.invalid === null);
        expect(Buffer.concat(rec.ev.forwarded).toString('hex')).to.equal(model.forwarded.toString('hex'));
        expect(rec.ev.notes).to.deep.equal(model.notes);
        expect(rec.ev.wholes.length).to.equal(model.wholes);
        expect(rec.ev.invalid).to.deep.equal(model.invalid === null ? [] : [model.invalid]);
        if (model.invalid !== null) {
          // Broken for good: nothing more is read or forwarded.
          const before = rec.ev.forwarded.length;
          rec.setChunk(stream);
          expect(s.feed(frame(0x44, Buffer.from('ok')), rec.sink)).to.equal(-1);
          expect(rec.ev.forwarded.length).to.equal(before);
          expect(rec.ev.invalid.length).to.equal(1);
        }
      }),
      { seed: SEED, numRuns: 3000 },
    );
  });

  it('on pure random bytes in random chunks never throws', () => {
    fc.assert(
      fc.property(bytes(600), fc.array(fc.nat(), { maxLength: 20 }), (stream, cuts) => {
        const s = scanner();
        const rec = recordingSink([]);
        feedAll(s, rec, own(split(stream, cuts)));
        const model = referenceScan(stream);
        expect(Buffer.concat(rec.ev.forwarded).equals(model.forwarded)).to.equal(true);
        expect(rec.ev.invalid).to.deep.equal(model.invalid === null ? [] : [model.invalid]);
      }),
      { seed: SEED, numRuns: 2000 },
    );
  });
});

/**
 * What a scanner (all verdicts Forward) must do with a whole stream: walk header to header; stop at the
 * first header with a rejected type or an impossible length; a frame cut off by the end of the stream
 * is forwarded as far as it goes unless it is being assembled whole; a header cut off is held back.
 */
function referenceScan(buf: Buffer): { forwarded: Buffer; invalid: [number, number] | null; notes: number[]; wholes: number } {
  const notes: number[] = [];
  let wholes = 0;
  let pos = 0;
  for (;;) {
    if (buf.length - pos < 5) return { forwarded: buf.subarray(0, pos), invalid: null, notes, wholes };
    const type = buf[pos]!;
    const length = buf.readInt32BE(pos + 1);
    if (type === X || length < 4 || length > MAX_LENGTH) {
      return { forwarded: buf.subarray(0, pos), invalid: [type, length], notes, wholes };
    }
    const whole = type === Z && length <= MAX_WHOLE;
    if (type === S || (type === Z && !whole)) notes.push(type);
    const end = pos + 1 + length;
    if (end > buf.length) return { forwarded: whole ? buf.subarray(0, pos) : buf, invalid: null, notes, wholes };
    if (whole) wholes++;
    pos = end;
  }
}
