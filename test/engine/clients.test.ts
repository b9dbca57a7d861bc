// Real driver traffic through the engine: node-postgres (pg, pg-cursor, pg-copy-streams) and
// postgres.js against a real PostgreSQL 18. Extended protocol with text and binary parameters,
// pipelining, named prepared statements, COPY both ways, LISTEN/NOTIFY, cancel, a million-row cursor
// with a memory bound, and backpressure when a client stops reading.

import { expect } from 'chai';
import { createHash, randomBytes } from 'node:crypto';
import net from 'node:net';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import pg from 'pg';
import Cursor from 'pg-cursor';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import postgres from 'postgres';
import { serialize } from 'pg-protocol';
import { directConnection, waitFor } from '../helpers/commands.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

const MB = 1024 * 1024;

/** What pg keeps from BackendKeyData; not in @types/pg. */
interface CancelKey {
  processID: number;
  secretKey: number;
}

/** Sends a CancelRequest for `client` on a fresh connection, as libpq's PQcancel (and psql's Ctrl-C) does. */
function cancelWithNewConnection(client: pg.Client, conn: { host: string; port: number }): void {
  const { processID, secretKey } = client as unknown as CancelKey;
  const con = new pg.Connection() as unknown as {
    connect(port: number, host: string): void;
    cancel(pid: number, secret: number): void;
    on(event: string, fn: (...args: unknown[]) => void): void;
    end(): void;
  };
  con.on('error', () => {});
  con.on('connect', () => con.cancel(processID, secretKey));
  con.connect(conn.port, conn.host);
}

