// pgbench's per-transaction log (-l --log-prefix P): one line per transaction,
//   client_id transaction_no time script_no time_epoch time_us [schedule_lag]
// where `time` is the latency in microseconds (with --rate, from the transaction's scheduled start, so
// schedule lag is included) and time_epoch.time_us is when it ended. Each pgbench thread writes its own
// file: P.<pid> and P.<pid>.<thread>.

import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';

export interface Transaction {
  /** Epoch milliseconds: when it ended, and when it started (end - latency). */
  endMs: number;
  startMs: number;
  latencyMs: number;
  /** --rate only: how late it started against its schedule. */
  lagMs: number | null;
}

/** Every transaction in the log files whose name starts with `prefix`'s base name in its directory. */
export function readPgbenchLogs(prefix: string): Transaction[] {
  const dir = path.dirname(prefix);
  const base = path.basename(prefix);
  const out: Transaction[] = [];
  for (const f of readdirSync(dir)) {
    if (!f.startsWith(`${base}.`)) continue;
    for (const line of readFileSync(path.join(dir, f), 'utf8').split('\n')) {
      const p = line.trim().split(/\s+/);
      if (p.length < 6 || p[2] === 'skipped') continue;
      const latencyMs = Number(p[2]) / 1000;
      const endMs = Number(p[4]) * 1000 + Number(p[5]) / 1000;
      if (!Number.isFinite(latencyMs) || !Number.isFinite(endMs)) continue;
      out.push({ endMs, startMs: endMs - latencyMs, latencyMs, lagMs: p[6] !== undefined ? Number(p[6]) / 1000 : null });
    }
  }
  return out.sort((a, b) => a.endMs - b.endMs);
}
