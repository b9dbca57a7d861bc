// A bounded network fuzz run against a real runtime with SCRAM authentication. Hundreds of raw
// connections each reach a protocol state (before startup, mid-startup, during SCRAM, after login,
// mid-COPY IN, mid-transaction, mid-query), then send random bytes, truncated messages or absurd
// lengths, and close in one of several ways. Meanwhile a well-behaved node-postgres session runs a
// steady query loop on the same runtime and must see no error at all. Afterwards the engine must be
// at rest: no exception escaped, no session or backend left, memory back near where it was.
//
// Reproducible: the random choices come from a seeded generator (PGX_FUZZ_SEED overrides the seed;
// PGX_FUZZ_CONNECTIONS the count).

import { expect } from 'chai';
import pg from 'pg';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';
import {
  RawSocket,
  TERMINATE,
  errorOf,
  expectAuth,
  header,
  int32,
  login,
  message,
  query,
  saslInitialResponse,
  startupPacket,
} from '../helpers/raw-socket.js';
import { scramClient } from '../helpers/scram-client.js';

const SEED = Number(process.env.PGX_FUZZ_SEED ?? 0x9e3779b9);
const CONNECTIONS = Number(process.env.PGX_FUZZ_CONNECTIONS ?? 400);
const PARALLEL = 12;
const USER = 'fuzz';
const PASSWORD = 'pw';

/** mulberry32: small, fast, seeded. */
class Rng {
  constructor(private s: number) {}
  next(): number {
    this.s = (this.s + 0x6d2b79f5) | 0;
    let t = this.s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  }
  int(n: number): number {
    return Math.floor(this.next() * n);
  }
  chance(p: number): boolean {
    return this.next() < p;
  }
  pick<T>(items: readonly T[]): T {
    return items[this.int(items.length)]!;
  }
  bytes(n: number): Buffer {
    const b = Buffer.alloc(n);
    for (let i = 0; i < n; i++) b[i] = this.int(256);
    return b;
  }
}

/** Frontend message types, and a few that are not. */
const TYPES = ['Q', 'P', 'B', 'E', 'D', 'S', 'H', 'C', 'd', 'c', 'f', 'p', 'X', 'z', 'Z', '\0', '\xff'];
const ABSURD_LENGTHS = [0x7fffffff, 0x40000000, -1, -0x80000000, 0, 3, 10001, 0x3fffffff];

/** Something a broken or hostile client might send. */
function garbage(rng: Rng): Buffer {
  switch (rng.int(7)) {
    case 0:
      return rng.bytes(1 + rng.int(512));
    case 1:
      return header(rng.pick(TYPES).charCodeAt(0), rng.pick(ABSURD_LENGTHS));
    case 2: {
      const q = query(`SELECT ${rng.int(1000)}, '${'y'.repeat(rng.int(100))}'`);
      return q.subarray(0, rng.int(q.length));
    }
    case 3:
      return Buffer.concat([query('SELECT 1'), rng.bytes(1 + rng.int(64))]);
    case 4: {
      // Plausible frames with random bodies (never FunctionCall: a random OID is not worth the risk).
      const parts: Buffer[] = [];
      for (let i = 0, n = 1 + rng.int(6); i < n; i++) parts.push(message(rng.pick(TYPES), rng.bytes(rng.int(40))));
      return Buffer.concat(parts);
    }
    case 5:
      return Buffer.concat([header(rng.pick(TYPES).charCodeAt(0), 5 + rng.int(2000)), rng.bytes(rng.int(50))]);
    default:
      return Buffer.concat([message(rng.pick(TYPES), rng.bytes(rng.int(20))), header(rng.pick(TYPES).charCodeAt(0), rng.pick(ABSURD_LENGTHS))]);
  }
}

type Closing = 'destroy' | 'end' | 'linger';

