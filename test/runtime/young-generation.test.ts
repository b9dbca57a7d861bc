// The runtime holds V8's young generation at a fixed size (src/runtime/young-generation.ts).
// Each case runs in a node process of its own, since the flag, once set, stays for the process.

import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { SEMI_SPACE_MB } from '../../src/runtime/young-generation.js';

const moduleUrl = new URL('../../src/runtime/young-generation.js', import.meta.url).href;

/**
 * Allocates 3 million objects, a third of them kept a while (as a server's connections keep theirs),
 * in turns of the event loop as a server does, then reports the young generation's size (both
 * semi-spaces).
 */
const allocate = (cap: boolean): string => `
  import v8 from 'node:v8';
  const { capYoungGeneration } = await import(${JSON.stringify(moduleUrl)});
  const capped = ${cap} ? capYoungGeneration() : null;
  const keep = [];
  for (let turn = 0; turn < 300; turn++) {
    for (let i = 0; i < 1e4; i++) { const o = { i, s: 'x' + i }; if (i % 3 === 0) keep.push(o); if (keep.length > 60000) keep.length = 0; }
    await new Promise((resolve) => setImmediate(resolve));
  }
  const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  console.log(JSON.stringify({ capped, mb: young.space_size / 2 ** 20 }));
`;

async function youngGeneration(cap: boolean, nodeArgs: string[] = []): Promise<{ capped: boolean | null; mb: number }> {
  const env = { ...process.env, NODE_OPTIONS: '' };
  const { stdout } = await promisify(execFile)(process.execPath, [...nodeArgs, '--input-type=module', '-e', allocate(cap)], { env });
  return JSON.parse(stdout) as { capped: boolean | null; mb: number };
}

describe('V8 young generation in a runtime process', function () {
  this.timeout(30_000);

  it('grows under allocation when left alone (so the cases below can tell)', async () => {
    expect((await youngGeneration(false)).mb).to.be.greaterThan(8);
  });

  it('grows to SEMI_SPACE_MB a semi-space and no further once held', async () => {
    const r = await youngGeneration(true);
    expect(r.capped).to.equal(true);
    expect(r.mb).to.equal(2 * SEMI_SPACE_MB);
  });

  it("is left to the user's own --max-semi-space-size", async () => {
    const r = await youngGeneration(true, ['--max-semi-space-size=8']);
    expect(r.capped).to.equal(false);
    expect(r.mb).to.equal(16);
  });
});

