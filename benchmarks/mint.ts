// The mint benchmark: how long a client waits for a new database, from its connect to the answer of
// its first `SELECT 1`, against a plain connect to an existing database on the same PostgreSQL 18.
//
// Targets, each once per round, the order rotating (and reversing every other cycle) across rounds:
//   warm    connect to a new tdb_ name on a runtime with the default warm pool, the pool full
//           (the benchmark waits for refills before every sample, so none runs during one)
//   cold    the same on a second runtime started with --pool-size 0: CREATE DATABASE per mint
//   direct  connect to an existing database directly on the first runtime's PostgreSQL
//   create  CREATE DATABASE x TEMPLATE tpl_big STRATEGY WAL_LOG on an open admin session, then
//           connect to x, directly on that PostgreSQL (what a test suite does without PGX)
//   warm-unix, direct-unix  warm and direct over the Unix sockets (the engine's, PostgreSQL's)
//   relay, pgbouncer  yardsticks for any proxy in front: connect to the existing database through a
//           bare Node relay (a fresh PostgreSQL connection per client) and through PgBouncer with
//           server_lifetime 0 (a fresh server login per client, its greeting cached); neither has a
//           database to claim, so together they show what the hop alone costs on this machine
// Every target mints from, or copies, the same template of about 600 relation files. The databases of
// a round are dropped after it, outside the timer, and the next round starts once the runtimes' background
// DROP DATABASEs are done (status databases.trash 0). Reported: p50 and p99 per target, ratios within
// this run.

import path from 'node:path';
import { mkdirSync, chmodSync } from 'node:fs';
import type pg from 'pg';
import { benchMain, describeMachine, intOption, progress, type Bar, type Meta } from './lib/bench-main.js';
import { newClient, openTimed, quoteIdent, timeFirstQuery, withClient, type Endpoint } from './lib/pg-connect.js';
import { startRuntimeProcess, untilStatus, waitForPool, type RuntimeProcess } from './lib/runtime-process.js';
import { median, percentile } from './lib/stats.js';
import { formatTable, markdownTable } from './lib/table.js';
import { BIG_TEMPLATE, buildTemplate, databaseFiles } from './lib/templates.js';
import { startNodeRelay } from './lib/node-relay.js';
import { startPgBouncer } from './lib/pgbouncer.js';
import { roundOrder } from './lib/round-order.js';

const HELP = `Usage: npm run bench -- mint [options]

Warm mint, cold mint, a plain connect and CREATE DATABASE + connect on PostgreSQL 18, and a plain
connect through a bare Node relay and through PgBouncer (each a fresh backend), one run.

Options:
  --rounds N     measured rounds (each target once per round, order rotating)     [100]
  --warmup N     rounds run first and not counted                                  [3]
  --quick        smoke run: 6 rounds, 1 warm-up; results to a temp file, docs untouched
  --report FILE  redraw the table and docs section from a results JSON
  -h, --help     this help
`;

const TARGETS = ['warm', 'cold', 'direct', 'create', 'warm-unix', 'direct-unix', 'relay', 'pgbouncer'] as const;
type MintTarget = (typeof TARGETS)[number];
const LABELS: Record<MintTarget, string> = {
  warm: 'PGX warm mint (pool spare)',
  cold: 'PGX cold mint (--pool-size 0)',
  direct: 'PG18 connect, existing database',
  create: 'PG18 CREATE DATABASE WAL_LOG + connect',
  'warm-unix': 'PGX warm mint, Unix socket',
  'direct-unix': 'PG18 connect, existing database, Unix socket',
  relay: 'Node relay, existing database (fresh backend)',
  pgbouncer: 'PgBouncer, existing database (fresh backend)',
};
const EXISTING = 'bench_existing';

interface Options {
  rounds: number;
  warmup: number;
}