async function finish(conn: RawSocket, how: Closing): Promise<void> {
  if (how === 'destroy') conn.destroy();
  else if (how === 'end') {
    conn.end();
    await conn.waitClosed(500);
    conn.destroy();
  } else {
    // Read whatever the engine answers (an error, results) for a moment, then go.
    const { messages, closed } = await conn.drain(150);
    const fatal = messages.map((m) => (m.type === 'E' ? errorOf(m) : null)).find((e) => e?.severity === 'FATAL');
    const outcome = fatal ? `FATAL ${fatal.code}` : closed ? 'closed' : 'open';
    outcomes[outcome] = (outcomes[outcome] ?? 0) + 1;
    conn.destroy();
  }
}

/** What the engine did with lingering connections, by FATAL SQLSTATE (reported with PGX_FUZZ_VERBOSE). */
const outcomes: Record<string, number> = {};

type State = 'before-startup' | 'mid-startup' | 'scram' | 'after-login' | 'mid-copy' | 'mid-transaction' | 'mid-query' | 'polite';
const STATES: State[] = ['before-startup', 'mid-startup', 'scram', 'after-login', 'mid-copy', 'mid-transaction', 'mid-query', 'polite'];

interface Tally {
  byState: Record<string, number>;
  setupFailures: string[];
}

/** One fuzz connection: reach `state`, misbehave, close. Throws only if reaching the state failed. */
async function fuzzOne(rt: TestRuntime, rng: Rng, state: State): Promise<void> {
  const how: Closing = rng.pick(['destroy', 'end', 'linger'] as const);
  const startup = startupPacket({ user: USER, database: 'postgres', application_name: 'fuzz' });
  const loggedIn = async (): Promise<RawSocket> => (await login(rt.port, rt.host, { user: USER, password: PASSWORD })).conn;

  switch (state) {
    case 'before-startup': {
      const conn = await RawSocket.connect(rt.port, rt.host);
      conn.write(rng.chance(0.3) ? Buffer.concat([int32(rng.pick(ABSURD_LENGTHS)), rng.bytes(rng.int(20))]) : garbage(rng));
      return finish(conn, how);
    }
    case 'mid-startup': {
      const conn = await RawSocket.connect(rt.port, rt.host);
      const cut = 1 + rng.int(startup.length - 1);
      conn.write(startup.subarray(0, cut));
      if (rng.chance(0.5)) conn.write(garbage(rng));
      return finish(conn, how);
    }
    case 'scram': {
      const conn = await RawSocket.connect(rt.port, rt.host);
      try {
        conn.write(startup);
        await expectAuth(conn, 10);
      } catch (err) {
        conn.destroy();
        throw err;
      }
      const client = scramClient(PASSWORD, { proof: rng.chance(0.5) ? 'wrong' : 'right' });
      switch (rng.int(6)) {
        case 0:
          conn.write(garbage(rng));
          break;
        case 1:
          conn.write(saslInitialResponse(rng.pick(['SCRAM-SHA-1', '', 'SCRAM-SHA-256-PLUS']), client.first));
          break;
        case 2:
          conn.write(saslInitialResponse('SCRAM-SHA-256', rng.chance(0.3) ? null : rng.bytes(rng.int(80))));
          break;
        case 3: {
          const first = saslInitialResponse('SCRAM-SHA-256', client.first);
          conn.write(first.subarray(0, rng.int(first.length)));
          break;
        }
        default: {
          conn.write(saslInitialResponse('SCRAM-SHA-256', client.first));
          let serverFirst: Buffer;
          try {
            serverFirst = await expectAuth(conn, 11);
          } catch (err) {
            conn.destroy();
            throw err;
          }
          const final = message('p', client.final(serverFirst.toString()).message);
          const pick = rng.int(3);
          if (pick === 0) conn.write(garbage(rng));
          else if (pick === 1) conn.write(final.subarray(0, rng.int(final.length)));
          else conn.write(Buffer.concat([final, garbage(rng)])); // maybe logged in, then garbage
        }
      }
      return finish(conn, how);
    }
    case 'after-login': {
      const conn = await loggedIn();
      conn.write(garbage(rng));
      return finish(conn, how);
    }
    case 'mid-copy': {
      const conn = await loggedIn();
      try {
        conn.write(query('COPY fuzz_t FROM STDIN'));
        await conn.readUntil('G');
      } catch (err) {
        conn.destroy();
        throw err;
      }
      if (rng.chance(0.5)) conn.write(message('d', `row ${rng.int(1000)}\n`));
      conn.write(garbage(rng));
      return finish(conn, how);
    }
    case 'mid-transaction': {
      const conn = await loggedIn();
      try {
        conn.write(query(rng.chance(0.5) ? 'BEGIN; SELECT 1' : 'BEGIN; SELECT count(*) FROM fuzz_t; SAVEPOINT s'));
        await conn.readUntil('Z');
      } catch (err) {
        conn.destroy();
        throw err;
      }
      conn.write(rng.chance(0.2) ? TERMINATE : garbage(rng));
      return finish(conn, how);
    }
    case 'mid-query': {
      const conn = await loggedIn();
      conn.write(query(`SELECT pg_sleep(0.0${1 + rng.int(5)})`));
      if (rng.chance(0.5)) conn.write(garbage(rng));
      return finish(conn, rng.chance(0.5) ? 'destroy' : how);
    }
    case 'polite': {
      // A well-behaved session now and then, so backends are reused between the broken ones.
      const conn = await loggedIn();
      try {
        conn.write(query('SELECT 1'));
        await conn.readUntil('Z');
      } finally {
        conn.write(TERMINATE);
        await conn.waitClosed(2000);
        conn.destroy();
      }
      return;
    }
  }
}

