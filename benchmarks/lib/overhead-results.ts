// The overhead benchmark's raw results (the JSON kept under benchmarks/results/) and the summary
// derived from them: median per target, ratios paired by round, and each bar from DESIGN.md checked.

import type { MachineInfo } from './machine.js';
import { median, pairedRatios } from './stats.js';
import { TARGET_NAMES, type TargetName } from './target.js';

export type WorkloadKind = 'select' | 'connect' | 'scan';

export interface Workload {
  id: string;
  kind: WorkloadKind;
  label: string;
  clients: number;
  threads: number;
  protocol: 'simple' | 'prepared';
  /** Fixed work: transactions per client (pgbench -t); for the scan, scans in a row per sample. */
  transactionsPerClient: number;
  /** The client command as run, for reproducing by hand. */
  command: string;
}

export interface Sample {
  round: number;
  /** 0, 1 or 2: where in the round's order this target ran. */
  position: number;
  workload: string;
  target: TargetName;
  /** tps for pgbench workloads, seconds for the scan. */
  value: number;
  wallMs: number;
  latencyMs: number | null;
  /** CPU the proxy itself used during the run (null for direct). */
  proxyCpuMs: number | null;
  /** The machine's 1-minute load average as the run started: other work on a shared machine shows here. */
  load1: number;
  /** Idle share of the CPUs in the second before this workload's runs began (null: not checked). */
  idleBefore: number | null;
}

export interface OverheadResults {
  benchmark: 'overhead';
  format: 1;
  options: { rounds: number; quick: boolean; transport: 'tcp' | 'unix'; runSeconds: number; quietWaitSeconds: number; scale: number };
  machine: MachineInfo;
  versions: { postgres: string; pgbench: string; psql: string; pgbouncer: string };
  setup: { pgSettings: Record<string, string>; pgxMaxBackends: number; pgbouncerPoolMode: 'session'; pgbouncerPoolSize: number };
  workloads: Workload[];
  warmup: { workload: string; target: TargetName; value: number }[];
  samples: Sample[];
  durationSeconds: number;
}

export interface BarCheck {
  text: string;
  pass: boolean;
}

export interface WorkloadSummary {
  workload: Workload;
  unit: 'tps' | 's';
  medians: Record<TargetName, number>;
  /** Median over rounds of pgx / direct in the same round (time ratio for the scan). */
  pgxVsDirect: number;
  pgxVsPgbouncer: number;
  /** Rounds in which pgx did at least as well as PgBouncer, out of `rounds`. */
  pgxWinsVsPgbouncer: number;
  rounds: number;
  /** Median proxy CPU per transaction (microseconds) or per scan (ms). */
  proxyCpu: { pgx: number; pgbouncer: number };
  bars: BarCheck[];
}

function valuesOf(results: OverheadResults, workload: string, target: TargetName): number[] {
  return results.samples
    .filter((s) => s.workload === workload && s.target === target)
    .sort((a, b) => a.round - b.round)
    .map((s) => s.value);
}

function cpuPerUnit(results: OverheadResults, w: Workload, target: TargetName): number {
  const per = results.samples
    .filter((s) => s.workload === w.id && s.target === target && s.proxyCpuMs !== null)
    .map((s) => (w.kind === 'scan' ? s.proxyCpuMs! / w.transactionsPerClient : (s.proxyCpuMs! * 1000) / (w.transactionsPerClient * w.clients)));
  return median(per);
}

export function summarise(results: OverheadResults): WorkloadSummary[] {
  return results.workloads.map((w) => {
    const v = Object.fromEntries(TARGET_NAMES.map((t) => [t, valuesOf(results, w.id, t)])) as Record<TargetName, number[]>;
    const medians = Object.fromEntries(TARGET_NAMES.map((t) => [t, median(v[t])])) as Record<TargetName, number>;
    const pgxVsDirect = median(pairedRatios(v.pgx, v.direct));
    const vsBouncer = pairedRatios(v.pgx, v.pgbouncer);
    const pgxVsPgbouncer = median(vsBouncer);
    const higherIsBetter = w.kind !== 'scan';
    const wins = vsBouncer.filter((r) => (higherIsBetter ? r >= 1 : r <= 1)).length;
    const bars: BarCheck[] = [];
    if (w.kind === 'select' || w.kind === 'connect') bars.push({ text: 'PGX >= PgBouncer', pass: pgxVsPgbouncer >= 1 });
    if (w.kind === 'select' && w.clients === 16) bars.push({ text: 'PGX >= 0.8x direct', pass: pgxVsDirect >= 0.8 });
    if (w.kind === 'scan') bars.push({ text: 'PGX time <= 1.15x direct', pass: pgxVsDirect <= 1.15 });
    return {
      workload: w,
      unit: higherIsBetter ? 'tps' : 's',
      medians,
      pgxVsDirect,
      pgxVsPgbouncer,
      pgxWinsVsPgbouncer: wins,
      rounds: vsBouncer.length,
      proxyCpu: { pgx: cpuPerUnit(results, w, 'pgx'), pgbouncer: cpuPerUnit(results, w, 'pgbouncer') },
      bars,
    };
  });
}
