// The churn benchmark's memory reading (benchmarks/lib/tree-memory.ts): PSS of a process tree with
// its file-backed part, which churn leaves out of its retained figure. Read from this very process.

import { expect } from 'chai';
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

  it('counts memory this process allocates outside the file-backed part', async function () {
    const before = await treeBreakdown(process.pid);
    const held = Buffer.alloc(64 * 2 ** 20, 1); // 64 MB, written, so resident
    const after = await treeBreakdown(process.pid);
    expect(held.length).to.equal(64 * 2 ** 20);
    expect(after.pss_mb - after.file_mb - (before.pss_mb - before.file_mb)).to.be.greaterThan(60);
    expect(Math.abs(after.file_mb - before.file_mb)).to.be.lessThan(8);
  });
});
