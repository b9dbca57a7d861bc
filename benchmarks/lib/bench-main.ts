// What the mint, burst, density and churn benchmarks share around their measurement: options
// (--quick, --report, --help), a temporary work directory, cleanup on every exit path, and publishing
// (raw JSON under benchmarks/results/, a generated section of docs/benchmarks.md, an optional chart).
// Rendering is a pure function of the results JSON, so `--report FILE` redraws an old run.

import { chmodSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs, type ParseArgsConfig } from 'node:util';
import { systemClock } from '../../src/clock.js';
import { PgxError } from '../../src/errors.js';
import { Cleanup } from './cleanup.js';
import { machineInfo, type MachineInfo } from './machine.js';
import { replaceSection } from './markdown-section.js';
import { packageRoot } from './paths.js';

export interface Meta {
  /** The benchmark's name, with its variant if it has one (e.g. density-10000): names its results and docs section. */
  benchmark: string;
  format: 1;
  quick: boolean;
  /** A run of part of the benchmark (see BenchDefinition.partial); absent in older results. */
  partial?: boolean;
  machine: MachineInfo;
  durationSeconds: number;
}

export interface Bar {
  text: string;
  /** The measured value as shown, e.g. "4.1 ms = 1.31x". */
  measured: string;
  pass: boolean;
}

export interface Rendered {
  /** Table(s) for the terminal. */
  terminal: string;
  /** The generated docs section, given the raw JSON's path relative to the package root. */
  markdown(rawPath: string): string;
  bars: Bar[];
  /** A chart written to docs/img/<file>. */
  svg?: { file: string; text: string };
}

type OptionValues = Record<string, string | boolean | undefined>;

export interface BenchDefinition<O, B> {
  name: string;
  help: string;
  /** Options beyond --quick, --report and --help; all strings. */
  options: string[];
  parse(values: OptionValues, quick: boolean): O;
  /** A run of part of the benchmark: like --quick, it does not replace the published results. */
  partial?(opts: O): boolean;
  /** A published variant (e.g. another scale): its results and docs section are `<name>-<variant>`. */
  variant?(opts: O): string | null;
  measure(opts: O, ctx: { cleanup: Cleanup; workDir: string }): Promise<B>;
  render(results: Meta & B): Rendered;
}

export function progress(text: string): void {
  process.stderr.write(`${text}\n`);
}

/** A whole number option: the flag's value, else the default. */
export function intOption(values: OptionValues, name: string, fallback: number, min = 0): number {
  const raw = values[name];
  const n = typeof raw === 'string' ? Number(raw) : fallback;
  if (!Number.isInteger(n) || n < min) throw new PgxError('CONFIG_INVALID', `--${name} ${String(raw)}: expected a whole number >= ${min}`);
  return n;
}

export function describeMachine(m: MachineInfo, durationSeconds: number): string {
  return (
    `${m.date.slice(0, 16).replace('T', ' ')} UTC, commit ${m.gitCommit.slice(0, 10)}${m.gitDirty ? ' (with uncommitted changes)' : ''}; ` +
    `${m.nproc} CPUs (${m.cpuModel}), ${Math.round(m.memoryMB / 1024)} GB, Node ${m.node}; 1-min load average at the start ${m.loadAverage[0]}; ` +
    `${durationSeconds < 120 ? `${durationSeconds} s` : `${Math.round(durationSeconds / 60)} minutes`} in all`
  );
}

export function barLines(bars: Bar[], pass: string, fail: string): string[] {
  return bars.map((b) => `- ${b.pass ? pass : fail} ${b.text}: ${b.measured}`);
}

function terminal(r: Rendered): string {
  const failed = r.bars.filter((b) => !b.pass).length;
  return [r.terminal, '', 'bars:', ...barLines(r.bars, 'PASS', 'FAIL'), `${r.bars.length - failed} of ${r.bars.length} pass`].join('\n');
}

