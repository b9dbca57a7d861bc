// Two-session behaviour scenarios, each run twice: against the runtime's PostgreSQL 18 directly (its
// private Unix socket) and through the engine. Each target gets its own database minted from one
// sealed template by connecting to a fresh `tdb_<template>__<token>` name, so both start from the same
// content. A scenario drives real clients (node-postgres, postgres.js) and records what they observe
// (rows, errors, notices, notifications, ParameterStatus values) in a plain transcript; it asserts the
// semantics it expects as it goes, on each target, and compareOnBoth() then requires the two
// transcripts to be identical. Nothing a target assigns by itself (backend pids, OIDs, database
// names) goes into a transcript.

import { expect } from 'chai';
import type net from 'node:net';
import pg from 'pg';
import postgres from 'postgres';
import { directConnection, waitFor } from '../helpers/commands.js';
import { queryOnce } from '../helpers/pg-once.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

export type TargetName = 'direct' | 'pgx';

export interface Settings {
  host: string;
  port: number;
  user: string;
  database: string;
}

/** One line of a transcript: JSON-like data, compared with deep equality. */
export type Entry = Record<string, unknown>;

export interface Scenario {
  name: string;
  run(t: Run): Promise<void>;
}

/** What a client saw of an error: PostgreSQL's fields, or the client's own message. */
export interface ErrorSeen {
  severity?: string;
  code?: string;
  message: string;
  detail?: string;
  hint?: string;
  position?: string;
  where?: string;
  schema?: string;
  table?: string;
  column?: string;
  constraint?: string;
  routine?: string;
  /** Set for errors raised by the client library itself (no SQLSTATE). */
  client?: true;
}

export interface Outcome {
  command?: string | null;
  rowCount?: number | null;
  fields?: { name: string; dataTypeID: number; format: string }[];
  rows?: unknown[];
  error?: ErrorSeen;
  notices?: ErrorSeen[];
  parameterStatus?: [string, string][];
}

export interface NotificationSeen {
  channel: string;
  payload: string;
  /** The session whose backend sent it (by pg_backend_pid), or null for one this run does not know. */
  from: string | null;
}

/** Pids and transaction ids (a deadlock's detail) differ between runs and targets. */
function normaliseDigits(text: string): string {
  return text.replace(/\b(process|transaction|PID) \d+/gi, '$1 N');
}

export function errorSeen(err: unknown): ErrorSeen {
  if (err instanceof pg.DatabaseError || (typeof err === 'object' && err !== null && 'severity' in err && 'code' in err)) {
    const e = err as pg.DatabaseError;
    const seen: ErrorSeen = { message: e.message };
    if (e.severity !== undefined) seen.severity = e.severity;
    if (e.code !== undefined) seen.code = e.code;
    if (e.detail !== undefined) seen.detail = normaliseDigits(e.detail);
    if (e.hint !== undefined) seen.hint = e.hint;
    if (e.position !== undefined) seen.position = e.position;
    if (e.where !== undefined) seen.where = e.where;
    if (e.schema !== undefined) seen.schema = e.schema;
    if (e.table !== undefined) seen.table = e.table;
    if (e.column !== undefined) seen.column = e.column;
    if (e.constraint !== undefined) seen.constraint = e.constraint;
    if (e.routine !== undefined) seen.routine = e.routine;
    return seen;
  }
  return { message: err instanceof Error ? err.message : String(err), client: true };
}

/** postgres.js errors and notices carry PostgreSQL's fields under their protocol letters' names. */
function pgjsErrorSeen(err: unknown): ErrorSeen {
  if (err instanceof postgres.PostgresError) {
    const seen: ErrorSeen = { severity: err.severity, code: err.code, message: err.message };
    if (err.detail !== undefined) seen.detail = normaliseDigits(err.detail);
    if (err.hint !== undefined) seen.hint = err.hint;
    if (err.position !== undefined) seen.position = err.position;
    if (err.where !== undefined) seen.where = err.where;
    if (err.routine !== undefined) seen.routine = err.routine;
    return seen;
  }
  const code = typeof err === 'object' && err !== null && 'code' in err ? String((err as { code: unknown }).code) : undefined;
  // postgres.js names the address it was connected to, which differs between the targets.
  const message = (err instanceof Error ? err.message : String(err)).replace(/ (\S+:\d+|\S+\/\.s\.PGSQL\.\d+)$/, ' <address>');
  return { message, client: true, ...(code === undefined ? {} : { code }) };
}

