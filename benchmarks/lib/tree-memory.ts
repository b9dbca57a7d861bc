// PSS of a process tree, split by what each process is (node, the postmaster, client backends,
// autovacuum, checkpointer, ...), so a memory figure comes with where it goes. The total is the same
// sum as src/runtime/memory.ts's measureTree (which the status document reports); the split reads
// each process's title from /proc/PID/cmdline, which PostgreSQL sets to "postgres: <what>".

import { readFile, readdir, readlink } from 'node:fs/promises';
import { processTree } from '../../src/runtime/postgres/memory.js';

export interface KindMemory {
  count: number;
  pss_mb: number;
  /** The file-backed part of pss_mb (program text, libraries): shared with every other process mapping the same files. */
  file_mb: number;
}

export interface TreeBreakdown {
  pss_mb: number;
  /** The file-backed part of pss_mb (Pss_File): it moves when other processes mapping the same binaries start or exit. */
  file_mb: number;
  rss_mb: number;
  processes: number;
  byKind: Record<string, KindMemory>;
  /** Each process, so two readings of one tree show which process grew. */
  perProcess: ProcessMemory[];
  /**
   * Processes outside the tree running one of the tree's programs, by program (node, postgres): each
   * takes its share of the pages of the program it maps, so file_mb falls as they rise. A runtime alone
   * on a machine pays its node binary's touched pages (about 40 MB) in full. Absent before 2026-12-03.
   */
  neighbours?: Record<string, number>;
}

export interface ProcessMemory {
  pid: number;
  kind: string;
  /** The process title without its activity ("postgres: pgx_control postgres [local]"), to tell backends apart. */
  title?: string;
  /** PSS without the file-backed part, MB. */
  owned_mb: number;
  /**
   * Of owned_mb, shared memory (Pss_Shmem: PostgreSQL's shared buffers and other shared segments,
   * split among the processes that touched each page), so a backend that merely touched more shared
   * buffers is told apart from one whose own heap grew. Absent in raw results before 2026-12-02 15:17.
   */
  shmem_mb?: number;
}

/** kB as MB with two decimals. */
function mb2(kbs: number): number {
  return Math.round((kbs / 1024) * 100) / 100;
}

function kb(text: string, field: string): number {
  const m = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(text);
  return m ? Number(m[1]) : 0;
}

/** What a process is, from its title: "postgres: checkpointer", "postgres: postgres db [local] idle". */
export function processKind(cmdline: string, isRoot: boolean): string {
  const argv0 = cmdline.split('\0', 1)[0]!;
  const title = cmdline.replace(/\0/g, ' ').trim();
  if (title.startsWith('postgres:')) {
    const what = title.slice('postgres:'.length).trim();
    const known = ['checkpointer', 'background writer', 'walwriter', 'autovacuum launcher', 'autovacuum worker', 'logical replication launcher', 'io worker', 'walsummarizer'];
    return known.find((k) => what.startsWith(k)) ?? 'backend';
  }
  // The postmaster keeps its command line: the path of the postgres binary.
  if (argv0.endsWith('/postgres') || argv0 === 'postgres') return 'postmaster';
  return isRoot ? 'node' : 'other';
}

/** The title a process shows in ps, a backend's last word (idle, active, ...) left off as it changes. */
function processTitle(cmdline: string): string {
  return cmdline.replace(/\0/g, ' ').trim().replace(/ (idle|active|idle in transaction.*)$/, '');
}

export async function treeBreakdown(root: number): Promise<TreeBreakdown> {
  const byKind: Record<string, KindMemory> = {};
  let pss = 0;
  let file = 0;
  let rss = 0;
  let processes = 0;
  const perProcess: ProcessMemory[] = [];
  for (const pid of await processTree(root)) {
    try {
      const [rollup, cmdline] = await Promise.all([readFile(`/proc/${pid}/smaps_rollup`, 'utf8'), readFile(`/proc/${pid}/cmdline`, 'utf8')]);
      const kind = processKind(cmdline, pid === root);
      const p = kb(rollup, 'Pss');
      const f = kb(rollup, 'Pss_File');
      pss += p;
      file += f;
      rss += kb(rollup, 'Rss');
      processes++;
      const k = (byKind[kind] ??= { count: 0, pss_mb: 0, file_mb: 0 });
      k.count++;
      k.pss_mb += p / 1024;
      k.file_mb += f / 1024;
      perProcess.push({ pid, kind, title: processTitle(cmdline), owned_mb: mb2(p - f), shmem_mb: mb2(kb(rollup, 'Pss_Shmem')) });
    } catch {
      // Ended while we looked.
    }
  }
  for (const k of Object.values(byKind)) (k.pss_mb = Math.round(k.pss_mb * 10) / 10), (k.file_mb = Math.round(k.file_mb * 10) / 10);
  const neighbours = await programNeighbours(perProcess.map((p) => p.pid));
  return { pss_mb: Math.round((pss / 1024) * 10) / 10, file_mb: Math.round((file / 1024) * 10) / 10, rss_mb: Math.round((rss / 1024) * 10) / 10, processes, byKind, perProcess, neighbours };
}

/** How many processes outside `tree` run each program (by its file name) that a process of `tree` runs. */
async function programNeighbours(tree: number[]): Promise<Record<string, number>> {
  const exe = (pid: number | string): Promise<string | null> => readlink(`/proc/${pid}/exe`).catch(() => null);
  const programs = new Set((await Promise.all(tree.map(exe))).filter((e): e is string => e !== null));
  const inTree = new Set(tree.map(String));
  const counts: Record<string, number> = Object.fromEntries([...programs].map((p) => [p.split('/').pop()!, 0]));
  const others = (await readdir('/proc')).filter((d) => /^\d+$/.test(d) && !inTree.has(d));
  for (const e of await Promise.all(others.map(exe))) if (e !== null && programs.has(e)) counts[e.split('/').pop()!]!++;
  return counts;
}
