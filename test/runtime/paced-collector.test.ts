// The runtime collects V8's heap between clients' requests, before V8 would inside one
// (src/runtime/paced-collector.ts): the pacing, on a heap and a CPU clock the test moves.

import { expect } from 'chai';
import { PacedCollector } from '../../src/runtime/paced-collector.js';

const MB = 2 ** 20;

function pacer(): { c: PacedCollector; step: (heapMb: number, cpuMs: number) => boolean; gcs: () => number; flags: string[] } {
  let used = 10 * MB;
  let cpu = 0;
  let gcs = 0;
  const flags: string[] = [];
  const c = new PacedCollector({
    gc: () => {
      gcs++;
      used = 10 * MB;
    },
    usedBytes: () => used,
    cpuMs: () => cpu,
    setV8Flags: (f) => flags.push(f),
    intervalMs: 50,
  });
  return {
    c,
    // One interval: the heap is at heapMb and the process used cpuMs of CPU in it.
    step: (heapMb, cpuMs) => {
      used = heapMb * MB;
      cpu += cpuMs;
      return c.tick();
    },
    gcs: () => gcs,
    flags,
  };
}

describe('runtime: paced collector', function () {
  it('collects once the heap has grown 3 MB since the last collection, and not before', () => {
    const p = pacer();
    expect([11, 12, 12.9, 13.1, 11, 13.2].map((mb) => p.step(mb, 1))).to.deep.equal([false, false, false, true, false, true]);
    expect(p.gcs()).to.equal(2);
  });

  it('leaves the collecting to V8 while the process is busy, and collects at the first calm interval', () => {
    const p = pacer();
    expect([
      [14, 11],
      [16, 30],
      [18, 4],
    ].map(([mb, cpu]) => p.step(mb!, cpu!))).to.deep.equal([false, false, true]);
  });

  it("counts from V8's own collections too: a heap that shrank is the new base", () => {
    const p = pacer();
    expect([12, 8, 10.5, 11.1].map((mb) => p.step(mb, 1))).to.deep.equal([false, false, false, true]);
  });

  it("turns V8's memory reducer off when it starts: its collections came at lone clients' connects", () => {
    const p = pacer();
    p.c.start();
    expect(p.flags).to.deep.equal(['--no-memory-reducer']);
  });
});