function noticeSeen(n: postgres.Notice): ErrorSeen {
  const seen: ErrorSeen = { severity: String(n.severity), code: String(n.code), message: String(n.message) };
  if (n.detail !== undefined) seen.detail = normaliseDigits(String(n.detail));
  if (n.hint !== undefined) seen.hint = String(n.hint);
  return seen;
}

/** A node-postgres session that keeps what arrives between the scenario's looks at it. */
export class Session {
  readonly client: pg.Client;
  /** ParameterStatus values in the order the client got them at connect. */
  startupParams: [string, string][] = [];
  private notices: ErrorSeen[] = [];
  private params: [string, string][] = [];
  private notifications: pg.Notification[] = [];
  /** 'error' and 'end' events of the client, in order. */
  private events: Entry[] = [];
  ended = false;
  private backendPid: number | null = null;

  constructor(
    readonly name: string,
    private readonly owner: Run,
    config: pg.ClientConfig,
  ) {
    this.client = new pg.Client(config);
    this.client.on('notice', (n) => this.notices.push(errorSeen(n)));
    this.client.on('notification', (n) => this.notifications.push(n));
    this.client.on('error', (err) => this.events.push({ error: errorSeen(err) }));
    this.client.on('end', () => {
      this.ended = true;
      this.events.push({ end: true });
    });
    const connection = this.client.connection as unknown as NodeJS.EventEmitter;
    connection.on('parameterStatus', (m: { parameterName: string; parameterValue: string }) => {
      this.params.push([m.parameterName, m.parameterValue]);
    });
  }

  /** Connects, and asks the backend's pid (unrecorded) while nothing else can be in flight. */
  async connect(): Promise<void> {
    await this.client.connect();
    this.startupParams = this.params.splice(0);
    const r = await this.client.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
    this.backendPid = r.rows[0]!.pid;
    this.notices = [];
    this.params = [];
  }

  /** The backend's pid: pg_backend_pid(), the real one through the engine too. */
  pid(): number {
    return this.backendPid ?? 0;
  }

  /** Runs a statement (text, or a pg query config) and returns what the client saw, unrecorded. */
  async run(query: string | pg.QueryConfig, values?: unknown[]): Promise<Outcome> {
    let outcome: Outcome;
    try {
      const r = await (typeof query === 'string' ? this.client.query(query, values) : this.client.query(query));
      outcome = {
        command: r.command,
        rowCount: r.rowCount,
        fields: r.fields.map((f) => ({ name: f.name, dataTypeID: f.dataTypeID, format: f.format })),
        rows: r.rows,
      };
    } catch (err) {
      outcome = { error: errorSeen(err) };
    }
    // Notices and ParameterStatus arrive before the response that ends the statement.
    if (this.notices.length > 0) outcome.notices = this.notices.splice(0);
    if (this.params.length > 0) outcome.parameterStatus = this.params.splice(0);
    return outcome;
  }

  /** Runs a statement and records it. */
  async q(query: string | pg.QueryConfig, values?: unknown[]): Promise<Outcome> {
    return this.settle(query, this.run(query, values));
  }

  /** Records a statement started earlier with run() (one that had to wait for another session). */
  async settle(query: string | pg.QueryConfig, pending: Promise<Outcome>): Promise<Outcome> {
    const outcome = await pending;
    this.owner.record({ session: this.name, sql: typeof query === 'string' ? query : query.text, ...(typeof query === 'string' ? {} : { name: query.name ?? null }), outcome });
    return outcome;
  }

  /** Waits until `n` notifications have come, then records and returns them. */
  async notified(n: number): Promise<NotificationSeen[]> {
    await waitFor(`${n} notification(s) on session ${this.name}`, () => this.notifications.length >= n);
    return this.takeNotifications();
  }

  /** Records and returns the notifications received so far (possibly none). */
  takeNotifications(): NotificationSeen[] {
    const seen: NotificationSeen[] = [];
    for (const n of this.notifications.splice(0)) {
      seen.push({ channel: n.channel, payload: n.payload ?? '', from: this.owner.sessionByPid(n.processId) });
    }
    this.owner.record({ session: this.name, notifications: seen });
    return seen;
  }

  /** Records and returns the client's 'error' and 'end' events so far. */
  takeEvents(): Entry[] {
    const events = this.events.splice(0);
    this.owner.record({ session: this.name, events });
    return events;
  }

  /** Waits for the client to see its connection end (the server closed it). */
  async waitEnded(): Promise<void> {
    await waitFor(`session ${this.name} to end`, () => this.ended);
  }

  /** Cuts the connection as a crashed client would: the socket is destroyed, no Terminate. */
  kill(): void {
    (this.client.connection as unknown as { stream: net.Socket }).stream.destroy();
  }