async function until(what: string, check: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  for (;;) {
    if (await check()) return;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 25));
  }
}

describe('engine: network fuzz', function () {
  this.timeout(90_000);
  let rt: TestRuntime;
  const escaped: unknown[] = [];
  const warnings: Error[] = [];
  const onEscape = (err: unknown): void => {
    escaped.push(err);
  };
  const onWarning = (w: Error): void => {
    warnings.push(w);
  };

  before(async () => {
    // Half the fuzzed logins send a wrong proof: the failed-login limit would refuse the rest.
    rt = await startTestRuntime({ auth: 'scram', users: [{ name: USER, password: PASSWORD }], loginFailureLimit: null });
    const admin = await rt.runtime.supervisor.connect();
    try {
      await admin.query(`CREATE TABLE fuzz_t (a text)`);
      await admin.query(`GRANT ALL ON fuzz_t TO ${USER}`);
    } finally {
      await admin.close();
    }
    process.on('unhandledRejection', onEscape);
    process.on('uncaughtException', onEscape);
    process.on('warning', onWarning);
  });

  after(async () => {
    process.off('unhandledRejection', onEscape);
    process.off('uncaughtException', onEscape);
    process.off('warning', onWarning);
    await rt?.stop();
  });

  it(`survives ${CONNECTIONS} hostile connections while a healthy session sees no error`, async () => {
    const engine = rt.runtime.engine;
    const connection = { ...rt.connection('postgres', USER), password: PASSWORD };

    // The healthy session: a steady loop of queries and short transactions, checked answer by answer.
    const healthy = new pg.Client(connection);
    const healthyErrors: unknown[] = [];
    healthy.on('error', (err) => healthyErrors.push(err));
    await healthy.connect();
    let healthyQueries = 0;
    let stop = false;
    const loop = (async () => {
      for (let i = 0; !stop; i++) {
        try {
          if (i % 10 === 9) {
            await healthy.query('BEGIN');
            await healthy.query('INSERT INTO fuzz_t VALUES ($1)', [`healthy ${i}`]);
            await healthy.query('COMMIT');
          } else {
            const r = await healthy.query('SELECT $1::int + 1 AS n, repeat($2, 50) AS pad', [i, 'x']);
            if (r.rows[0].n !== i + 1 || r.rows[0].pad.length !== 50) throw new Error(`wrong answer at ${i}: ${JSON.stringify(r.rows)}`);
          }
          healthyQueries++;
        } catch (err) {
          healthyErrors.push(err);
        }
      }
    })();

    // Warm up, then take the baselines.
    await until('healthy loop running', () => healthyQueries > 20);
    const baseClients = engine.stats().clients;
    expect(baseClients).to.equal(1);
    const baseRss = process.memoryUsage().rss;

    const tally: Tally = { byState: {}, setupFailures: [] };
    const rng = new Rng(SEED);
    // Choices are drawn up front, so the run does not depend on how the workers interleave.
    const plan = Array.from({ length: CONNECTIONS }, () => ({ state: rng.pick(STATES), seed: rng.int(0x7fffffff) }));
    let next = 0;
    const slowest: Array<{ state: State; seed: number; ms: number }> = [];
    const t0 = Date.now();
    const worker = async (): Promise<void> => {
      while (next < plan.length) {
        const { state, seed } = plan[next++]!;
        tally.byState[state] = (tally.byState[state] ?? 0) + 1;
        const started = Date.now();
        try {
          await fuzzOne(rt, new Rng(seed), state);
        } catch (err) {
          tally.setupFailures.push(`${state} (seed ${seed}): ${(err as Error).message}`);
        }
        slowest.push({ state, seed, ms: Date.now() - started });
        slowest.sort((a, b) => b.ms - a.ms).splice(5);
      }
    };
    await Promise.all(Array.from({ length: PARALLEL }, worker));
    const fuzzMs = Date.now() - t0;

    // Let the healthy session run on past the storm, then stop it.
    const afterFuzz = healthyQueries;
    await until('healthy loop continues after the fuzz', () => healthyQueries > afterFuzz + 20);
    stop = true;
    await loop;

    expect(healthyErrors.map(String), 'healthy session errors').to.deep.equal([]);
    expect(tally.setupFailures, 'connections that could not reach their state').to.deep.equal([]);
    for (const s of STATES) expect(tally.byState[s] ?? 0, `connections in state ${s}`).to.be.above(10);

    // At rest: only the healthy session, no backend held by anyone else.
    await until('fuzz sessions gone', () => engine.stats().clients === baseClients);
    await until('no backend held but the healthy one', () => {
      const b = engine.stats().backends;
      return b.active === 1 && b.connecting === 0 && b.resetting === 0 && b.waiting === 0;
    });
    // PostgreSQL runs no backend the engine has forgotten: ours, the pool's idle ones, the admin session.
    await until('PostgreSQL client backends match the pool', async () => {
      const r = await healthy.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE backend_type = 'client backend'");
      return r.rows[0].n <= engine.stats().backends.total + 1;
    });
    await healthy.end();
    await until('healthy session gone', () => engine.stats().clients === 0 && engine.stats().backends.active === 0);

    // Still serving new clients.
    const fresh = new pg.Client(connection);
    await fresh.connect();
    expect((await fresh.query('SELECT 40 + 2 AS n')).rows).to.deep.equal([{ n: 42 }]);
    await fresh.end();

    expect(escaped.map(String), 'unhandledRejection / uncaughtException').to.deep.equal([]);
    expect(warnings.filter((w) => w.name === 'MaxListenersExceededWarning').map(String), 'listener leaks').to.deep.equal([]);
    const rss = process.memoryUsage().rss;
    expect(rss - baseRss, `rss grew from ${baseRss >> 20} MB to ${rss >> 20} MB`).to.be.below(100 * 1024 * 1024);
    expect(fuzzMs, 'fuzz run duration').to.be.below(40_000);
    if (process.env.PGX_FUZZ_VERBOSE) {
      console.log({ fuzzMs, healthyQueries, byState: tally.byState, rssMB: [baseRss >> 20, rss >> 20], slowest, outcomes });
    }
  });
});
