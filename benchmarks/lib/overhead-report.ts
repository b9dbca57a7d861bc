// Renders an overhead run: the terminal table, the Markdown section of docs/benchmarks.md, and the
// SVG chart. Pure functions of the results JSON, so `--report FILE` can redraw an old run. The relay's
// columns appear only for a run that measured it; without it the output is as before the relay existed.

import { summarise, targetsRun, type OverheadResults, type WorkloadSummary } from './overhead-results.js';
import { median } from './stats.js';
import { panelGrid, type Panel } from './svg-chart.js';
import { formatTable, markdownTable } from './table.js';
import { TARGET_LABELS, TARGET_NAMES, type OverheadTargetName } from './target.js';

const COLORS: Record<OverheadTargetName, string> = { direct: '#8c8c8c', pgx: '#2f6fb3', pgbouncer: '#d08a2c', relay: '#5b9a5b', 'bun-relay': '#9a5b9a', 'pgx-bun': '#5b5b9a', 'pgx-node': '#2f9fd3', pooler: '#3a9a9a' };

/** What the relay is, wherever its numbers are shown. */
const RELAY_NOTE =
  'relay = a bare Node.js relay (benchmarks/lib/node-relay-main.ts: bytes copied both ways, no parsing, no pool), the floor of any ' +
  'Node.js proxy here; it opens a new PostgreSQL connection per client connection, so on -C it pays a backend fork the poolers do not.';

const SHORT_LABELS: Record<OverheadTargetName, string> = { direct: 'direct', pgx: 'PGX', pgbouncer: 'PgBouncer', relay: 'relay', 'bun-relay': 'Bun relay', 'pgx-bun': 'PGX on Bun', 'pgx-node': 'PGX own process', pooler: 'Node pooler' };

const ranRelay = (r: OverheadResults): boolean => r.samples.some((s) => s.target === 'relay');

function fmtValue(s: WorkloadSummary, v: number): string {
  if (!Number.isFinite(v)) return '-';
  return s.unit === 's' ? `${v.toFixed(2)} s` : Math.round(v).toLocaleString('en-US');
}

const fmtRatio = (r: number): string => (Number.isFinite(r) ? `${r.toFixed(2)}x` : '-');

function fmtCpu(s: WorkloadSummary, v: number): string {
  if (!Number.isFinite(v)) return '-';
  return s.unit === 's' ? `${Math.round(v)} ms` : `${v.toFixed(1)} us`;
}

function header(relay: boolean): string[] {
  if (!relay) return ['workload', 'direct', 'PGX', 'PgBouncer', 'PGX/direct', 'PGX/PgBouncer', 'PGX cpu', 'PgB cpu', 'bars'];
  return ['workload', 'direct', 'PGX', 'PgBouncer', 'relay', 'PGX/direct', 'PGX/PgBouncer', 'PGX/relay', 'PGX cpu', 'PgB cpu', 'relay cpu', 'bars'];
}

function row(s: WorkloadSummary, relay: boolean, pass: string, fail: string): string[] {
  const bars = s.bars.map((b) => `${b.pass ? pass : fail} ${b.text}`).join('; ');
  const vsBouncer = s.rounds > 0 ? `${fmtRatio(s.pgxVsPgbouncer)} (${s.pgxWinsVsPgbouncer}/${s.rounds})` : '-';
  return [
    s.workload.label,
    fmtValue(s, s.medians.direct),
    fmtValue(s, s.medians.pgx),
    fmtValue(s, s.medians.pgbouncer),
    ...(relay ? [fmtValue(s, s.medians.relay)] : []),
    fmtRatio(s.pgxVsDirect),
    vsBouncer,
    ...(relay ? [fmtRatio(s.pgxVsRelay)] : []),
    fmtCpu(s, s.proxyCpu.pgx),
    fmtCpu(s, s.proxyCpu.pgbouncer),
    ...(relay ? [fmtCpu(s, s.proxyCpu.relay)] : []),
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
  const all = ['no target', 'the one target run', 'both targets run', 'all three targets', 'all four targets'][targetsRun(r).length];
  const transport = r.options.transport === 'tcp' ? `TCP loopback for ${all}` : `Unix sockets for ${all}`;
  return (
    `${m.date.slice(0, 16).replace('T', ' ')} UTC, commit ${m.gitCommit.slice(0, 10)}${m.gitDirty ? ' (with uncommitted changes)' : ''}; ` +
    `${m.nproc} CPUs (${m.cpuModel}), Node ${m.node}, PostgreSQL ${r.versions.postgres}, ${r.versions.pgbouncer}, ${r.versions.pgbench}; ` +
    `${transport}; ${r.options.rounds} rounds; pgbench scale ${r.options.scale}; ${Math.round(r.durationSeconds / 60)} minutes in all${loadNote(r)}.`
  );
}

export function terminalReport(r: OverheadResults): string {
  const summaries = summarise(r);
  const bars = summaries.flatMap((s) => s.bars);
  const relay = ranRelay(r);
  return [
    describeRun(r),
    'Medians over rounds; ratios are medians of per-round ratios (for the scan, of times: lower is better);',
    '(k/n) = rounds in which PGX did at least as well as PgBouncer; cpu = proxy CPU per transaction (per scan for the scan).',
    ...(relay ? [RELAY_NOTE] : []),
    '',
    formatTable(header(relay), summaries.map((s) => row(s, relay, 'PASS', 'FAIL'))),
    '',
    `bars: ${bars.filter((b) => b.pass).length} of ${bars.length} pass`,
  ].join('\n');
}

export function markdownSection(r: OverheadResults, rawPath: string, svgPath: string): string {
  const summaries = summarise(r);
  const bars = summaries.flatMap((s) => s.bars);
  const commands = r.workloads.map((w) => [w.label, `\`${w.command}\``]);
  const relay = ranRelay(r);
  const head = header(relay);
  return [
    `Latest run: ${describeRun(r)}`,
    '',
    markdownTable(head, summaries.map((s) => row(s, relay, 'pass', '**FAIL**')), head.map((_, i) => (i === 0 || i === head.length - 1 ? 'l' : 'r'))),
    '',
    `${relay ? 'direct, PGX, PgBouncer and relay' : 'direct, PGX and PgBouncer'} columns are medians (tps, or seconds for the scan); ratios are medians of the`,
    'per-round ratios; (k/n) counts the rounds in which PGX did at least as well as PgBouncer; cpu is the',
    "proxy's own CPU per transaction (per scan for the scan).",
    ...(relay ? ['', RELAY_NOTE] : []),
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
  const relay = ranRelay(r);
  const shown: OverheadTargetName[] = relay ? [...TARGET_NAMES, 'relay'] : [...TARGET_NAMES];
  // Four bars leave no room under each for the long labels.
  const label = (t: OverheadTargetName): string => (relay ? SHORT_LABELS[t] : TARGET_LABELS[t].replace('PostgreSQL ', ''));
  const panels: Panel[] = summarise(r).map((s) => ({
    title: s.workload.label,
    subtitle: s.unit === 's' ? 'seconds, lower is better' : 'tps, higher is better',
    bars: shown.map((t) => ({ label: label(t), value: s.medians[t], color: COLORS[t] })),
    format: (v: number) => fmtValue(s, v),
  }));
  return panelGrid(`PGX overhead: median of ${r.options.rounds} rounds, ${r.machine.date.slice(0, 10)}, ${r.machine.nproc} CPUs`, panels, 3);
}