  async end(): Promise<void> {
    if (this.ended) return;
    await this.client.end().catch(() => undefined);
    this.ended = true;
  }
}

/** A postgres.js client with one connection, recording notices and ParameterStatus changes. */
export class PgjsSession {
  readonly sql: postgres.Sql;
  private notices: ErrorSeen[] = [];
  private params: [string, string][] = [];

  constructor(
    readonly name: string,
    private readonly owner: Run,
    settings: Settings,
    options: postgres.Options<Record<string, postgres.PostgresType>>,
  ) {
    this.sql = postgres({
      ...settings,
      max: 1,
      ...options,
      onnotice: (n) => this.notices.push(noticeSeen(n)),
      onparameter: (key: string, value: unknown) => this.params.push([key, String(value)]),
    });
  }

  /** Runs a query built from the sql tag and records what postgres.js returned or threw. */
  async q(label: string, query: () => Promise<readonly unknown[]>): Promise<Outcome> {
    let outcome: Outcome;
    try {
      const rows = await query();
      outcome = { rows: [...rows] };
    } catch (err) {
      outcome = { error: pgjsErrorSeen(err) };
    }
    if (this.notices.length > 0) outcome.notices = this.notices.splice(0);
    if (this.params.length > 0) outcome.parameterStatus = this.params.splice(0);
    this.owner.record({ session: this.name, sql: label, outcome });
    return outcome;
  }

  /** ParameterStatus values postgres.js holds (sql.parameters), recorded. */
  parameters(): Record<string, string> {
    const seen = { ...(this.sql as unknown as { parameters: Record<string, string> }).parameters };
    this.owner.record({ session: this.name, parameters: seen });
    return seen;
  }

  end(): Promise<void> {
    return this.sql.end({ timeout: 5 });
  }
}

/** One scenario on one target: its sessions, an unrecorded observer, and the transcript. */
export class Run {
  readonly transcript: Entry[] = [];
  private readonly sessions: Session[] = [];
  private readonly pgjsSessions: PgjsSession[] = [];
  private observerClient: pg.Client | null = null;

  constructor(
    readonly target: TargetName,
    /** The scenario's database on this target. */
    readonly database: string,
    /** Client settings for this target and database. */
    readonly settings: Settings,
    /** The same database straight on PostgreSQL, for the observer. */
    private readonly direct: Settings,
  ) {}

  record(entry: Entry): void {
    this.transcript.push(entry);
  }

  /** Records a value the scenario computed (a comparison, a digest). */
  note(what: string, value: unknown): void {
    this.record({ note: what, value });
  }

  /** A connected node-postgres session on this target. */
  async session(name: string, config: Partial<pg.ClientConfig> = {}): Promise<Session> {
    const s = new Session(name, this, { ...this.settings, ...config });
    this.sessions.push(s);
    await s.connect();
    return s;
  }

  /** A postgres.js client on this target (it connects on its first query). */
  pgjs(name: string, options: postgres.Options<Record<string, postgres.PostgresType>> = {}): PgjsSession {
    const s = new PgjsSession(name, this, this.settings, options);
    this.pgjsSessions.push(s);
    return s;
  }

  /** Which of this run's sessions has backend pid `pid`. */
  sessionByPid(pid: number): string | null {
    // Through the engine a later session may hold an ended one's backend: the live one sent it.
    const live = this.sessions.find((s) => !s.ended && s.pid() === pid);
    return (live ?? this.sessions.find((s) => s.pid() === pid))?.name ?? null;
  }

  /**
   * A query on a separate direct connection to the scenario's database, never recorded: for waiting
   * until PostgreSQL is in some state (a session blocked on a lock, a backend gone).
   */
  async observe<R extends pg.QueryResultRow>(sql: string, values: unknown[] = []): Promise<R[]> {
    if (this.observerClient === null) {
      const client = new pg.Client({ ...this.direct, application_name: 'behaviour_observer' });
      client.on('error', () => {});
      await client.connect();
      this.observerClient = client;
    }
    return (await this.observerClient.query<R>(sql, values)).rows;
  }

  /** Waits until `session`'s backend waits for a lock. */
  async waitUntilBlocked(session: Session): Promise<void> {
    const pid = session.pid();
    await waitFor(`session ${session.name} to wait for a lock`, async () => {
      const rows = await this.observe<{ w: string | null }>('SELECT wait_event_type AS w FROM pg_stat_activity WHERE pid = $1', [pid]);
      return rows[0]?.w === 'Lock';
    });
  }