interface Sample {
  round: number;
  position: number;
  target: MintTarget;
  ms: number;
  /** create only: the part after CREATE DATABASE, i.e. the first connect to a database never connected to. */
  connectMs?: number;
  /** pgbouncer only: its backend started after the sample did (server_lifetime 0 took effect). */
  freshBackend?: boolean;
}

interface Body {
  options: Options;
  postgresVersion: string;
  runtimes: { warm: string[]; cold: string[] };
  template: { name: string; files: number };
  /** The warm runtime's own mint counters at the end: every measured warm mint must have been warm. */
  warmRuntimeMints: { warm: number; cold: number; latency_ms: { mean: number; p99: number } };
  samples: Sample[];
}

async function measure(opts: Options, { cleanup, workDir }: { cleanup: import('./lib/cleanup.js').Cleanup; workDir: string }): Promise<Body> {
  const dir = (name: string): string => {
    const d = path.join(workDir, name);
    mkdirSync(d);
    chmodSync(d, 0o755);
    return d;
  };
  progress('starting two PGX runtimes: default warm pool (PostgreSQL also on 127.0.0.1:5432), and --pool-size 0');
  const warmRt = await startRuntimeProcess({ workDir: dir('warm'), tcpPostgres: true, socketDir: dir('socket') }, cleanup);
  const coldRt = await startRuntimeProcess({ workDir: dir('cold'), flags: ['--pool-size', '0'] }, cleanup);
  progress(`building ${BIG_TEMPLATE} in both`);
  await buildTemplate(warmRt, 'big');
  await buildTemplate(coldRt, 'big');
  const files = await databaseFiles(warmRt, BIG_TEMPLATE);
  progress(`${BIG_TEMPLATE}: ${files} files in its directory`);
  const admin: pg.Client = newClient(warmRt.postgres, 'postgres');
  await admin.connect();
  cleanup.add('admin session', () => admin.end());
  await admin.query(`CREATE DATABASE ${EXISTING}`);
  const postgresVersion = (await warmRt.api.status()).runtime.postgres_version;
  progress('starting the yardsticks: a bare Node relay and PgBouncer (server_lifetime 0), both to that PostgreSQL\'s socket');
  const pgSocket = { pgSocketDir: warmRt.postgresSocket.host, pgPort: warmRt.postgresSocket.port, transport: 'tcp' as const };
  const proxies = {
    relay: (await startNodeRelay({ workDir, ...pgSocket, runtime: 'node' }, cleanup)).target,
    pgbouncer: (await startPgBouncer({ workDir, ...pgSocket, poolSize: 10, serverLifetime: 0 }, cleanup)).target,
  };

  const samples: Sample[] = [];
  const total = opts.warmup + opts.rounds;
  for (let i = 0; i < total; i++) {
    const round = i - opts.warmup;
    const made: { rt: RuntimeProcess | null; name: string }[] = [];
    const line: string[] = [];
    for (const [position, target] of roundOrder(TARGETS, i).entries()) {
      // No refill may run during any sample, whichever target it is.
      await waitForPool(warmRt);
      const { ms, ...extra } = await sample(target, i, { warmRt, coldRt, admin, proxies }, made);
      if (round >= 0) samples.push({ round, position, target, ms, ...extra });
      line.push(`${target} ${ms.toFixed(1)}`);
    }
    progress(`${round < 0 ? 'warm-up' : `round ${round + 1}/${opts.rounds}`}: ${line.join(', ')} ms`);
    for (const m of made) {
      if (m.rt) await m.rt.api.dropDatabase(m.name);
      else await admin.query(`DROP DATABASE ${quoteIdent(m.name)}`);
    }
    // A drop answers before its DROP DATABASE has run (the trash): none may run during the next round.
    for (const rt of [warmRt, coldRt]) await untilStatus(rt, (s) => s.databases.trash === 0, 'the dropped databases were not all gone', 60_000, 20);
  }
  const counters = (await warmRt.api.status()).mints;
  return {
    options: opts,
    postgresVersion,
    runtimes: { warm: warmRt.flags, cold: coldRt.flags },
    template: { name: BIG_TEMPLATE, files },
    warmRuntimeMints: { warm: counters.warm, cold: counters.cold, latency_ms: counters.latency_ms },
    samples,
  };
}

