// Counters of one block device (/sys/block/<dev>/stat) and of the XFS filesystem on it
// (/sys/fs/xfs/<dev>/stats/stats), read before and after a stretch of work: how much it wrote, how
// long the device was busy, how many XFS transactions it took.

import { readFileSync } from 'node:fs';

export interface IoCounters {
  /** Bytes written to the device. */
  writtenBytes: number;
  /** Milliseconds the device had I/O in flight (io_ticks). */
  busyMs: number;
  /** XFS transactions committed (sync + async + empty). */
  xfsTransactions: number;
  /** XFS log writes. */
  xfsLogWrites: number;
}

export function ioCounters(device: string): IoCounters {
  const dev = device.replace(/^\/dev\//, '');
  const b = readFileSync(`/sys/block/${dev}/stat`, 'utf8').trim().split(/\s+/).map(Number);
  const xfs = new Map<string, number[]>();
  for (const line of readFileSync(`/sys/fs/xfs/${dev}/stats/stats`, 'utf8').trim().split('\n')) {
    const [name, ...values] = line.trim().split(/\s+/);
    xfs.set(name!, values.map(Number));
  }
  const trans = xfs.get('trans') ?? [];
  return {
    writtenBytes: (b[6] ?? 0) * 512,
    busyMs: b[9] ?? 0,
    xfsTransactions: trans.reduce((s, v) => s + v, 0),
    xfsLogWrites: xfs.get('log')?.[0] ?? 0,
  };
}

export function ioDelta(a: IoCounters, b: IoCounters): IoCounters {
  return {
    writtenBytes: b.writtenBytes - a.writtenBytes,
    busyMs: b.busyMs - a.busyMs,
    xfsTransactions: b.xfsTransactions - a.xfsTransactions,
    xfsLogWrites: b.xfsLogWrites - a.xfsLogWrites,
  };
}
