// What a Branch costs the runtime, one step at a time: the CPU of the runtime's whole process tree
// (node and every postgres process, from /proc) per operation, for
//
//   credential        POST /v1/databases/{name}/credentials on a database minted earlier, with the warm
//                     pool full and idle (nothing else runs: the cleanest figure)
//   create            POST /v1/databases alone (a warm claim)
//   create, get, credential   what the operator did per Branch before the one-call create: three calls
//   create+credential         POST /v1/databases with `credential` (one call), when the runtime has it
//
// Each step runs `--databases` operations `--concurrency` at a time, after the pool has refilled from
// the step before. The create steps claim spares, and the pool starts refilling them (a template copy,
// about 200 ms of CPU each) 100 ms after a handout: the refills that start before the step's last answer
// are counted in its CPU, so those figures are an upper bound; the credential step has none.

import { setTimeout as sleep } from 'node:timers/promises';
import { ApiClientError, type ApiClient } from '../src/api/client.js';
import type { CreatedDatabaseBody } from '../src/api/contract.js';
import { systemClock } from '../src/clock.js';
import { benchMain, describeMachine, intOption, progress, type Meta, type Rendered } from './lib/bench-main.js';
import type { Cleanup } from './lib/cleanup.js';
import { treeCpuMs } from './lib/cpu.js';
import { startRuntimeProcess, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { median, percentile } from './lib/stats.js';
import { formatTable, markdownTable } from './lib/table.js';
import { buildTemplate } from './lib/templates.js';

const HELP = `Usage: npm run bench -- credentials [options]

CPU of the runtime's process tree per credential and per create, through the HTTP API.

Options:
  --databases N    operations per step and round          [40]
  --concurrency N  operations at once                      [8]
  --rounds N       rounds (a median is reported)           [3]
  --quick          10 operations, 1 round; docs untouched
  --report FILE    redraw the table and docs section from a results JSON
  -h, --help       this help
`;

const STEPS = ['credential', 'create', 'create, get, credential', 'create+credential'] as const;
type Step = (typeof STEPS)[number];

interface Options {
  databases: number;
  concurrency: number;
  rounds: number;
}

interface StepResult {
  round: number;
  step: Step;
  operations: number;
  cpuMs: number;
  wallMs: number;
  /** Per-operation latency, ms. */
  latencies: number[];
}

interface Body {
  options: Options;
  /** False when the runtime's create did not return a credential (a runtime before the one-call create). */
  oneCall: boolean;
  steps: StepResult[];
}

async function runStep(rt: RuntimeProcess, round: number, step: Step, names: string[], concurrency: number, op: (name: string) => Promise<unknown>): Promise<StepResult> {
  await waitForPool(rt);
  const latencies: number[] = [];
  const queue = [...names];
  const cpu0 = await treeCpuMs(rt.pid);
  const t0 = systemClock.monotonic();
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      for (let name = queue.shift(); name !== undefined; name = queue.shift()) {
        const s = systemClock.monotonic();
        await op(name);
        latencies.push(systemClock.monotonic() - s);
      }
    }),
  );
  const wallMs = systemClock.monotonic() - t0;
  const cpuMs = (await treeCpuMs(rt.pid)) - cpu0;
  progress(`  round ${round} ${step}: ${(cpuMs / names.length).toFixed(1)} ms CPU each, p50 ${median(latencies).toFixed(1)} ms`);
  return { round, step, operations: names.length, cpuMs, wallMs, latencies };
}