async function sample(
  target: MintTarget,
  i: number,
  ctx: { warmRt: RuntimeProcess; coldRt: RuntimeProcess; admin: pg.Client; proxies: Record<'relay' | 'pgbouncer', Endpoint> },
  made: { rt: RuntimeProcess | null; name: string }[],
): Promise<{ ms: number; connectMs?: number; freshBackend?: boolean }> {
  switch (target) {
    case 'warm':
    case 'warm-unix':
    case 'cold': {
      const rt = target === 'cold' ? ctx.coldRt : ctx.warmRt;
      const name = `tdb_${BIG_TEMPLATE}__${target.replace('-', '_')}${i}`;
      made.push({ rt, name });
      return { ms: await timeFirstQuery(target === 'warm-unix' ? rt.engineSocket! : rt.engine, name) };
    }
    case 'direct':
      return { ms: await timeFirstQuery(ctx.warmRt.postgres, EXISTING) };
    case 'direct-unix':
      return { ms: await timeFirstQuery(ctx.warmRt.postgresSocket, EXISTING) };
    case 'relay':
      return { ms: await timeFirstQuery(ctx.proxies.relay, EXISTING) };
    case 'pgbouncer': {
      // PgBouncer reuses a server connection unless its lifetime is over: check it did not.
      const startedAt = Date.now();
      const { client, ms } = await openTimed(ctx.proxies.pgbouncer, EXISTING);
      try {
        const r = await client.query(`SELECT extract(epoch FROM backend_start) * 1000 AS at FROM pg_stat_activity WHERE pid = pg_backend_pid()`);
        return { ms, freshBackend: Number(r.rows[0]?.at) >= startedAt - 1 };
      } finally {
        await client.end().catch(() => undefined);
      }
    }
    case 'create': {
      const name = `plain_${i}`;
      made.push({ rt: null, name });
      const started = performance.now();
      await ctx.admin.query(`CREATE DATABASE ${quoteIdent(name)} TEMPLATE ${BIG_TEMPLATE} STRATEGY WAL_LOG`);
      const created = performance.now();
      await withClient(ctx.warmRt.postgres, name, (c) => c.query('SELECT 1'));
      const ended = performance.now();
      return { ms: ended - started, connectMs: ended - created };
    }
  }
}

