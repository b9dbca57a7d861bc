// A warm mint before and after a change, in one run: two runtimes side by side, one built from a
// checkout before it (--base DIR, as for login-check) and one from this tree, each with the default
// warm pool and the same template, and a plain connect to an existing database on the first one's
// PostgreSQL as the yardstick. Every round takes one sample of each (base warm, head warm, direct),
// the order rotating and reversing every other pass, after both pools have refilled; so load on a
// shared machine falls on the three alike, and only ratios within the run are read. Timer: as in
// the mint benchmark, node-postgres connect to the answer of the first SELECT 1, over TCP.
// Raw samples: benchmarks/results/mint-ab-<time>.json.

import { chmodSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { parseArgs } from 'node:util';
import { Cleanup } from './lib/cleanup.js';
import { machineInfo } from './lib/machine.js';
import { packageRoot } from './lib/paths.js';
import { quoteIdent, timeFirstQuery, withClient } from './lib/pg-connect.js';
import { startRuntimeProcess, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { median, percentile } from './lib/stats.js';
import { SMALL_TEMPLATE, buildTemplate } from './lib/templates.js';
import { roundOrder } from './lib/round-order.js';

const HELP = `Usage: npm run bench -- mint-ab --base DIR [options]

  --base DIR      a built checkout of the commit to compare with (bin/pgx.js, dist/)     [required]
  --rounds N      rounds, one sample of each target per round                           [60]
  -h, --help      this help
`;

const TARGETS = ['base', 'head', 'direct'] as const;
type Target = (typeof TARGETS)[number];
const EXISTING = 'bench_existing';

export async function main(argv: string[]): Promise<number> {
  const { values } = parseArgs({
    args: argv,
    options: { base: { type: 'string' }, rounds: { type: 'string', default: '60' }, help: { type: 'boolean', short: 'h', default: false } },
  });
  if (values.help || !values.base) {
    process.stdout.write(HELP);
    return values.help ? 0 : 2;
  }
  const base = path.resolve(values.base);
  const rounds = Number(values.rounds);
  const cleanup = new Cleanup();
  const offSignals = cleanup.onSignals();
  const started = new Date();
  try {
    const work = mkdtempSync(path.join(os.tmpdir(), 'pgx-bench-mint-ab-'));
    chmodSync(work, 0o755);
    cleanup.add('work dir', () => rmSync(work, { recursive: true, force: true }));
    const runtimes = {} as Record<'base' | 'head', RuntimeProcess>;
    for (const side of ['base', 'head'] as const) {
      const dir = path.join(work, side);
      mkdirSync(dir);
      chmodSync(dir, 0o755);
      // The base runtime's PostgreSQL also listens on TCP: the direct connects go there.
      runtimes[side] = await startRuntimeProcess({ workDir: dir, tcpPostgres: side === 'base', ...(side === 'base' ? { root: base } : {}) }, cleanup);
      await buildTemplate(runtimes[side], 'small');
    }
    await withClient(runtimes.base.postgres, 'postgres', (c) => c.query(`CREATE DATABASE ${quoteIdent(EXISTING)}`));
    const samples: Record<Target, number[]> = { base: [], head: [], direct: [] };
    for (let round = 0; round < rounds; round++) {
      await Promise.all([waitForPool(runtimes.base), waitForPool(runtimes.head)]);
      const took: string[] = [];
      for (const target of roundOrder(TARGETS, round)) {
        const ms =
          target === 'direct'
            ? await timeFirstQuery(runtimes.base.postgres, EXISTING)
            : await timeFirstQuery(runtimes[target].engine, `tdb_${SMALL_TEMPLATE}__ab${round}`);
        samples[target].push(ms);
        took.push(`${target} ${ms.toFixed(1)}`);
      }
      process.stdout.write(`round ${round + 1}/${rounds}: ${took.join(', ')} ms\n`);
    }
    const p = (t: Target, q: number): number => percentile(samples[t], q);
    const summary = Object.fromEntries(
      TARGETS.map((t) => [t, { p50: median(samples[t]), p99: p(t, 99), p50OverDirect: median(samples[t]) / median(samples.direct), p99OverDirect: p(t, 99) / p('direct', 99) }]),
    );
    for (const t of TARGETS) {
      const s = summary[t]!;
      process.stdout.write(`${t.padEnd(6)} p50 ${s.p50.toFixed(2)} ms (${s.p50OverDirect.toFixed(2)}x direct), p99 ${s.p99.toFixed(2)} ms (${s.p99OverDirect.toFixed(2)}x direct p99)\n`);
    }
    const results = { benchmark: 'mint-ab', format: 1, machine: await machineInfo(started), base, rounds, template: SMALL_TEMPLATE, summary, samples };
    const stamp = started.toISOString().replace(/[:]/g, '-').replace(/\.\d+Z$/, 'Z');
    writeFileSync(path.join(packageRoot(), 'benchmarks', 'results', `mint-ab-${stamp}.json`), `${JSON.stringify(results, null, 2)}\n`);
    return 0;
  } finally {
    offSignals();
    await cleanup.run();
  }
}
