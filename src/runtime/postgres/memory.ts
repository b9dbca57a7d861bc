// Memory of the runtime's whole process tree (node, the postmaster and every backend), as PSS and RSS
// from /proc/PID/smaps_rollup. PSS splits shared pages (PostgreSQL's shared buffers, the binary) among
// the processes that map them, so the sum is what the tree really costs; RSS counts shared pages once
// per process and overstates it.

import { readdir, readFile } from 'node:fs/promises';
import { allPids, procStat } from './proc.js';

export interface TreeMemory {
  pss_mb: number;
  rss_mb: number;
  /** Processes measured: node plus every descendant (the postmaster and its children). */
  processes: number;
}

/** Parent pid of each live process. */
async function parents(): Promise<Map<number, number>> {
  const out = new Map<number, number>();
  for (const pid of await allPids()) {
    // Undefined: the process ended while we looked.
    const st = await procStat(pid);
    if (st !== undefined) out.set(pid, st.ppid);
  }
  return out;
}

/**
 * root and every process below it. Read from /proc/PID/task/TID/children, which names a process's
 * children directly; only where the kernel lacks that file (CONFIG_PROC_CHILDREN) is every process on
 * the machine read for its parent, which costs tens of ms on a busy host.
 */
export async function processTree(root: number): Promise<number[]> {
  const direct = await treeFromChildrenFiles(root);
  if (direct) return direct;
  const ppid = await parents();
  const children = new Map<number, number[]>();
  for (const [pid, parent] of ppid) {
    const list = children.get(parent);
    if (list) list.push(pid);
    else children.set(parent, [pid]);
  }
  return walk(root, async (pid) => children.get(pid) ?? []);
}

async function treeFromChildrenFiles(root: number): Promise<number[] | null> {
  try {
    await readFile(`/proc/${root}/task/${root}/children`, 'utf8');
  } catch {
    return null;
  }
  return walk(root, async (pid) => {
    const found: number[] = [];
    try {
      // A child is listed under the thread that forked it, so every thread of the process is read.
      for (const tid of await readdir(`/proc/${pid}/task`)) {
        const text = await readFile(`/proc/${pid}/task/${tid}/children`, 'utf8');
        for (const child of text.split(' ')) if (child.trim() !== '') found.push(Number(child));
      }
    } catch {
      // The process (or a thread) ended while we looked.
    }
    return found;
  });
}

async function walk(root: number, childrenOf: (pid: number) => Promise<number[]>): Promise<number[]> {
  const tree: number[] = [];
  const stack = [root];
  while (stack.length > 0) {
    const pid = stack.pop()!;
    tree.push(pid);
    stack.push(...(await childrenOf(pid)));
  }
  return tree;
}

function kbField(text: string, name: string): number {
  const m = new RegExp(`^${name}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

export async function measureTree(root: number = process.pid): Promise<TreeMemory> {
  let pssKb = 0;
  let rssKb = 0;
  let processes = 0;
  for (const pid of await processTree(root)) {
    try {
      const rollup = await readFile(`/proc/${pid}/smaps_rollup`, 'utf8');
      pssKb += kbField(rollup, 'Pss');
      rssKb += kbField(rollup, 'Rss');
      processes++;
    } catch {
      // Ended meanwhile, or a kernel without smaps_rollup: it is left out of the sum.
    }
  }
  const mb = (kb: number): number => Math.round((kb / 1024) * 10) / 10;
  return { pss_mb: mb(pssKb), rss_mb: mb(rssKb), processes };
}
