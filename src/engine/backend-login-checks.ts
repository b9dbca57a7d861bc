// One backend's login-check phases (login-check.ts says what is checked and why): the login
// baseline's answer, read off after the login ahead of the first client's, and each hand-out's check
// (the snapshot, then the full check when it moved), behind DISCARD ALL in the same write when the
// last session left its state in the backend. server.ts owns the socket and runs these as phases.

import { serialize } from 'pg-protocol';
import { Msg } from '../wire/codes.js';
import { FULL_CHECK, FUNCTION_RESULT_AT, SNAPSHOT, columnByte, copyColumn, valueEquals } from './login-check.js';

export type PhaseHandler = (type: number, frame: Buffer) => 'more' | 'done';

/** What the checks need of the connection: its phases, its socket's writes, its parameters. */
export interface PhaseRunner {
  /** Reads whole messages with `handler` until it answers 'done' (then `done`) or throws or the socket fails (then `fail`). */
  runPhase(handler: PhaseHandler, done: () => void, fail: (err: Error) => void): void;
  /** Writes `frame` to PostgreSQL. */
  write(frame: Buffer): void;
  /** Keeps a ParameterStatus PostgreSQL sent. */
  recordParameter(frame: Buffer): void;
  closed(): boolean;
}

export class LoginChecks {
  /**
   * What the login's defaults came from: LOGIN_BASELINE's DataRows as PostgreSQL sent them, end to end
   * (see login-check.ts); null: unknown (the query failed), and the backend is never handed to
   * another client.
   */
  private baseline: Buffer | null = null;
  private rows: Buffer[] | null = null;
  /**
   * The login baseline's answer is still to come: the backend was handed to its first client at the
   * login's ReadyForQuery, and the baseline's messages are read off before anything reaches that
   * client (PostgreSQL answers in order, so they come first).
   */
  pending = false;
  /** Settles when the baseline's answer has been read (or the backend failed meanwhile). */
  private read: Promise<void> = Promise.resolve();
  private settle: () => void = () => {};
  /**
   * The last session's state is still in the backend: the reset (DISCARD ALL) goes out with the next
   * login check, in the same write, so a reuse costs one round trip (see pool.ts).
   */
  dirty = false;
  /** The snapshot column of the last full check that passed without a connection limit; null: none. */
  private verifiedSnapshot: Buffer | null = null;

  /** The login's ReadyForQuery came, and the baseline query went out behind the startup packet. */
  expectBaseline(): void {
    this.pending = true;
    this.rows = [];
    this.read = new Promise((settle) => (this.settle = settle));
  }

  /**
   * The baseline read before the login, where the database was made (ports.ts Route.loginBaselineRows): no
   * query of the backend's own. Rows as old as or older than the login's can only make the first
   * hand-out's check fail (the backend is replaced), never pass one that should not.
   */
  adopt(rows: Buffer): void {
    this.baseline = rows;
  }

  /** The baseline query's answer: its rows are kept; an error leaves the backend unpoolable. */
  onBaseline(type: number, frame: Buffer): 'more' | 'done' {
    if (type === Msg.DataRow) this.rows?.push(Buffer.from(frame));
    else if (type === Msg.ErrorResponse) this.rows = null;
    else if (type === Msg.ReadyForQuery) {
      this.baseline = this.rows === null ? null : Buffer.concat(this.rows);
      this.rows = null;
      this.settled();
      return 'done';
    }
    return 'more';
  }

  /** The baseline's answer was read, or will never come (the backend failed). */
  settled(): void {
    this.pending = false;
    this.settle();
  }

  /** False when this backend must not serve another client: its login could not be checked. */
  get poolable(): boolean {
    return this.baseline !== null || this.pending;
  }

  /**
   * Whether a fresh login now would give what this backend has (see login-check.ts): `done(false)`
   * when it would not, or could not be told; the caller then closes it. A plain callback, and the
   * common case (the snapshot did not move) runs on handlers made once per backend: a hand-out makes
   * no promise and no closure here.
   */
  check(conn: PhaseRunner, done: (ok: boolean) => void): void {
    // Its first client left before the baseline's answer came (a connect and Terminate).
    if (this.pending) return void this.read.then(() => this.check(conn, done));
    if (this.baseline === null || conn.closed()) return done(false);
    this.conn = conn;
    this.done = done;
    this.verdict = false;
    // A dirty backend answers DISCARD ALL first: its messages, up to its ReadyForQuery, are the reset's.
    this.resetting = this.dirty;
    this.resetFailed = false;
    if (this.verifiedSnapshot === null) return this.fullCheck();
    conn.runPhase(this.onSnapshotFrame, this.onSnapshotDone, this.onFailed);
    this.send(conn, SNAPSHOT, RESET_AND_SNAPSHOT);
  }

