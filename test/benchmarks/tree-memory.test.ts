// The churn benchmark's memory reading (benchmarks/lib/tree-memory.ts): PSS of a process tree with
// its file-backed part, which churn leaves out of its retained figure. Read from this process and a
// child it starts.

import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { treeBreakdown } from '../../benchmarks/lib/tree-memory.js';

describe('benchmarks: tree memory', function () {
  it('splits the PSS of a node process into file-backed pages and the rest', async function () {
    const b = await treeBreakdown(process.pid);
    const node = b.byKind.node!;
    expect(b.processes).to.be.at.least(1);
    expect(node.count).to.equal(1);
    // node's own binary is mapped from a file: its text counts as file-backed, its heap does not.
    expect(node.file_mb).to.be.greaterThan(0);
    expect(node.file_mb).to.be.lessThan(node.pss_mb);
    expect(b.file_mb).to.be.at.least(node.file_mb);
  });

  it('counts memory a process allocates outside the file-backed part', async function () {
    // A quiet child process: this one (mocha, other tests' garbage) could shrink meanwhile by the
    // few MB that hide part of the allocation (CI read 59.9 MB of the 64).
    const child = spawn(process.execPath, ['-e', ALLOCATE_ON_INPUT], { stdio: ['pipe', 'pipe', 'inherit'] });
    try {
      const replies = createInterface({ input: child.stdout! })[Symbol.asyncIterator]();
      expect((await replies.next()).value).to.equal('ready');
      const before = await treeBreakdown(child.pid!);
      child.stdin!.write('allocate\n');
      expect((await replies.next()).value).to.equal(String(64 * 2 ** 20));
      const after = await treeBreakdown(child.pid!);
      expect(after.pss_mb - after.file_mb - (before.pss_mb - before.file_mb)).to.be.greaterThan(60);
      expect(Math.abs(after.file_mb - before.file_mb)).to.be.lessThan(8);
    } finally {
      child.kill();
    }
  });
});

/** Allocates 64 MB, written so it is resident, when a line arrives on stdin, and says how much. */
const ALLOCATE_ON_INPUT = `
let held;
process.stdin.once('data', () => {
  held = Buffer.alloc(64 * 2 ** 20, 1);
  console.log(held.length);
});
console.log('ready');
`;
