// The runtime keeps V8's young generation at its starting size (src/runtime/young-generation.ts).
// Each case runs in a node process of its own, since the flag, once set, stays for the process.

import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const moduleUrl = new URL('../../src/runtime/young-generation.js', import.meta.url).href;
const cliUrl = new URL('../../src/cli/main.js', import.meta.url).href;

/** Allocates 3 million short-lived objects (some kept a while), then reports the young generation's size. */
const allocate = (cap: boolean): string => `
  import v8 from 'node:v8';
  const { capYoungGeneration } = await import(${JSON.stringify(moduleUrl)});
  const capped = ${cap} ? capYoungGeneration() : null;
  const keep = [];
  for (let i = 0; i < 3e6; i++) { const o = { i, s: 'x' + i }; if (i % 100 === 0) keep.push(o); if (keep.length > 5000) keep.length = 0; }
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

  it('stays at its starting size once capped', async () => {
    const r = await youngGeneration(true);
    expect(r.capped).to.equal(true);
    expect(r.mb).to.be.at.most(2);
  });

  it("is left to the user's own --max-semi-space-size", async () => {
    const r = await youngGeneration(true, ['--max-semi-space-size=4']);
    expect(r.capped).to.equal(false);
    expect(r.mb).to.equal(8);
  });

  it('is capped by `pgx start` before the runtime\'s modules load, which would grow it', async () => {
    // start --help loads every module the runtime does, and stops there.
    const script = `
      import v8 from 'node:v8';
      const { main } = await import(${JSON.stringify(cliUrl)});
      await main(['start', '--help']);
      const young = v8.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
      process.stderr.write(JSON.stringify({ mb: young.space_size / 2 ** 20 }));
    `;
    const env = { ...process.env, NODE_OPTIONS: '' };
    const { stderr } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], { env });
    expect((JSON.parse(stderr) as { mb: number }).mb).to.be.at.most(2);
  });
});
