// What the login check on a reused backend (src/engine/login-check.ts) costs a connect-per-transaction
// client: an A/B in one run of two runtimes, one built from a checkout before the change (--base DIR,
// e.g. `git worktree add /tmp/pgx-base d056884`, node_modules symlinked, `npx tsc`) and one from this
// tree, each in its own process with its own PostgreSQL. Rounds alternate the order (base, this; then
// this, base) so drift on a shared machine hits both alike. Workloads: `pgbench -n -S -C -c 4` on the
// runtime's defaults (every connect reuses a pooled backend: the check's fast path, since -S writes
// nothing), and with --fresh also under --max-idle-backends 0 (every connect a fresh login: the
// baseline query behind the startup packet).
// Reported: medians of connections per second and the median of ratios paired within a round; every
// run is kept in benchmarks/results/login-check-<time>.json.

import { mkdirSync, mkdtempSync, rmSync, writeFileSync, chmodSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { PgxError } from '../src/errors.js';
import { Cleanup } from './lib/cleanup.js';
import { runChecked, runCommand } from './lib/exec.js';
import { machineInfo } from './lib/machine.js';
import { packageRoot } from './lib/paths.js';
import { startRuntimeProcess, type RuntimeProcess } from './lib/runtime-process.js';
import { median, pairedRatios } from './lib/stats.js';
import { treeCpuMs } from './lib/cpu.js';

const HELP = `Usage: npm run bench -- login-check --base DIR [options]

  --base DIR      a built checkout of the commit to compare with (bin/pgx.js, dist/)     [required]
  --rounds N      rounds, order alternating                                              [6]
  --seconds S     each pgbench run's length (-T)                                         [10]
  --clients N     pgbench -c                                                             [4]
  --fresh         also run with --max-idle-backends 0 (every connect a fresh login)
  -h, --help      this help
`;

interface Run {
  round: number;
  side: 'base' | 'head';
  workload: string;
  tps: number;
  /** CPU of the runtime's whole process tree (node and every postgres process) per connection, ms. */
  cpuMsPerConnection: number;
}

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: {
      base: { type: 'string' },
      rounds: { type: 'string', default: '6' },
      seconds: { type: 'string', default: '10' },
      clients: { type: 'string', default: '4' },
      fresh: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
  });
  if (values.help || !values.base) {
    process.stdout.write(HELP);
    return values.help ? 0 : 2;
  }
  const base = path.resolve(values.base);
  const rounds = Number(values.rounds);
  const seconds = Number(values.seconds);
  const clients = Number(values.clients);
  const cleanup = new Cleanup();
  const offSignals = cleanup.onSignals();
  const started = new Date();
  try {
    const work = mkdtempSync(path.join(os.tmpdir(), 'pgx-bench-login-'));
    chmodSync(work, 0o755);
    cleanup.add('work dir', () => rmSync(work, { recursive: true, force: true }));
    const workloads: { name: string; flags: string[] }[] = [{ name: 'reuse', flags: [] }];
    if (values.fresh) workloads.push({ name: 'fresh', flags: ['--max-idle-backends', '0'] });
    const runtimes = new Map<string, RuntimeProcess>();
    for (const w of workloads) {
      for (const side of ['base', 'head'] as const) {
        const dir = path.join(work, `${side}-${w.name}`);
        mkdirSync(dir);
        chmodSync(dir, 0o755);
        const rt = await startRuntimeProcess({ workDir: dir, flags: ['--pool-size', '0', ...w.flags], ...(side === 'base' ? { root: base } : {}) }, cleanup);
        await runChecked('pgbench', ['-i', '-q', '-s', '1'], { env: env(rt) });
        runtimes.set(`${side}-${w.name}`, rt);
      }
    }
    const runs: Run[] = [];
    for (let round = 0; round < rounds; round++) {
      for (const w of workloads) {
        const order = round % 2 === 0 ? (['base', 'head'] as const) : (['head', 'base'] as const);
        for (const side of order) {
          const rt = runtimes.get(`${side}-${w.name}`)!;
          const args = ['-n', '-S', '-C', '-c', String(clients), '-j', String(clients), '-T', String(seconds)];
          const cpuBefore = await treeCpuMs(rt.pid);
          const r = await runCommand('pgbench', args, { env: env(rt) });
          const cpu = (await treeCpuMs(rt.pid)) - cpuBefore;
          const tps = /^tps = ([\d.]+)/m.exec(r.stdout);
          const processed = /^number of transactions actually processed: (\d+)/m.exec(r.stdout);
          if (r.code !== 0 || !tps || !processed) throw new PgxError('INTERNAL', `pgbench ${args.join(' ')} failed: ${(r.stderr + r.stdout).slice(-1000)}`);
          const cpuMsPerConnection = cpu / Number(processed[1]);
          runs.push({ round, side, workload: w.name, tps: Number(tps[1]), cpuMsPerConnection });
          process.stdout.write(`round ${round + 1} ${w.name} ${side}: ${tps[1]} connections/s, ${cpuMsPerConnection.toFixed(3)} ms CPU each\n`);
        }
      }
    }
    const summary: Record<string, { base: number; head: number; ratio: number; cpuBase: number; cpuHead: number; cpuRatio: number }> = {};
    for (const w of workloads) {
      const of = (side: string, f: (r: Run) => number) => runs.filter((r) => r.workload === w.name && r.side === side).map(f);
      const tps = (r: Run) => r.tps;
      const cpu = (r: Run) => r.cpuMsPerConnection;
      summary[w.name] = {
        base: median(of('base', tps)),
        head: median(of('head', tps)),
        ratio: median(pairedRatios(of('head', tps), of('base', tps))),
        cpuBase: median(of('base', cpu)),
        cpuHead: median(of('head', cpu)),
        cpuRatio: median(pairedRatios(of('head', cpu), of('base', cpu))),
      };
      const s = summary[w.name]!;
      process.stdout.write(
        `${w.name}: base ${s.base.toFixed(0)}/s, head ${s.head.toFixed(0)}/s, head/base ${s.ratio.toFixed(3)} (median of paired ratios); ` +
          `CPU per connection base ${s.cpuBase.toFixed(3)} ms, head ${s.cpuHead.toFixed(3)} ms, head/base ${s.cpuRatio.toFixed(3)}\n`,
      );
    }
    const results = {
      benchmark: 'login-check',
      format: 1,
      machine: await machineInfo(started),
      base,
      command: `pgbench -n -S -C -c ${clients} -j ${clients} -T ${seconds}`,
      rounds,
      summary,
      runs,
    };
    const dir = path.join(packageRoot(), 'benchmarks', 'results');
    const stamp = started.toISOString().replace(/[:]/g, '-').replace(/\.\d+Z$/, 'Z');
    writeFileSync(path.join(dir, `login-check-${stamp}.json`), `${JSON.stringify(results, null, 2)}\n`);
    writeFileSync(path.join(dir, 'login-check-latest.json'), `${JSON.stringify(results, null, 2)}\n`);
    return 0;
  } finally {
    offSignals();
    await cleanup.run();
  }
}

function env(rt: RuntimeProcess): NodeJS.ProcessEnv {
  return { ...process.env, PGHOST: rt.engine.host, PGPORT: String(rt.engine.port), PGUSER: 'postgres', PGDATABASE: 'postgres', PGAPPNAME: '' };
}