function render(r: Meta & Body) {
  const of = (t: MintTarget): number[] => r.samples.filter((s) => s.target === t).map((s) => s.ms);
  const stats = Object.fromEntries(TARGETS.map((t) => [t, { p50: median(of(t)), p99: percentile(of(t), 99), n: of(t).length }])) as Record<
    MintTarget,
    { p50: number; p99: number; n: number }
  >;
  const d = stats.direct;
  const ms = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(1)} ms` : '-');
  const x = (v: number): string => (Number.isFinite(v) ? `${v.toFixed(2)}x` : '-');
  const header = ['target', 'p50', 'p99', 'p50 / direct p50 (same transport)', 'p99 / direct p99 (same transport)', 'samples'];
  const rows = TARGETS.filter((t) => stats[t].n > 0).map((t) => {
    const base = t.endsWith('-unix') ? stats['direct-unix'] : d;
    return [LABELS[t], ms(stats[t].p50), ms(stats[t].p99), x(stats[t].p50 / base.p50), x(stats[t].p99 / base.p99), String(stats[t].n)];
  });
  const allWarm = r.warmRuntimeMints.cold === 0;
  // Issue 23: p50 <= 1.25x a plain connect and p99 <= 2x, over TCP and over the Unix socket (runs from
  // before the Unix targets have TCP only).
  const bars: Bar[] = (['tcp', 'unix'] as const).flatMap((via) => {
    const [w, dd] = via === 'tcp' ? [stats.warm, stats.direct] : [stats['warm-unix'], stats['direct-unix']];
    if (w.n === 0 || dd.n === 0) return [];
    return [
      { text: `warm mint p50 <= 1.25x plain direct connect p50, ${via.toUpperCase()}`, measured: `${ms(w.p50)} vs ${ms(dd.p50)} = ${x(w.p50 / dd.p50)}`, pass: w.p50 / dd.p50 <= 1.25 },
      { text: `warm mint p99 <= 2x plain direct connect p99, ${via.toUpperCase()}`, measured: `${ms(w.p99)} vs ${ms(dd.p99)} = ${x(w.p99 / dd.p99)} (${x(w.p99 / dd.p50)} of the direct p50)`, pass: w.p99 / dd.p99 <= 2 },
    ];
  });
  const firstConnect = median(r.samples.flatMap((s) => (s.connectMs !== undefined ? [s.connectMs] : [])));
  const diagnosis =
    `Inside the CREATE DATABASE + connect target, the first connect to the new database took ${ms(firstConnect)} (median) against ${ms(d.p50)} ` +
    `for a database connected to before; the runtime's own mint latency (claim or copy, its counters, warm-up included) was ${ms(r.warmRuntimeMints.latency_ms.mean)} mean, ${ms(r.warmRuntimeMints.latency_ms.p99)} p99.`;
  const bouncerSamples = r.samples.filter((s) => s.target === 'pgbouncer');
  const yardsticks =
    stats.relay.n === 0
      ? ''
      : `The hop alone, with no database to claim: a fresh backend through the bare Node relay ${x(stats.relay.p50 / d.p50)} of the direct connect's p50, ` +
        `through PgBouncer ${x(stats.pgbouncer.p50 / d.p50)} (${bouncerSamples.filter((s) => s.freshBackend).length} of ${bouncerSamples.length} of its samples on a backend started for it); ` +
        `the warm mint is ${ms(stats.warm.p50 - stats.relay.p50)} above the relay.`;
  const about = [
    `${describeMachine(r.machine, r.durationSeconds)}; PostgreSQL ${r.postgresVersion}; ${r.options.rounds} rounds after ${r.options.warmup} warm-up rounds.`,
    `Template ${r.template.name}: ${r.template.files} files in its directory. The warm runtime minted ${r.warmRuntimeMints.warm} warm and ${r.warmRuntimeMints.cold} cold` +
      `${allWarm ? ' (every warm sample was a pool spare).' : ' (some "warm" samples were cold: the pool was not full).'}`,
  ];
  return {
    bars,
    terminal: [...about, '', formatTable(header, rows), '', diagnosis, yardsticks].join('\n'),
    markdown: (raw: string) =>
      [
        `Latest run: ${about.join(' ')}`,
        '',
        markdownTable(header, rows, ['l', 'r', 'r', 'r', 'r', 'r']),
        '',
        ...bars.map((b) => `- ${b.pass ? 'pass' : '**FAIL**'} ${b.text}: ${b.measured}`),
        '',
        [diagnosis, yardsticks].filter(Boolean).join(' '),
        '',
        `Timer: node-postgres \`Client.connect()\` to the answer of the first \`SELECT 1\`, over TCP loopback for every target but the two Unix socket ones. Raw samples: [${raw}](../${raw}).`,
      ].join('\n'),
  };
}

export const main = benchMain<Options, Body>({
  name: 'mint',
  help: HELP,
  options: ['rounds', 'warmup'],
  parse: (v, quick) => ({ rounds: intOption(v, 'rounds', quick ? 6 : 100, 1), warmup: intOption(v, 'warmup', quick ? 1 : 3) }),
  measure,
  render,
});