  // The check in progress: its connection, whom to tell, and what its answer said so far.
  private conn: PhaseRunner | null = null;
  private done: ((ok: boolean) => void) | null = null;
  private verdict = false;
  private resetting = false;
  private resetFailed = false;

  /** Tells the caller, once; the check holds on to nothing afterwards. */
  private finish(ok: boolean): void {
    const done = this.done;
    if (done === null) return;
    this.conn = null;
    this.done = null;
    done(ok);
  }

  /** A message of DISCARD ALL's answer, which comes ahead of the check's when the backend was dirty. */
  private reset(type: number, frame: Buffer): 'more' {
    if (type === Msg.ParameterStatus) this.conn!.recordParameter(frame);
    else if (type === Msg.ErrorResponse) this.resetFailed = true;
    else if (type === Msg.ReadyForQuery) this.resetting = false;
    return 'more';
  }

  private readonly onSnapshotFrame = (type: number, frame: Buffer): 'more' | 'done' => {
    if (this.resetting) return this.reset(type, frame);
    if (type === Msg.FunctionCallResponse) this.verdict = valueEquals(frame, FUNCTION_RESULT_AT, this.verifiedSnapshot!);
    else if (type === Msg.ReadyForQuery) return 'done';
    return 'more';
  };

  private readonly onSnapshotDone = (): void => {
    if (this.resetFailed) this.finish(false);
    else if (this.verdict) this.finish(true);
    else this.fullCheck();
  };

  private readonly onFailed = (): void => this.finish(false);

  /** The snapshot moved (or no full check has passed yet): the whole check, as login-check.ts says. */
  private fullCheck(): void {
    const conn = this.conn!;
    const check = new FullCheck(this.baseline!);
    conn.runPhase(
      (type, frame) => {
        if (this.resetting) return this.reset(type, frame);
        if (type === Msg.ReadyForQuery) return 'done';
        check.read(type, frame);
        return 'more';
      },
      () => {
        const passed = check.passed() && !this.resetFailed;
        this.verifiedSnapshot = passed ? check.reusableSnapshot : null;
        this.finish(passed);
      },
      this.onFailed,
    );
    this.send(conn, FULL_CHECK, RESET_AND_FULL_CHECK);
  }

  /**
   * Writes a check, or the same check behind DISCARD ALL (`withReset`, made once: one buffer, one
   * plain write, no cork) when the backend is dirty.
   */
  private send(conn: PhaseRunner, check: Buffer, withReset: Buffer): void {
    if (!this.dirty) return conn.write(check);
    this.dirty = false;
    conn.write(withReset);
  }
}

/**
 * FULL_CHECK's answer, message by message: the verdict row of its first statement, then its second
 * statement's rows compared in order with the login's (`baseline`, the same query's rows then).
 */
class FullCheck {
  private verdict = -1;
  /** The verdict row's snapshot, when no connection limit applies (the fast path may then rely on it). */
  reusableSnapshot: Buffer | null = null;
  /** Statements answered so far (CommandComplete). */
  private completed = 0;
  /** How much of `baseline` the rows so far matched; -1 once one did not. */
  private matched = 0;

  constructor(private readonly baseline: Buffer) {}

  read(type: number, frame: Buffer): void {
    if (type === Msg.CommandComplete) this.completed++;
    else if (type === Msg.ErrorResponse) this.matched = -1;
    else if (type !== Msg.DataRow) return;
    else if (this.completed === 0) {
      this.verdict = columnByte(frame, 0);
      if (this.verdict === Y) this.reusableSnapshot = copyColumn(frame, 1);
    } else if (this.matched >= 0) {
      const end = this.matched + frame.length;
      this.matched = end <= this.baseline.length && this.baseline.compare(frame, 0, frame.length, this.matched, end) === 0 ? end : -1;
    }
  }

  /** A fresh login would pass (y or c), the role is the same, and the settings rows are the login's. */
  passed(): boolean {
    return (this.verdict === Y || this.verdict === C) && this.completed === 2 && this.matched === this.baseline.length;
  }
}

const DISCARD_ALL = serialize.query('DISCARD ALL');
const RESET_AND_SNAPSHOT = Buffer.concat([DISCARD_ALL, SNAPSHOT]);
const RESET_AND_FULL_CHECK = Buffer.concat([DISCARD_ALL, FULL_CHECK]);
const Y = 0x79;
const C = 0x63;