async function measure(opts: Options, ctx: { cleanup: Cleanup; workDir: string }): Promise<Body> {
  const rt = await startRuntimeProcess({ workDir: ctx.workDir, flags: ['--pool-size', String(opts.databases + 10)] }, ctx.cleanup);
  const template = await buildTemplate(rt, 'small');
  const api: ApiClient = rt.api;
  const steps: StepResult[] = [];
  let oneCall = true;
  for (let round = 1; round <= opts.rounds; round++) {
    const names = (tag: string): string[] => Array.from({ length: opts.databases }, (_, i) => `tdb_${template}__r${round}${tag}${i}`);
    const made = names('a');
    // The credential step works on databases made beforehand, pinned: the pool may take longer than the
    // grace period (15 s) to refill, and an unpinned database without a session is dropped after it.
    await runStep(rt, round, 'create', made, opts.concurrency, (name) => api.createDatabase({ template, name, pinned: true }));
    steps.push(await runStep(rt, round, 'credential', made, opts.concurrency, (name) => api.createCredential(name)));
    steps.push(await runStep(rt, round, 'create', names('b'), opts.concurrency, (name) => api.createDatabase({ template, name })));
    steps.push(
      await runStep(rt, round, 'create, get, credential', names('c'), opts.concurrency, async (name) => {
        await api.createDatabase({ template, name });
        await api.getDatabase(name);
        await api.createCredential(name);
      }),
    );
    steps.push(
      await runStep(rt, round, 'create+credential', names('d'), opts.concurrency, async (name) => {
        if (oneCall) {
          try {
            const made = (await api.createDatabase({ template, name, credential: {} } as Parameters<ApiClient['createDatabase']>[0])) as CreatedDatabaseBody & { credential?: unknown };
            if (made.credential) return;
          } catch (err) {
            // A runtime before the one-call create refuses the field: the step is then the two calls.
            if (!(err instanceof ApiClientError && /credential/.test(err.message))) throw err;
          }
          oneCall = false;
        }
        await api.createDatabase({ template, name });
        await api.createCredential(name);
      }),
    );
    // Dropped between rounds, so each round starts from the same number of databases.
    for (const name of [...made, ...names('b'), ...names('c'), ...names('d')]) await api.dropDatabase(name);
    await sleep(1000);
  }
  return { options: opts, oneCall, steps };
}

function summary(r: Body): { step: Step; cpu: number; p50: number; p99: number; n: number }[] {
  return STEPS.map((step) => {
    const mine = r.steps.filter((s) => s.step === step);
    return {
      step,
      cpu: median(mine.map((s) => s.cpuMs / s.operations)),
      p50: median(mine.flatMap((s) => s.latencies)),
      p99: percentile(mine.flatMap((s) => s.latencies), 99),
      n: mine.length,
    };
  });
}

function render(r: Meta & Body): Rendered {
  const rows = summary(r).map((s) => [
    s.step + (s.step === 'create+credential' && !r.oneCall ? ' (not supported: two calls)' : ''),
    s.cpu.toFixed(1),
    s.p50.toFixed(1),
    s.p99.toFixed(1),
    String(s.n),
  ]);
  const header = ['step', 'runtime CPU per operation (ms, median of rounds)', 'latency p50 (ms)', 'p99 (ms)', 'rounds'];
  const o = r.options;
  return {
    terminal: formatTable(header, rows),
    markdown: (raw) =>
      [
        `Latest run: ${describeMachine(r.machine, r.durationSeconds)}. ${o.databases} operations per step and round, ${o.concurrency} at a time, ${o.rounds} rounds; one runtime process (pgx start, --pool-size ${o.databases + 10}).`,
        '',
        markdownTable(header, rows, ['l', 'r', 'r', 'r', 'r']),
        '',
        `CPU is the runtime's process tree (node and every postgres process, /proc utime + stime, reaped children included) from the first request of a step to its last answer; the create steps include the refills the warm pool starts before that answer. Raw samples: [${raw}](../${raw}).`,
      ].join('\n'),
    bars: [],
  };
}

export const main = benchMain<Options, Body>({
  name: 'credentials',
  help: HELP,
  options: ['databases', 'concurrency', 'rounds'],
  parse: (values, quick) => ({
    databases: quick ? 10 : intOption(values, 'databases', 40, 1),
    concurrency: intOption(values, 'concurrency', 8, 1),
    rounds: quick ? 1 : intOption(values, 'rounds', 3, 1),
  }),
  measure,
  render,
});