describe('engine: node-postgres and postgres.js through the engine', function () {
  this.timeout(60_000);
  let rt: TestRuntime;
  const open: { end(): Promise<unknown> }[] = [];

  before(async function () {
    rt = await startTestRuntime();
  });

  afterEach(async function () {
    await Promise.allSettled(open.splice(0).map((c) => c.end()));
  });

  after(async function () {
    await rt?.stop();
  });

  async function pgClient(config: Partial<pg.ClientConfig> = {}): Promise<pg.Client> {
    const client = new pg.Client({ ...rt.connection(), ...config });
    client.on('error', () => {});
    await client.connect();
    open.push(client);
    return client;
  }

  function pgjs(options: postgres.Options<Record<string, postgres.PostgresType>> = {}): postgres.Sql {
    const sql = postgres({ ...rt.connection(), max: 1, onnotice: () => {}, ...options });
    open.push({ end: () => sql.end({ timeout: 5 }) });
    return sql;
  }

  describe('connecting', function () {
    it('reports the same ParameterStatus values as PostgreSQL does directly', async function () {
      const reported = async (config: pg.ClientConfig): Promise<Record<string, string>> => {
        const params: Record<string, string> = {};
        const client = new pg.Client({ ...config, application_name: 'param_check' });
        (client as unknown as { connection: NodeJS.EventEmitter }).connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) => {
          params[m.parameterName] = m.parameterValue;
        });
        await client.connect();
        await client.end();
        return params;
      };
      const direct = await reported(directConnection(rt));
      // Twice through the engine: a new backend, then the same one reused from the pool.
      for (let i = 0; i < 2; i++) {
        const engine = await reported(rt.connection());
        expect(engine, `connection ${i + 1}`).to.deep.equal(direct);
      }
      expect(direct).to.include({ application_name: 'param_check', client_encoding: 'UTF8', session_authorization: 'postgres' });
    });
  });

  describe('extended protocol with parameters', function () {
    it('pg: text parameters and results', async function () {
      const client = await pgClient();
      const r = await client.query('SELECT $1::int + $2::int AS s, $3::text AS t, $4::text IS NULL AS n, $5::jsonb AS j, $6::int[] AS a', [
        40,
        2,
        'héllo ☃',
        null,
        JSON.stringify({ k: [1, 'two'] }),
        [1, 2, 3],
      ]);
      expect(r.rows).to.deep.equal([{ s: 42, t: 'héllo ☃', n: true, j: { k: [1, 'two'] }, a: [1, 2, 3] }]);
      expect(r.fields.map((f) => f.format)).to.deep.equal(['text', 'text', 'text', 'text', 'text']);
    });

    it('pg: binary parameters and binary results', async function () {
      // A Buffer parameter always goes out in binary format. Client-wide binary mode asks for every
      // result column in binary too (@types/pg omits the option). pg-protocol decodes each value as
      // UTF-8 before the type parser sees it, so values whose binary form is not valid UTF-8 (a bytea,
      // a float8) cannot come back intact; the results here are ones that can, and the bytea goes out
      // in binary and is checked on the server (length, md5, hex of its head).
      const every = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
      const blob = Buffer.concat([every, randomBytes(2 * MB)]);
      const text =
        'SELECT length($1::bytea) AS n, md5($1::bytea) AS h, encode(substring($1::bytea for 256), $2) AS head, ' +
        '$3::int4 AS i, $4::text AS t, $3::int4 > 5 AS gt';
      const run = async (conn: pg.ClientConfig): Promise<pg.QueryResult> => {
        const client = new pg.Client({ ...conn, binary: true } as pg.ClientConfig);
        await client.connect();
        try {
          return await client.query(text, [blob, 'hex', 7, 'tëxt']);
        } finally {
          await client.end();
        }
      };
      const r = await run(rt.connection());
      expect(r.fields.map((f) => f.format)).to.deep.equal(Array(6).fill('binary'));
      expect(r.rows[0]).to.deep.equal({
        n: blob.length,
        h: createHash('md5').update(blob).digest('hex'),
        head: every.toString('hex'),
        i: 7,
        t: 'tëxt',
        gt: true,
      });
      const direct = await run(directConnection(rt));
      expect(r.rows).to.deep.equal(direct.rows);
    });

    it('postgres.js: typed parameters, bytea and results', async function () {
      const sql = pgjs();
      const blob = randomBytes(MB);
      const [row] = await sql`
        SELECT ${blob}::bytea AS b, md5(${blob}::bytea) AS h, ${123}::int AS i, ${'x y'}::text AS t,
               ${sql.json({ a: [1, null] })}::jsonb AS j, ${new Date('2024-05-06T07:08:09Z')}::timestamptz AS ts, ${null}::int AS z`;
      expect(Buffer.from(row!.b as Uint8Array).equals(blob)).to.equal(true);
      expect(row!.h).to.equal(createHash('md5').update(blob).digest('hex'));
      expect(row!.i).to.equal(123);
      expect(row!.t).to.equal('x y');
      expect(row!.j).to.deep.equal({ a: [1, null] });
      expect((row!.ts as Date).toISOString()).to.equal('2024-05-06T07:08:09.000Z');
      expect(row!.z).to.equal(null);
    });
  });

  describe('pipelining', function () {
    it('postgres.js: 100 queries in flight on one connection, every result in place', async function () {
      const sql = pgjs({ max: 1 });
      const results = await Promise.all(
        Array.from({ length: 100 }, (_, i) => sql`SELECT ${i}::int AS i, repeat('x', ${i}) AS pad, pg_backend_pid() AS pid`),
      );
      results.forEach((rows, i) => {
        expect(rows[0]!.i).to.equal(i);
        expect(rows[0]!.pad).to.equal('x'.repeat(i));
      });
      expect(new Set(results.map((rows) => rows[0]!.pid)).size).to.equal(1);
    });

    it('postgres.js: an error in the middle of a pipeline fails only its own query', async function () {
      const sql = pgjs({ max: 1 });
      const settled = await Promise.allSettled(
        Array.from({ length: 100 }, (_, i) => (i % 10 === 5 ? sql`SELECT 1 / ${0}::int AS x` : sql`SELECT ${i}::int AS x`)),
      );
      settled.forEach((s, i) => {
        if (i % 10 === 5) {
          expect(s.status).to.equal('rejected');
          expect((s as PromiseRejectedResult).reason).to.have.property('code', '22012');
        } else {
          expect(s.status, `query ${i}`).to.equal('fulfilled');
          expect((s as PromiseFulfilledResult<postgres.RowList<postgres.Row[]>>).value[0]!.x).to.equal(i);
        }
      });
      const [after] = await sql`SELECT 'still fine' AS s`;
      expect(after!.s).to.equal('still fine');
    });

    it("pg: the client's query queue and its pipeline mode", async function () {
      for (const pipelineMode of [false, true]) {
        const client = await pgClient({ pipeline: pipelineMode });
        const results = await Promise.all(Array.from({ length: 100 }, (_, i) => client.query('SELECT $1::int * 3 AS v', [i])));
        results.forEach((r, i) => expect(r.rows[0].v, `pipeline=${pipelineMode} query ${i}`).to.equal(i * 3));
      }
    });
  });

  describe('named prepared statements', function () {
    it('pg: one named statement executed 1,000 times', async function () {
      const client = await pgClient();
      for (let i = 0; i < 1000; i++) {
        const r = await client.query({ name: 'pgx_twice', text: 'SELECT $1::int * 2 AS v, $2::text AS t', values: [i, `n${i}`] });
        if (r.rows[0].v !== i * 2 || r.rows[0].t !== `n${i}`) expect.fail(`execution ${i} returned ${JSON.stringify(r.rows)}`);
      }
      const ps = await client.query("SELECT name, statement FROM pg_prepared_statements WHERE name = 'pgx_twice'");
      expect(ps.rows).to.have.length(1);
    });

    it('postgres.js: prepare: true reuses one statement for 1,000 executions', async function () {
      const sql = pgjs({ prepare: true, max: 1 });
      for (let i = 0; i < 1000; i++) {
        const [row] = await sql`SELECT ${i}::int * 2 AS v`;
        if (row!.v !== i * 2) expect.fail(`execution ${i} returned ${JSON.stringify(row)}`);
      }
      const [{ n }] = (await sql`SELECT count(*)::int AS n FROM pg_prepared_statements WHERE statement LIKE '%::int * 2 AS v'`) as unknown as [{ n: number }];
      expect(n).to.equal(1);
    });
  });

  describe('COPY', function () {
    const ROWS = 100_000;
    const line = (i: number): string => `${i}\tvalue ${i} ${'é'.repeat(i % 5)}\n`;

    async function* lines(): AsyncGenerator<string> {
      let batch = '';
      for (let i = 1; i <= ROWS; i++) {
        batch += line(i);
        if (batch.length > 64 * 1024) {
          yield batch;
          batch = '';
        }
      }
      if (batch) yield batch;
    }

    function collector(): { sink: Writable; text: () => string } {
      const chunks: Buffer[] = [];
      return {
        sink: new Writable({
          write(chunk: Buffer, _enc, cb) {
            chunks.push(chunk);
            cb();
          },
        }),
        text: () => Buffer.concat(chunks).toString('utf8'),
      };
    }

    const expected = (): string => Array.from({ length: ROWS }, (_, i) => line(i + 1)).join('');

    it('pg (pg-copy-streams): COPY FROM STDIN then COPY TO STDOUT', async function () {
      const client = await pgClient();
      await client.query('CREATE TEMP TABLE copy_pg (id int, v text)');
      await pipeline(Readable.from(lines()), client.query(copyFrom('COPY copy_pg FROM STDIN')));
      const { sink, text } = collector();
      await pipeline(client.query(copyTo('COPY (SELECT * FROM copy_pg ORDER BY id) TO STDOUT')), sink);
      expect(text()).to.equal(expected());
      const r = await client.query('SELECT count(*)::int AS n, sum(id)::bigint AS s FROM copy_pg');
      expect(r.rows[0]).to.deep.equal({ n: ROWS, s: String((ROWS * (ROWS + 1)) / 2) });
    });

    it('pg: a COPY FROM STDIN that fails half-way leaves the session usable', async function () {
      const client = await pgClient();
      await client.query('CREATE TEMP TABLE copy_bad (id int)');
      async function* bad(): AsyncGenerator<string> {
        yield '1\n2\n';
        yield 'not a number\n';
        yield '4\n';
      }
      let failure: unknown;
      try {
        await pipeline(Readable.from(bad()), client.query(copyFrom('COPY copy_bad FROM STDIN')));
      } catch (err) {
        failure = err;
      }
      expect(failure).to.have.property('code', '22P02');
      const r = await client.query('SELECT count(*)::int AS n FROM copy_bad');
      expect(r.rows[0].n).to.equal(0);
    });

    it('postgres.js: COPY FROM STDIN (.writable) then COPY TO STDOUT (.readable)', async function () {
      const sql = pgjs();
      await sql`CREATE TEMP TABLE copy_js (id int, v text)`;
      await pipeline(Readable.from(lines()), await sql`COPY copy_js FROM STDIN`.writable());
      const { sink, text } = collector();
      await pipeline(await sql`COPY (SELECT * FROM copy_js ORDER BY id) TO STDOUT`.readable(), sink);
      expect(text()).to.equal(expected());
    });
  });

  describe('LISTEN / NOTIFY', function () {
    it('pg: a notification with a payload crosses between two sessions', async function () {
      const listener = await pgClient();
      const notifier = await pgClient();
      await listener.query('LISTEN pgx_chan');
      const got = new Promise<pg.Notification>((resolve) => listener.once('notification', resolve));
      await notifier.query("SELECT pg_notify('pgx_chan', 'payload from pg ☃')");
      const n = await got;
      expect(n.channel).to.equal('pgx_chan');
      expect(n.payload).to.equal('payload from pg ☃');
      // NOTIFY inside a transaction arrives at commit, not before.
      const later = new Promise<pg.Notification>((resolve) => listener.once('notification', resolve));
      await notifier.query('BEGIN');
      await notifier.query("NOTIFY pgx_chan, 'at commit'");
      await notifier.query('COMMIT');
      expect((await later).payload).to.equal('at commit');
    });

    it('postgres.js: listen() and notify() between two connections', async function () {
      const a = pgjs();
      const b = pgjs();
      const payloads: string[] = [];
      let gotAll: () => void = () => {};
      const all = new Promise<void>((resolve) => (gotAll = resolve));
      // listen() resolves once LISTEN has run on a's dedicated connection.
      await a.listen('pgx_js_chan', (payload) => {
        payloads.push(payload);
        if (payloads.length === 3) gotAll();
      });
      for (const p of ['one', 'two', 'three']) await b.notify('pgx_js_chan', p);
      await all;
      expect(payloads).to.deep.equal(['one', 'two', 'three']);
    });
  });

  describe('cancel', function () {
    it('pg: a CancelRequest on a new connection stops pg_sleep(10) with 57014', async function () {
      const client = await pgClient();
      const started = performance.now();
      const sleeping = client.query('SELECT pg_sleep(10)').then(
        () => undefined,
        (err: unknown) => err,
      );
      // Cancel once the statement is really running.
      const watcher = await pgClient();
      await waitFor('pg_sleep to run', async () => {
        const r = await watcher.query("SELECT count(*)::int AS n FROM pg_stat_activity WHERE query = 'SELECT pg_sleep(10)' AND state = 'active'");
        return r.rows[0].n > 0;
      });
      cancelWithNewConnection(client, rt.connection());
      const err = await sleeping;
      expect(err, 'pg_sleep(10) completed instead of being cancelled').to.be.instanceOf(Error);
      expect(err).to.have.property('code', '57014');
      expect(performance.now() - started, 'cancel took too long').to.be.below(8000);
      // The session survives its cancelled statement.
      expect((await client.query('SELECT 1 AS one')).rows[0].one).to.equal(1);
    });

    it('postgres.js: query.cancel() stops pg_sleep(10) with 57014', async function () {
      const sql = pgjs();
      const started = performance.now();
      const q = sql`SELECT pg_sleep(10)`;
      const result = q.then(
        () => undefined,
        (err: unknown) => err,
      );
      const watcher = pgjs();
      await waitFor('pg_sleep to run', async () => {
        const [{ n }] = (await watcher`SELECT count(*)::int AS n FROM pg_stat_activity WHERE query LIKE 'SELECT pg_sleep(10)%' AND state = 'active'`) as unknown as [{ n: number }];
        return n > 0;
      });
      q.cancel();
      const err = await result;
      expect(err).to.have.property('code', '57014');
      expect(performance.now() - started, 'cancel took too long').to.be.below(8000);
      const [row] = await sql`SELECT 1 AS one`;
      expect(row!.one).to.equal(1);
    });

    it('a CancelRequest with a wrong secret cancels nothing', async function () {
      const client = await pgClient();
      const { processID, secretKey } = client as unknown as CancelKey;
      const sleeping = client.query('SELECT pg_sleep(1) AS slept');
      const side = net.connect(rt.port, rt.host);
      await new Promise<void>((resolve) => side.once('connect', () => resolve()));
      side.end(serialize.cancel(processID, secretKey ^ 1));
      await new Promise<void>((resolve) => side.once('close', () => resolve()));
      const r = await sleeping;
      expect(r.rows).to.have.length(1);
    });
  });

  describe('a million rows, streamed', function () {
    const QUERY = "SELECT g AS id, 'row ' || g AS txt FROM generate_series(1, 1000000) g";

    function rssWatcher(): { peak: () => number; stop: () => void } {
      let peak = process.memoryUsage.rss();
      const timer = setInterval(() => (peak = Math.max(peak, process.memoryUsage.rss())), 20);
      return {
        peak: () => Math.max(peak, process.memoryUsage.rss()),
        stop: () => clearInterval(timer),
      };
    }

    it('pg-cursor: batches of 10,000, memory stays flat', async function () {
      const client = await pgClient();
      const baseline = process.memoryUsage.rss();
      const watch = rssWatcher();
      const cursor = client.query(new Cursor(QUERY));
      let rows = 0;
      let sum = 0;
      let batches = 0;
      try {
        for (;;) {
          const batch = (await cursor.read(10_000)) as { id: number; txt: string }[];
          if (batch.length === 0) break;
          batches++;
          for (const r of batch) {
            rows++;
            sum += r.id;
          }
          if (batch[batch.length - 1]!.txt !== `row ${batch[batch.length - 1]!.id}`) expect.fail('row text mismatch');
        }
      } finally {
        await cursor.close();
        watch.stop();
      }
      expect(rows).to.equal(1_000_000);
      expect(batches).to.equal(100);
      expect(sum).to.equal(500000500000);
      const growth = (watch.peak() - baseline) / MB;
      expect(growth, `RSS grew ${growth.toFixed(0)} MB while streaming`).to.be.below(200);
      expect((await client.query('SELECT 2 AS two')).rows[0].two).to.equal(2);
    });

    it('postgres.js: .cursor(10000), memory stays flat', async function () {
      const sql = pgjs();
      const baseline = process.memoryUsage.rss();
      const watch = rssWatcher();
      let rows = 0;
      let sum = 0;
      try {
        for await (const batch of sql.unsafe(QUERY).cursor(10_000)) {
          for (const r of batch) {
            rows++;
            sum += r.id as number;
          }
        }
      } finally {
        watch.stop();
      }
      expect(rows).to.equal(1_000_000);
      expect(sum).to.equal(500000500000);
      const growth = (watch.peak() - baseline) / MB;
      expect(growth, `RSS grew ${growth.toFixed(0)} MB while streaming`).to.be.below(200);
    });

    it('a client that stops reading a 300 MB result does not make the engine buffer it', async function () {
      // A raw protocol client: the engine must pause PostgreSQL rather than queue the result in memory.
      const socket = net.connect(rt.port, rt.host);
      await new Promise<void>((resolve, reject) => {
        socket.once('connect', () => resolve());
        socket.once('error', reject);
      });
      let received = 0;
      let tail: Buffer = Buffer.alloc(0);
      let readyCount = 0;
      let onReady: (() => void) | null = null;
      const frames = new FrameCounter((type) => {
        if (type === 0x5a) {
          readyCount++;
          onReady?.();
        }
      });
      socket.on('data', (chunk: Buffer) => {
        received += chunk.length;
        tail = chunk;
        frames.feed(chunk);
      });
      const ready = (n: number): Promise<void> =>
        new Promise((resolve) => {
          const check = (): void => {
            if (readyCount >= n) resolve();
          };
          onReady = check;
          check();
        });
      socket.write(serialize.startup({ user: 'postgres', database: 'postgres' }));
      await ready(1);
      const baseline = process.memoryUsage.rss();
      const watch = rssWatcher();
      try {
        socket.write(serialize.query("SELECT g, repeat('x', 300) FROM generate_series(1, 1000000) g"));
        // Read a little, then stop reading for a while: PostgreSQL keeps producing, someone must wait.
        await waitFor('the first rows', () => received > MB);
        socket.pause();
        // PostgreSQL must end up blocked writing to its socket (the engine stopped reading it), rather
        // than the engine reading on and queueing everything for the client.
        const direct = new pg.Client(directConnection(rt));
        await direct.connect();
        try {
          await waitFor('PostgreSQL to block on ClientWrite', async () => {
            const r = await direct.query(
              "SELECT count(*)::int AS n FROM pg_stat_activity WHERE wait_event = 'ClientWrite' AND query LIKE 'SELECT g, repeat%'",
            );
            return r.rows[0].n === 1;
          });
          // And stay blocked while the client does not read.
          await new Promise((r) => setTimeout(r, 1000));
          const still = await direct.query("SELECT wait_event FROM pg_stat_activity WHERE query LIKE 'SELECT g, repeat%' AND state = 'active'");
          expect(still.rows).to.deep.equal([{ wait_event: 'ClientWrite' }]);
        } finally {
          await direct.end();
        }
        const pausedGrowth = (watch.peak() - baseline) / MB;
        expect(pausedGrowth, `RSS grew ${pausedGrowth.toFixed(0)} MB while the client was not reading`).to.be.below(100);
        socket.resume();
        await ready(2);
      } finally {
        watch.stop();
        socket.end(serialize.end());
      }
      expect(frames.counts.get(0x44), 'DataRow messages').to.equal(1_000_000);
      expect(tail[tail.length - 1]).to.equal(0x49); // ReadyForQuery, idle
      const growth = (watch.peak() - baseline) / MB;
      expect(growth, `RSS grew ${growth.toFixed(0)} MB overall`).to.be.below(200);
    });
  });

  describe('the transactional example from the seed', function () {
    const STEPS = [
      'BEGIN',
      'CREATE TEMP TABLE pgx_test (id integer PRIMARY KEY, value text)',
      "INSERT INTO pgx_test VALUES (1, 'PGX works')",
      'SAVEPOINT before_update',
      "UPDATE pgx_test SET value = 'changed' WHERE id = 1",
      'ROLLBACK TO SAVEPOINT before_update',
      'SELECT value FROM pgx_test WHERE id = 1',
      'ROLLBACK',
      "SELECT to_regclass('pg_temp.pgx_test') AS reg",
    ];

    async function run(config: pg.ClientConfig): Promise<unknown[]> {
      const client = new pg.Client(config);
      await client.connect();
      try {
        const out: unknown[] = [];
        for (const step of STEPS) {
          const r = await client.query(step);
          out.push({ command: r.command, rowCount: r.rowCount, rows: r.rows });
        }
        return out;
      } finally {
        await client.end();
      }
    }

    it('gives the same results through the engine as directly', async function () {
      const engine = await run(rt.connection());
      const direct = await run(directConnection(rt));
      expect(engine).to.deep.equal(direct);
      expect(engine[6]).to.deep.equal({ command: 'SELECT', rowCount: 1, rows: [{ value: 'PGX works' }] });
      expect(engine[8]).to.deep.equal({ command: 'SELECT', rowCount: 1, rows: [{ reg: null }] });
    });
  });
});

/** Counts backend messages by type in a byte stream (headers only). */
class FrameCounter {
  readonly counts = new Map<number, number>();
  private skip = 0;
  private header: Buffer = Buffer.alloc(0);

  constructor(private readonly onFrame: (type: number) => void) {}

  feed(chunk: Buffer): void {
    let pos = 0;
    while (pos < chunk.length) {
      if (this.skip > 0) {
        const k = Math.min(this.skip, chunk.length - pos);
        this.skip -= k;
        pos += k;
        continue;
      }
      const need = 5 - this.header.length;
      const take = chunk.subarray(pos, pos + need);
      this.header = Buffer.concat([this.header, take]);
      pos += take.length;
      if (this.header.length < 5) return;
      const type = this.header[0]!;
      this.skip = this.header.readInt32BE(1) - 4;
      this.header = Buffer.alloc(0);
      this.counts.set(type, (this.counts.get(type) ?? 0) + 1);
      this.onFrame(type);
    }
  }
}
