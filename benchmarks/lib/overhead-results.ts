// The overhead benchmark's raw results (the JSON kept under benchmarks/results/) and the summary
// derived from them: median per target, ratios paired by round, and each bar from DESIGN.md checked.
// Results from before --targets have the three targets; a run with the opt-in relay has four.

import type { MachineInfo } from './machine.js';
import { median, pairedRatios } from './stats.js';
import { OVERHEAD_TARGET_NAMES, type OverheadTargetName } from './target.js';

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
  /** Where in the round's order this target ran: 0 first. */
  position: number;
  workload: string;
  target: OverheadTargetName;
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
  options: {
    rounds: number;
    quick: boolean;
    transport: 'tcp' | 'unix';
    runSeconds: number;
    quietWaitSeconds: number;
    scale: number;
    /** The targets run (--targets); absent in results from before the option: direct, pgx, pgbouncer. */
    targets?: OverheadTargetName[];
  };
  machine: MachineInfo;
  versions: { postgres: string; pgbench: string; psql: string; pgbouncer: string };
  setup: { pgSettings: Record<string, string>; pgxMaxBackends: number; pgbouncerPoolMode: 'session'; pgbouncerPoolSize: number };
  workloads: Workload[];
  warmup: { workload: string; target: OverheadTargetName; value: number }[];
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
  /** NaN for a target that did not run. */
  medians: Record<OverheadTargetName, number>;
  /** Median over rounds of pgx / direct in the same round (time ratio for the scan); NaN if either did not run. */
  pgxVsDirect: number;
  pgxVsPgbouncer: number;
  pgxVsRelay: number;
  /** Rounds in which pgx did at least as well as PgBouncer, out of `rounds`. */
  pgxWinsVsPgbouncer: number;
  rounds: number;
  /** Median proxy CPU per transaction (microseconds) or per scan (ms). */
  proxyCpu: { pgx: number; pgbouncer: number; relay: number };
  bars: BarCheck[];
}

/** The targets a run measured, in their canonical order. */
export function targetsRun(results: OverheadResults): OverheadTargetName[] {
  return OVERHEAD_TARGET_NAMES.filter((t) => results.samples.some((s) => s.target === t));
}

function valuesOf(results: OverheadResults, workload: string, target: OverheadTargetName): number[] {
  return results.samples
    .filter((s) => s.workload === workload && s.target === target)
    .sort((a, b) => a.round - b.round)
    .map((s) => s.value);
}

function cpuPerUnit(results: OverheadResults, w: Workload, target: OverheadTargetName): number {
  const per = results.samples
    .filter((s) => s.workload === w.id && s.target === target && s.proxyCpuMs !== null)
    .map((s) => (w.kind === 'scan' ? s.proxyCpuMs! / w.transactionsPerClient : (s.proxyCpuMs! * 1000) / (w.transactionsPerClient * w.clients)));
  return median(per);
}

export function summarise(results: OverheadResults): WorkloadSummary[] {
  return results.workloads.map((w) => {
    const v = Object.fromEntries(OVERHEAD_TARGET_NAMES.map((t) => [t, valuesOf(results, w.id, t)])) as Record<OverheadTargetName, number[]>;
    const medians = Object.fromEntries(OVERHEAD_TARGET_NAMES.map((t) => [t, median(v[t])])) as Record<OverheadTargetName, number>;
    const vsDirect = pairedRatios(v.pgx, v.direct);
    const pgxVsDirect = median(vsDirect);
    const pgxVsRelay = median(pairedRatios(v.pgx, v.relay));
    const vsBouncer = pairedRatios(v.pgx, v.pgbouncer);
    const pgxVsPgbouncer = median(vsBouncer);
    const higherIsBetter = w.kind !== 'scan';
    const wins = vsBouncer.filter((r) => (higherIsBetter ? r >= 1 : r <= 1)).length;
    // A bar is checked only when both of its targets ran (--targets can leave one out).
    const bars: BarCheck[] = [];
    if ((w.kind === 'select' || w.kind === 'connect') && vsBouncer.length > 0) bars.push({ text: 'PGX >= PgBouncer', pass: pgxVsPgbouncer >= 1 });
    if (w.kind === 'select' && w.clients === 16 && vsDirect.length > 0) bars.push({ text: 'PGX >= 0.8x direct', pass: pgxVsDirect >= 0.8 });
    if (w.kind === 'scan' && vsDirect.length > 0) bars.push({ text: 'PGX time <= 1.15x direct', pass: pgxVsDirect <= 1.15 });
    return {
      workload: w,
      unit: higherIsBetter ? 'tps' : 's',
      medians,
      pgxVsDirect,
      pgxVsPgbouncer,
      pgxVsRelay,
      pgxWinsVsPgbouncer: wins,
      rounds: vsBouncer.length,
      proxyCpu: { pgx: cpuPerUnit(results, w, 'pgx'), pgbouncer: cpuPerUnit(results, w, 'pgbouncer'), relay: cpuPerUnit(results, w, 'relay') },
      bars,
    };
  });
}