  /** Waits until no backend of the scenario's database runs with this application_name. */
  async waitUntilGone(applicationName: string): Promise<void> {
    await waitFor(`sessions named ${applicationName} to end`, async () => {
      const rows = await this.observe<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE datname = $1 AND application_name = $2', [
        this.database,
        applicationName,
      ]);
      return rows[0]?.n === 0;
    });
  }

  /**
   * Ends a session cleanly and waits until PostgreSQL is done with it: directly, its backend has
   * exited; through the engine, its backend sits idle in the pool (reset with DISCARD ALL when it is
   * handed out next), so the next session with the same startup parameters gets it (see reuses()), or,
   * when the session left state DISCARD ALL cannot undo (src/engine/residue.ts), the engine closed it.
   */
  async leave(session: Session): Promise<void> {
    await session.end();
    const pid = session.pid();
    await waitFor(`the backend of session ${session.name} to be ${this.target === 'pgx' ? 'back in the pool or closed' : 'gone'}`, async () => {
      const rows = await this.observe<{ state: string | null; query: string }>('SELECT state, query FROM pg_stat_activity WHERE pid = $1', [pid]);
      if (rows.length === 0) return true;
      return this.target === 'pgx' && rows[0]?.state === 'idle';
    });
  }

  /**
   * Through the engine, `next` must have been handed `previous`'s backend: the scenario then checks
   * what a reused backend shows. Directly every session has its own backend. Not in the transcript.
   */
  reuses(next: Session, previous: Session): void {
    if (this.target === 'pgx') expect(next.pid(), `session ${next.name} should reuse the backend ${previous.name} left`).to.equal(previous.pid());
  }

  /**
   * Through the engine, `next` must have a new backend: `previous` left state DISCARD ALL cannot
   * undo, so the engine closed its backend instead of pooling it. Not in the transcript.
   */
  freshBackend(next: Session, previous: Session): void {
    if (this.target === 'pgx') expect(next.pid(), `session ${next.name} must not get the backend ${previous.name} left`).to.not.equal(previous.pid());
  }

  /** Waits until nobody holds advisory lock `key` in the scenario's database. */
  async waitUntilAdvisoryFree(key: number): Promise<void> {
    await waitFor(`advisory lock ${key} to be released`, async () => {
      const rows = await this.observe<{ n: number }>(
        "SELECT count(*)::int AS n FROM pg_locks WHERE locktype = 'advisory' AND objid = $1 AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
        [key],
      );
      return rows[0]?.n === 0;
    });
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.sessions.map((s) => s.end()), ...this.pgjsSessions.map((s) => s.end())]);
    await this.observerClient?.end().catch(() => undefined);
  }
}

export const TEMPLATE = 'tpl_behave';

/** The template every scenario's databases are minted from. */
const TEMPLATE_SQL = `
  CREATE TABLE items (id int PRIMARY KEY, name text NOT NULL, qty int NOT NULL);
  INSERT INTO items SELECT g, 'item ' || g, g * 10 FROM generate_series(1, 10) g;
  CREATE TABLE doctors (name text PRIMARY KEY, on_call bool NOT NULL);
  INSERT INTO doctors VALUES ('alice', true), ('bob', true);
  CREATE TABLE jobs (id int PRIMARY KEY, state text NOT NULL DEFAULT 'queued');
  INSERT INTO jobs SELECT g FROM generate_series(1, 5) g;
  CREATE TABLE samples (
    id int PRIMARY KEY, label text, amount numeric(14, 3), at timestamptz, day date, blob bytea,
    tags text[], doc jsonb, flag bool, ratio float8, span interval, uid uuid
  );
  INSERT INTO samples
  SELECT g,
         CASE WHEN g % 7 = 0 THEN NULL ELSE 'sample ' || g || ' ☃ ü' || repeat('x', g % 50) END,
         (g * 1234.567)::numeric(14, 3) * CASE WHEN g % 2 = 0 THEN -1 ELSE 1 END,
         timestamptz '2024-01-02 03:04:05.678+00' + g * interval '1 hour 7 seconds',
         date '2020-02-29' + g,
         CASE WHEN g % 5 = 0 THEN NULL ELSE decode(md5(g::text), 'hex') || '\\x00ff'::bytea END,
         ARRAY['t' || g, NULL, 'quote"and\\\\back'],
         jsonb_build_object('g', g, 'even', g % 2 = 0, 'nested', jsonb_build_array(g, 'x')),
         g % 3 = 0,
         CASE WHEN g % 11 = 0 THEN 'NaN'::float8 ELSE g / 7.0 END,
         g * interval '1 day 2 minutes',
         md5('u' || g)::uuid
  FROM generate_series(1, 3000) g;
  CREATE TABLE samples_in (LIKE samples);
`;

