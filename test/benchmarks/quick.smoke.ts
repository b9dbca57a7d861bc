// Smoke runs of the scale benchmarks, as CI runs them (`npm run test:bench`, after `npm test`, whose
// 12 minutes they would not fit): each that issue 23's bars are measured with is started as its own process, as
// `npm run bench -- NAME` starts it, and must end with exit code 0 and write its raw JSON (a quick run
// writes to a temp file, never to benchmarks/results/ or the docs); so is first-session, a new
// database's first client on XFS. Nothing here judges a figure: the machine is shared and a smoke run
// is too short to mean anything; the bars are the full runs' business.
// benchmarks/profile-engine.sh (issue 24's profiles of a connection and a query) is run the same way.

import { expect } from 'chai';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** dist/benchmarks/run.js, beside this file's dist/test/benchmarks/. */
const RUN = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', 'benchmarks', 'run.js');
/** The checkout (dist/test/benchmarks/ is three levels down). */
const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..');

interface Finished {
  code: number | null;
  stdout: string;
  stderr: string;
}

function bench(args: string[], command = process.execPath, commandArgs = [RUN]): Promise<Finished> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, [...commandArgs, ...args], { stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.setEncoding('utf8').on('data', (s: string) => (stdout += s));
    child.stderr.setEncoding('utf8').on('data', (s: string) => (stderr = (stderr + s).slice(-8000)));
    child.once('error', reject);
    child.once('exit', (code) => resolve({ code, stdout, stderr }));
  });
}

/** The raw results file the run names on its last line, read and then removed. */
function takeResults(run: Finished): Record<string, unknown> {
  expect(run.code, `exit code; stderr:\n${run.stderr}`).to.equal(0);
  const file = /^raw results: (.+)$/m.exec(run.stdout)?.[1]?.trim();
  expect(file, `no "raw results:" line in:\n${run.stdout}`).to.be.a('string');
  expect(path.isAbsolute(file!), 'a smoke run writes to a temp file, not to benchmarks/results/').to.equal(true);
  expect(existsSync(file!)).to.equal(true);
  try {
    return JSON.parse(readFileSync(file!, 'utf8')) as Record<string, unknown>;
  } finally {
    rmSync(file!, { force: true });
  }
}

describe('benchmarks: smoke runs of the scale benchmarks', function () {
  it('lifecycles --quick completes and writes its results', async function () {
    this.timeout(240_000);
    const results = takeResults(await bench(['lifecycles', '--quick']));
    expect(results.benchmark).to.equal('lifecycles');
    expect(results.quick).to.equal(true);
    const runs = results.runs as { target: string; workers: number }[];
    // Four targets at each of the quick run's worker counts (1 and 4).
    const targets = ['pgx-drop', 'pgx-grace', 'postgres', 'work'];
    expect(runs.map((r) => `${r.target}@${r.workers}`).sort()).to.deep.equal(targets.flatMap((t) => [`${t}@1`, `${t}@4`]).sort());
  });

  it('first-session --quick completes and writes its results', async function () {
    this.timeout(180_000);
    // It loop-mounts an XFS image: root only, as CI runs it.
    if (process.getuid?.() !== 0) this.skip();
    const results = takeResults(await bench(['first-session', '--quick']));
    expect(results.benchmark).to.equal('first-session');
    const samples = results.samples as Record<string, { migrate: number[] }>;
    expect(Object.keys(samples).sort()).to.deep.equal(['clone', 'pgx', 'pgx-direct', 'postgres']);
    for (const s of Object.values(samples)) expect(s.migrate).to.have.length(2);
  });

  it('density with one database completes and writes its results', async function () {
    this.timeout(180_000);
    const args = ['density', '--quick', '--count', '1', '--idle-seconds', '1', '--vacuum-wait', '0', '--baseline', 'no', '--mint-samples', '1', '--disk-sample', '1'];
    const results = takeResults(await bench(args));
    expect(results.benchmark).to.equal('density-1');
    const pgx = results.pgx as { restart?: { databases: number }; disk?: unknown; api?: unknown };
    expect(pgx.restart?.databases).to.equal(1);
    expect(pgx.disk).to.be.an('object');
    expect(pgx.api).to.be.an('object');
  });

  it('burst --quick completes and writes its results', async function () {
    this.timeout(300_000);
    const results = takeResults(await bench(['burst', '--quick']));
    expect(results.benchmark).to.equal('burst-100');
    // As root (CI) on a loop-mounted ext4 image, the filesystem a volume usually has.
    expect((results.options as { fs: string }).fs).to.equal(process.getuid?.() === 0 ? 'ext4' : 'host');
    const bursts = results.bursts as { target: string; ok: number; mints?: { warm: number; cold: number } }[];
    const pgx = bursts.find((b) => b.target === 'pgx');
    expect(pgx?.ok).to.equal(100);
    expect(pgx!.mints!.warm + pgx!.mints!.cold).to.equal(100);
    expect(bursts.length).to.be.greaterThan(1);
  });

  it('mint --quick completes and writes its results', async function () {
    this.timeout(180_000);
    const results = takeResults(await bench(['mint', '--quick']));
    expect(results.benchmark).to.equal('mint');
    const samples = results.samples as { target: string; freshBackend?: boolean }[];
    // Issue 23's bars compare a warm mint with a plain connect over TCP and over the Unix socket; the
    // relay and PgBouncer are the yardsticks, each sample a fresh backend.
    expect([...new Set(samples.map((s) => s.target))].sort()).to.deep.equal(['cold', 'create', 'direct', 'direct-unix', 'pgbouncer', 'relay', 'warm', 'warm-unix']);
    expect(samples.filter((s) => s.target === 'pgbouncer').every((s) => s.freshBackend)).to.equal(true);
  });

  it('cow --quick completes and writes its results', async function () {
    this.timeout(420_000);
    const results = takeResults(await bench(['cow', '--quick']));
    expect(results.benchmark).to.equal('cow');
    const sizes = results.sizes as { cold: unknown[]; warm: unknown[] }[];
    expect(sizes.length).to.equal(1);
    expect(sizes[0]!.cold.length).to.be.greaterThan(0);
  });

  it('profile-engine.sh profiles a runtime under pgbench and splits its busy time by stage and layer', async function () {
    this.timeout(300_000);
    const out = mkdtempSync(path.join(os.tmpdir(), 'pgx-profile-smoke-'));
    try {
      const run = await bench([ROOT, out], 'bash', [path.join(ROOT, 'benchmarks', 'profile-engine.sh')]);
      expect(run.code, `exit code; stderr:\n${run.stderr}`).to.equal(0);
      for (const workload of ['prepared-16', 'simple-4', 'connect-4']) expect(run.stdout).to.contain(`== ${workload}: tps = `);
      // Each window held the engine's work: a stage and a layer with time in them.
      expect(run.stdout.match(/us per transaction \([1-9]\d* in the window\)/g)).to.have.length(3);
      expect(run.stdout.match(/^by the layer of the leaf frame:$/gm)).to.have.length(3);
      expect(run.stdout).to.match(/[1-9][\d.]*%\s+[\d.]+ us\s+query forwarding \(pump\)/);
      expect(run.stdout).to.match(/[\d.]+ us\s+PGX code/);
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  });
});
