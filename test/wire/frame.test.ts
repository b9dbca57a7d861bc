import { expect } from 'chai';
import { FrameAction, FrameScanner, Verdict, type FrameSink } from '../../src/wire/frame.js';

function msg(type: string, body: Buffer | string): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  const h = Buffer.alloc(5);
  h.write(type, 0, 'latin1');
  h.writeInt32BE(b.length + 4, 1);
  return Buffer.concat([h, b]);
}

interface Recorded {
  forwarded: Buffer;
  notes: string[];
  wholes: string[];
  invalid: number[];
  runs: number;
}

function recorder(verdicts: Record<string, Verdict> = {}): { sink: FrameSink; rec: Recorded } {
  const pieces: Buffer[] = [];
  const rec: Recorded = { forwarded: Buffer.alloc(0), notes: [], wholes: [], invalid: [], runs: 0 };
  const sink: FrameSink = {
    forward: (buf, start, end) => {
      pieces.push(Buffer.from(buf.subarray(start, end)));
      rec.forwarded = Buffer.concat(pieces);
      rec.runs++;
    },
    note: (type) => rec.notes.push(String.fromCharCode(type)),
    frame: (type, buf, start, end) => {
      rec.wholes.push(buf.toString('latin1', start, end));
      return verdicts[String.fromCharCode(type)] ?? Verdict.Forward;
    },
    invalid: (type, length) => rec.invalid.push(type, length),
  };
  return { sink, rec };
}

const actions = {
  [0x5a]: FrameAction.Whole, // Z
  [0x53]: FrameAction.Note, // S
  [0x58]: FrameAction.Reject, // X
};

const stream = Buffer.concat([
  msg('T', 'rowdesc'),
  msg('D', Buffer.alloc(300, 7)),
  msg('S', 'sync'),
  msg('Z', 'I'),
  msg('D', ''),
  msg('C', 'SELECT 1\0'),
  msg('Z', 'T'),
]);

/** Feeds `chunks` in order, re-feeding paused remainders at once. */
function feedAll(scanner: FrameScanner, sink: FrameSink, chunks: Buffer[]): void {
  for (const c of chunks) {
    let from = 0;
    while (from < c.length) {
      const stop = scanner.feed(c, sink, from);
      if (stop < 0 || stop === c.length) break;
      from = stop;
    }
  }
}

describe('wire/frame: FrameScanner', () => {
  it('forwards a whole chunk as one run when nothing is dropped', () => {
    const { sink, rec } = recorder();
    const s = new FrameScanner({ actions, maxLength: 1 << 20, maxWholeLength: 1024 });
    s.feed(stream, sink);
    expect(rec.forwarded.equals(stream)).to.equal(true);
    expect(rec.runs).to.equal(1);
    expect(rec.notes).to.deep.equal(['S']);
    expect(rec.wholes).to.deep.equal([msg('Z', 'I').toString('latin1'), msg('Z', 'T').toString('latin1')]);
    expect(s.atBoundary).to.equal(true);
  });

  it('gives the same bytes and events when split at every offset', () => {
    for (let cut = 0; cut <= stream.length; cut++) {
      const { sink, rec } = recorder();
      const s = new FrameScanner({ actions, maxLength: 1 << 20, maxWholeLength: 1024 });
      feedAll(s, sink, [stream.subarray(0, cut), stream.subarray(cut)]);
      expect(rec.forwarded.equals(stream), `cut ${cut}`).to.equal(true);
      expect(rec.notes, `cut ${cut}`).to.deep.equal(['S']);
      expect(rec.wholes.length, `cut ${cut}`).to.equal(2);
      expect(s.atBoundary).to.equal(true);
    }
  });

  it('survives one byte at a time', () => {
    const { sink, rec } = recorder();
    const s = new FrameScanner({ actions, maxLength: 1 << 20, maxWholeLength: 1024 });
    feedAll(s, sink, [...stream].map((b) => Buffer.from([b])));
    expect(rec.forwarded.equals(stream)).to.equal(true);
    expect(rec.wholes.length).to.equal(2);
  });

  it('drops frames the sink drops, at every split, and keeps the rest in order', () => {
    const expected = Buffer.concat([msg('T', 'rowdesc'), msg('D', Buffer.alloc(300, 7)), msg('S', 'sync'), msg('D', ''), msg('C', 'SELECT 1\0')]);
    for (let cut = 0; cut <= stream.length; cut++) {
      const { sink, rec } = recorder({ Z: Verdict.Drop });
      const s = new FrameScanner({ actions, maxLength: 1 << 20, maxWholeLength: 1024 });
      feedAll(s, sink, [stream.subarray(0, cut), stream.subarray(cut)]);
      expect(rec.forwarded.equals(expected), `cut ${cut}`).to.equal(true);
    }
  });

  it('pauses after a DropAndPause frame and resumes where told', () => {
    const { sink, rec } = recorder({ Z: Verdict.DropAndPause });
    const s = new FrameScanner({ actions, maxLength: 1 << 20, maxWholeLength: 1024 });
    const first = s.feed(stream, sink);
    const zEnd = msg('T', 'rowdesc').length + msg('D', Buffer.alloc(300, 7)).length + msg('S', 'sync').length + 6;
    expect(first).to.equal(zEnd);
    expect(rec.wholes.length).to.equal(1);
    const second = s.feed(stream, sink, first);
    expect(second).to.equal(stream.length);
    expect(rec.wholes.length).to.equal(2);
  });

  it('reports a rejected type or impossible length and stops reading', () => {
    for (const bad of [msg('X', ''), Buffer.from([0x44, 0, 0, 0, 2]), Buffer.from([0x44, 0x7f, 0xff, 0xff, 0xff])]) {
      for (let cut = 0; cut <= bad.length; cut++) {
        const { sink, rec } = recorder();
        const s = new FrameScanner({ actions, maxLength: 1 << 20, maxWholeLength: 1024 });
        const good = msg('C', 'ok\0');
        const input = Buffer.concat([good, bad, good]);
        const at = good.length + cut;
        feedAll(s, sink, [input.subarray(0, at), input.subarray(at)]);
        expect(rec.invalid.length, `cut ${cut}`).to.equal(2);
        expect(rec.forwarded.equals(good), `cut ${cut}`).to.equal(true);
        expect(s.feed(good, sink)).to.equal(-1);
      }
    }
  });

  it('passes Whole frames over the size cap unassembled, as Note', () => {
    const { sink, rec } = recorder();
    const s = new FrameScanner({ actions, maxLength: 1 << 20, maxWholeLength: 8 });
    const big = msg('Z', 'x'.repeat(100));
    s.feed(big, sink);
    expect(rec.wholes).to.deep.equal([]);
    expect(rec.notes).to.deep.equal(['Z']);
    expect(rec.forwarded.equals(big)).to.equal(true);
  });
});