function writeDocs<O, B>(def: BenchDefinition<O, B>, results: Meta & B, rawPath: string): void {
  const name = results.benchmark;
  const root = packageRoot();
  const r = def.render(results);
  if (r.svg) {
    mkdirSync(path.join(root, 'docs', 'img'), { recursive: true });
    writeFileSync(path.join(root, 'docs', 'img', r.svg.file), r.svg.text);
  }
  replaceSection(path.join(root, 'docs', 'benchmarks.md'), name, r.markdown(rawPath));
}

/** Raw JSON (timestamped and -latest; a quick or partial run to a temp file) and, for a full run, the docs. */
function publish<O, B>(def: BenchDefinition<O, B>, results: Meta & B): string {
  const name = results.benchmark;
  const stamp = results.machine.date.replace(/[:.]/g, '-').replace(/-\d{3}Z$/, 'Z');
  const json = `${JSON.stringify(results, null, 1)}\n`;
  if (!published(results)) {
    const file = path.join(os.tmpdir(), `pgx-${name}-${results.quick ? 'quick' : 'partial'}-${stamp}.json`);
    writeFileSync(file, json);
    return file;
  }
  const root = packageRoot();
  mkdirSync(path.join(root, 'benchmarks', 'results'), { recursive: true });
  const rel = `benchmarks/results/${name}-${stamp}.json`;
  writeFileSync(path.join(root, rel), json);
  writeFileSync(path.join(root, 'benchmarks', 'results', `${name}-latest.json`), json);
  writeDocs(def, results, rel);
  return rel;
}

/** Whether results replace the published ones (docs/benchmarks.md, benchmarks/results/). */
function published(results: Meta): boolean {
  return !results.quick && results.partial !== true;
}

export function benchMain<O, B>(def: BenchDefinition<O, B>): (argv: string[]) => Promise<number> {
  return async (argv) => {
    const config: ParseArgsConfig['options'] = {
      quick: { type: 'boolean' },
      report: { type: 'string' },
      help: { type: 'boolean', short: 'h' },
    };
    for (const o of def.options) config[o] = { type: 'string' };
    const { values } = parseArgs({ args: argv, strict: true, options: config }) as { values: OptionValues };
    if (values.help) {
      process.stdout.write(def.help);
      return 0;
    }
    if (typeof values.report === 'string') {
      const results = JSON.parse(readFileSync(values.report, 'utf8')) as Meta & B;
      process.stdout.write(`${terminal(def.render(results))}\n`);
      const rel = path.relative(packageRoot(), path.resolve(values.report));
      if (published(results)) writeDocs(def, results, rel.startsWith('..') ? values.report : rel);
      return 0;
    }
    const quick = values.quick === true;
    const opts = def.parse(values, quick);
    const started = systemClock.monotonic();
    const machine = await machineInfo(new Date(systemClock.now()));
    const cleanup = new Cleanup();
    const offSignals = cleanup.onSignals();
    let saved: string;
    let results: Meta & B;
    try {
      const workDir = mkdtempSync(path.join(os.tmpdir(), `pgx-bench-${def.name}-`));
      cleanup.add('work directory', () => rmSync(workDir, { recursive: true, force: true }));
      // PostgreSQL runs as the unprivileged `pgx` user when we are root; it must reach its directory.
      chmodSync(workDir, 0o755);
      const body = await def.measure(opts, { cleanup, workDir });
      const partial = def.partial?.(opts) === true;
      const variant = def.variant?.(opts) ?? null;
      const durationSeconds = Math.round((systemClock.monotonic() - started) / 1000);
      results = { benchmark: variant === null ? def.name : `${def.name}-${variant}`, format: 1 as const, quick, ...(partial ? { partial } : {}), machine, durationSeconds, ...body };
      // Saved before cleanup: removing the data directories of a thousand databases takes minutes.
      saved = publish(def, results);
    } finally {
      await cleanup.run();
      offSignals();
    }
    const rendered = def.render(results);
    process.stdout.write(`\n${terminal(rendered)}\n\nraw results: ${saved}\n`);
    // A failed bar is a result, not a failed run (as in the overhead benchmark).
    return 0;
  };
}
