// The runtime keeps V8's young generation at its starting size (src/runtime/young-generation.ts).
// Each case runs in a node process of its own, since the flag, once set, stays for the process.

import { expect } from 'chai';
import { execFile } from 'node:child_process';
import { promisify } from 'node:util';

const moduleUrl = new URL('../../src/runtime/young-generation.js', import.meta.url).href;
const cliUrl = new URL('../../src/cli/main.js', import.meta.url).href;

/** Ends a script: prints its result with the young generation's size (both semi-spaces), on stderr (stdout may carry help). */
const report = (result: string): string => `
  const young = (await import('node:v8')).default.getHeapSpaceStatistics().find((s) => s.space_name === 'new_space');
  process.stderr.write(JSON.stringify({ ...${result}, mb: young.space_size / 2 ** 20 }));
`;

/** Allocates 3 million short-lived objects (some kept a while), then reports the young generation's size. */
const allocate = (cap: boolean): string => `
  const { capYoungGeneration } = await import(${JSON.stringify(moduleUrl)});
  const capped = ${cap} ? capYoungGeneration() : null;
  const keep = [];
  for (let i = 0; i < 3e6; i++) { const o = { i, s: 'x' + i }; if (i % 100 === 0) keep.push(o); if (keep.length > 5000) keep.length = 0; }
  ${report('{ capped }')}
`;

/** Runs a script in a node process of its own and returns what it reported. */
async function inOwnProcess(script: string, nodeArgs: string[] = []): Promise<{ capped?: boolean | null; mb: number }> {
  const env = { ...process.env, NODE_OPTIONS: '' };
  const { stderr } = await promisify(execFile)(process.execPath, [...nodeArgs, '--input-type=module', '-e', script], { env });
  return JSON.parse(stderr) as { capped?: boolean | null; mb: number };
}

const youngGeneration = (cap: boolean, nodeArgs: string[] = []) => inOwnProcess(allocate(cap), nodeArgs);

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
    const r = await inOwnProcess(`
      const { main } = await import(${JSON.stringify(cliUrl)});
      await main(['start', '--help']);
      ${report('{}')}
    `);
    expect(r.mb).to.be.at.most(2);
  });
});