/** A role for SET SESSION AUTHORIZATION and SET ROLE; roles are cluster-wide. */
export const PLAIN_ROLE = 'behave_plain';

export interface Behaviour {
  rt: TestRuntime;
  /** Runs a scenario on both targets and returns the two transcripts. */
  runOnBoth(scenario: Scenario): Promise<{ direct: Entry[]; pgx: Entry[] }>;
  /** runOnBoth, then requires the transcripts to be identical. */
  compareOnBoth(scenario: Scenario): Promise<{ direct: Entry[]; pgx: Entry[] }>;
  stop(): Promise<void>;
}

let counter = 0;

function token(target: TargetName): string {
  counter += 1;
  return `${target}_${process.pid}_${counter}_${Math.floor(Math.random() * 1e6)}`;
}

/**
 * Starts a runtime, builds and seals the template through the engine. The grace period is long so
 * the janitor never drops a scenario's database while it runs; each run drops its own at the end.
 */
export async function startBehaviour(): Promise<Behaviour> {
  const rt = await startTestRuntime({ grace: 600 });
  try {
    const engineUrl = (database: string): string => `postgresql://postgres@${rt.host}:${rt.port}/${database}`;
    await queryOnce(engineUrl('postgres'), `CREATE DATABASE ${TEMPLATE}`);
    await queryOnce(engineUrl(TEMPLATE), TEMPLATE_SQL);
    await queryOnce(engineUrl('postgres'), `SELECT pgx_seal_template('${TEMPLATE}')`);
    await queryOnce(engineUrl('postgres'), `CREATE ROLE ${PLAIN_ROLE} LOGIN`);
  } catch (err) {
    await rt.stop();
    throw err;
  }

  const runOn = async (target: TargetName, scenario: Scenario): Promise<Entry[]> => {
    const database = `tdb_${TEMPLATE}__${token(target)}`;
    const engine = rt.connection(database);
    const direct = directConnection(rt, database);
    if (target === 'direct') {
      // Minted through the engine like the other, then used only on PostgreSQL's own socket.
      await queryOnce(`postgresql://postgres@${rt.host}:${rt.port}/${database}`, 'SELECT 1');
    }
    // For 'pgx' the scenario's first session mints the database by connecting to it.
    const run = new Run(target, database, target === 'direct' ? direct : engine, direct);
    try {
      await scenario.run(run);
    } catch (err) {
      if (err instanceof Error) err.message = `[${target}] ${err.message}`;
      throw err;
    } finally {
      await run.close();
      await queryOnce(`postgresql://postgres@${rt.host}:${rt.port}/postgres`, `SELECT pgx_drop_database('${database}')`).catch(() => undefined);
    }
    return run.transcript;
  };

  const runOnBoth = async (scenario: Scenario): Promise<{ direct: Entry[]; pgx: Entry[] }> => {
    const direct = await runOn('direct', scenario);
    const pgx = await runOn('pgx', scenario);
    return { direct, pgx };
  };

  return {
    rt,
    runOnBoth,
    async compareOnBoth(scenario) {
      const both = await runOnBoth(scenario);
      if (process.env.PGX_BEHAVIOUR_DUMP) console.log(JSON.stringify({ scenario: scenario.name, ...both }, null, 1));
      expect(both.pgx, `${scenario.name}: what clients saw through the engine differs from direct PostgreSQL`).to.deep.equal(both.direct);
      return both;
    },
    stop: () => rt.stop(),
  };
}

/** The outcome's error SQLSTATE, or 'ok'. */
/** A mocha suite that runs each scenario on both targets and compares the transcripts. */
export function describeScenarios(title: string, scenarios: Scenario[]): void {
  describe(`behaviour: ${title}, direct and through the engine`, function () {
    this.timeout(120_000);
    let h: Behaviour;

    before(async function () {
      h = await startBehaviour();
    });

    after(async function () {
      await h?.stop();
    });

    for (const scenario of scenarios) {
      it(`${scenario.name}: same semantics and transcript on both targets`, async function () {
        await h.compareOnBoth(scenario);
      });
    }
  });
}

export function code(o: Outcome): string {
  return o.error ? (o.error.code ?? `client: ${o.error.message}`) : 'ok';
}

/** The outcome's rows, failing with its error if it has one. */
export function rows(o: Outcome): unknown[] {
  if (o.error) throw new Error(`expected rows, got error ${o.error.code ?? ''} ${o.error.message}`);
  return o.rows ?? [];
}
