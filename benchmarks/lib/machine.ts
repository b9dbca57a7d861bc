// Where and with what a result was measured, kept beside every raw sample.

import os from 'node:os';
import { runCommand } from './exec.js';

export interface MachineInfo {
  date: string;
  nproc: number;
  cpuModel: string;
  memoryMB: number;
  loadAverage: number[];
  kernel: string;
  node: string;
  gitCommit: string;
  /** Uncommitted changes in the checkout at the time of the run. */
  gitDirty: boolean;
}

async function git(args: string[]): Promise<string | undefined> {
  const result = await runCommand('git', args, { env: process.env }).catch(() => undefined);
  return result && result.code === 0 ? result.stdout.trim() : undefined;
}

export async function machineInfo(date: Date): Promise<MachineInfo> {
  const status = await git(['status', '--porcelain']);
  return {
    date: date.toISOString(),
    nproc: os.availableParallelism(),
    cpuModel: os.cpus()[0]?.model ?? 'unknown',
    memoryMB: Math.round(os.totalmem() / 2 ** 20),
    loadAverage: os.loadavg().map((x) => Math.round(x * 100) / 100),
    kernel: `${os.type()} ${os.release()}`,
    node: process.version,
    gitCommit: (await git(['rev-parse', 'HEAD'])) ?? 'unknown',
    gitDirty: status === undefined ? false : status.length > 0,
  };
}
