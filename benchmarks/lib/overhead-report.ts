// Renders an overhead run: the terminal table, the Markdown section of docs/benchmarks.md, and the
// SVG chart. Pure functions of the results JSON, so `--report FILE` can redraw an old run.

import { summarise, type OverheadResults, type WorkloadSummary } from './overhead-results.js';
import { median } from './stats.js';
import { panelGrid, type Panel } from './svg-chart.js';
import { formatTable, markdownTable } from './table.js';
import { TARGET_LABELS, TARGET_NAMES } from './target.js';

const COLORS = { direct: '#8c8c8c', pgx: '#2f6fb3', pgbouncer: '#d08a2c' } as const;

function fmtValue(s: WorkloadSummary, v: number): string {
  if (!Number.isFinite(v)) return '-';
  return s.unit === 's' ? `${v.toFixed(2)} s` : Math.round(v).toLocaleString('en-US');
}

const fmtRatio = (r: number): string => (Number.isFinite(r) ? `${r.toFixed(2)}x` : '-');

function fmtCpu(s: WorkloadSummary, v: number): string {
  if (!Number.isFinite(v)) return '-';
  return s.unit === 's' ? `${Math.round(v)} ms` : `${v.toFixed(1)} us`;
}

function header(): string[] {
  return ['workload', 'direct', 'PGX', 'PgBouncer', 'PGX/direct', 'PGX/PgBouncer', 'PGX cpu', 'PgB cpu', 'bars'];
}

function row(s: WorkloadSummary, pass: string, fail: string): string[] {
  const bars = s.bars.map((b) => `${b.pass ? pass : fail} ${b.text}`).join('; ');
  return [
    s.workload.label,
    fmtValue(s, s.medians.direct),
    fmtValue(s, s.medians.pgx),
    fmtValue(s, s.medians.pgbouncer),
    fmtRatio(s.pgxVsDirect),
    `${fmtRatio(s.pgxVsPgbouncer)} (${s.pgxWinsVsPgbouncer}/${s.rounds})`,
    fmtCpu(s, s.proxyCpu.pgx),
    fmtCpu(s, s.proxyCpu.pgbouncer),
    bars || '-',
  ];
}

function loadNote(r: OverheadResults): string {
  const loads = r.samples.map((s) => s.load1).sort((a, b) => a - b);
  if (loads.length === 0) return '';
  const fmt = (x: number): string => x.toFixed(1);
  const idle = r.samples.flatMap((s) => (typeof s.idleBefore === 'number' ? [s.idleBefore] : []));
  const quiet = idle.length ? `, CPUs ${Math.round(100 * median(idle))}% idle (median) in the second before a workload's runs` : '';
  return `; 1-min load average at the samples' start ${fmt(loads[0]!)}-${fmt(loads[loads.length - 1]!)}, median ${fmt(median(loads))} (the run itself keeps about 2 busy)${quiet}`;
}

function describeRun(r: OverheadResults): string {
  const m = r.machine;
  const transport = r.options.transport === 'tcp' ? 'TCP loopback for all three targets' : 'Unix sockets for all three targets';
  return (
    `${m.date.slice(0, 16).replace('T', ' ')} UTC, commit ${m.gitCommit.slice(0, 10)}${m.gitDirty ? ' (with uncommitted changes)' : ''}; ` +
    `${m.nproc} CPUs (${m.cpuModel}), Node ${m.node}, PostgreSQL ${r.versions.postgres}, ${r.versions.pgbouncer}, ${r.versions.pgbench}; ` +
    `${transport}; ${r.options.rounds} rounds; pgbench scale ${r.options.scale}; ${Math.round(r.durationSeconds / 60)} minutes in all${loadNote(r)}.`
  );
}

export function terminalReport(r: OverheadResults): string {
  const summaries = summarise(r);
  const bars = summaries.flatMap((s) => s.bars);
  return [
    describeRun(r),
    'Medians over rounds; ratios are medians of per-round ratios (for the scan, of times: lower is better);',
    '(k/n) = rounds in which PGX did at least as well as PgBouncer; cpu = proxy CPU per transaction (per scan for the scan).',
    '',
    formatTable(header(), summaries.map((s) => row(s, 'PASS', 'FAIL'))),
    '',
    `bars: ${bars.filter((b) => b.pass).length} of ${bars.length} pass`,
  ].join('\n');
}

export function markdownSection(r: OverheadResults, rawPath: string, svgPath: string): string {
  const summaries = summarise(r);
  const bars = summaries.flatMap((s) => s.bars);
  const commands = r.workloads.map((w) => [w.label, `\`${w.command}\``]);
  return [
    `Latest run: ${describeRun(r)}`,
    '',
    markdownTable(header(), summaries.map((s) => row(s, 'pass', '**FAIL**')), ['l', 'r', 'r', 'r', 'r', 'r', 'r', 'r', 'l']),
    '',
    'direct, PGX and PgBouncer columns are medians (tps, or seconds for the scan); ratios are medians of the',
    'per-round ratios; (k/n) counts the rounds in which PGX did at least as well as PgBouncer; cpu is the',
    "proxy's own CPU per transaction (per scan for the scan).",
    '',
    `**Bars: ${bars.filter((b) => b.pass).length} of ${bars.length} pass.**`,
    '',
    `![Throughput by target and workload](${svgPath})`,
    '',
    `Raw samples, machine and versions: [${rawPath}](../${rawPath}). Fixed work per run:`,
    '',
    markdownTable(['workload', 'command (per target: PGHOST/PGPORT differ)'], commands, ['l', 'l']),
  ].join('\n');
}

export function svgChart(r: OverheadResults): string {
  const panels: Panel[] = summarise(r).map((s) => ({
    title: s.workload.label,
    subtitle: s.unit === 's' ? 'seconds, lower is better' : 'tps, higher is better',
    bars: TARGET_NAMES.map((t) => ({ label: TARGET_LABELS[t].replace('PostgreSQL ', ''), value: s.medians[t], color: COLORS[t] })),
    format: (v: number) => fmtValue(s, v),
  }));
  return panelGrid(`PGX overhead: median of ${r.options.rounds} rounds, ${r.machine.date.slice(0, 10)}, ${r.machine.nproc} CPUs`, panels, 3);
}
