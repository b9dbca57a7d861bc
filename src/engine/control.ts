// SQL control functions (`SELECT pgx_seal_template('t')` and the rest), answered by the engine. The
// engine never writes a response itself: it rewrites what PostgreSQL receives so that PostgreSQL
// produces every response message, in order, and the transaction state stays PostgreSQL's own.
//
// Simple protocol: a Query that is nothing but control calls is held while the calls run, then sent
// on as `SELECT E'<result>'::text AS "<column>"` per call, and, for a call that failed, a DO block
// that raises its SQLSTATE, message, detail and hint (so it aborts a transaction block as a failing
// function would). Calls after a failure are not made: PostgreSQL would not have reached them.
//
// Extended protocol: a Parse of a control call becomes `SELECT $1::text AS "<column>"` with all its
// N parameters declared text (one, if the call has none); a Bind of that statement is held while the
// call runs with the Bind's values, then sent on with the result as $1. A failed call becomes a
// Close + Parse + Bind of an engine-owned statement holding the DO block, bound to the client's
// portal, so the error comes at the client's Execute; the engine swallows the CloseComplete and
// ParseComplete those extra messages earn.
//
// The ErrorResponse such a DO block produces carries a PL/pgSQL context ("inline_code_block line 1
// at RAISE") and a pl_exec.c location that would only confuse: the engine rewrites that one
// ErrorResponse without them.
//
// Which SQL is a call, and the SQL sent instead, are in control-sql.ts; the functions themselves in
// control-functions.ts.

import { asPgxError } from '../errors.js';
import type { Logger } from '../log.js';
import { Msg } from '../wire/codes.js';
import { errorResponse, parseErrorFields } from '../wire/error-response.js';
import {
  bindMessage,
  closeMessage,
  parseMessage,
  queryMessage,
  readBind,
  readClose,
  readParse,
  statementName,
  type BindMessage,
} from '../wire/extended.js';
import { Verdict } from '../wire/frame.js';
import { queryText } from '../wire/frontend.js';
import { CONTROL_NAMES } from './control-functions.js';
import type { Caller, ControlFunctions } from './ports.js';
import { mayLeaveResidue } from './residue.js';

import {
  identifier,
  mentionsControl,
  planQuery,
  raiseStatement,
  resultSelect,
  toRaise,
  UNDEFINED_CONTROL,
  UNDEFINED_FUNCTION,
  unread,
  type ControlCall,
  type Raise,
} from './control-sql.js';

export { mentionsControl, planQuery, raiseStatement, recognize, type ControlCall, type QueryPlan, type Raise } from './control-sql.js';

const TEXT_OID = 25;
const PARSE_COMPLETE = 0x31; // '1'
const CLOSE_COMPLETE = 0x33; // '3'

/** The statement the engine prepares (and re-prepares) to raise a failed call's error at Execute. */
const ERROR_STATEMENT = 'pgx_control_error';

const ABORTED: Raise = { code: '25P02', message: 'current transaction is aborted, commands ignored until end of transaction block' };

// ---- the session's bookkeeping ----

/** A prepared statement that is a control call, as the client prepared it. */
interface Prepared {
  /** Null: a statement that uses a control function out of place; each Bind of it is refused. */
  call: ControlCall | null;
  refused?: Raise;
  /** Parameters the client believes the statement has (N). */
  clientParams: number;
  /** Parameters PostgreSQL's statement has: N, or 1 when N is 0 (the result needs a slot). */
  declared: number;
}

/** A client message held back while its calls run. */
export type Held =
  | { kind: 'query'; calls: ControlCall[]; aborted: boolean }
  /** The statements `before` go on as sent; the one after them is refused. */
  | { kind: 'misplaced'; before: string; refused: Raise }
  | { kind: 'bind'; bind: BindMessage; prepared: Prepared; aborted: boolean };

export interface Answer {
  held: Held;
  results: string[];
  /** The first call that failed; the calls after it were not made. */
  error: Raise | null;
}

/**
 * An error response the engine is waiting for, to rewrite it, and in the extended protocol the
 * completions of its own Close and Parse, to swallow them. Positions are counted because the
 * responses carry nothing to match them by.
 */
interface Expected {
  /** ReadyForQuery messages due before the segment (up to a Sync or Query) that holds ours. */
  rfqAhead: number;
  /** ParseComplete/CloseComplete due to the client's own messages, in that segment, before ours. */
  completesAhead: number;
  /** Our own completions still to swallow (2 for Close + Parse, 0 in the simple protocol). */
  swallow: number;
  /**
   * The error our statement raises, to rewrite without its PL/pgSQL context; or null for SQL sent on
   * unread (over 1 MiB, or not understood), whose 42883 for a control function becomes 0A000.
   */
  raise: Raise | null;
}

/** Per client session: prepared control statements, and answers the engine expects to rewrite. */
export class ControlSession {
  /** The session sent SQL that may leave backend state DISCARD ALL cannot undo (residue.ts). */
  residue = false;
  private readonly statements = new Map<string, Prepared>();
  private readonly expected: Expected[] = [];
  /** Parse and Close messages sent since the last Sync: each earns a completion unless an error skips it. */
  private sentInSegment = 0;
  /** ParseComplete and CloseComplete received since the last ReadyForQuery. */
  private receivedInHead = 0;
  /** Set by clientFrame when it returns DropAndPause; the pump takes it at once. */
  private work: Buffer | Held | null = null;
  /** Set by backendFrame when it returns DropAndPause. */
  private backendWork: Buffer | null = null;

  constructor(
    private readonly port: ControlFunctions,
    private readonly caller: Caller,
    private readonly logger: Logger,
  ) {}

  /** Binds and Closes need reading: some prepared statement is a control call. */
  get tracksStatements(): boolean {
    return this.statements.size > 0;
  }

  /** ParseComplete, CloseComplete and ErrorResponse need reading whole: an answer is to be rewritten. */
  get expecting(): boolean {
    return this.expected.length > 0;
  }

  /**
   * A client message the pump forwarded unread: Sync, FunctionCall, Close, or a Query or Parse too
   * large to read (over 1 MiB). `inFlight`: ReadyForQuery messages PostgreSQL owes, counting a Query's own.
   */
  clientNote(type: number, inFlight: number): void {
    if (type === Msg.Sync) this.sentInSegment = 0;
    else if (type === Msg.FunctionCall) {
      this.sentInSegment = 0;
      this.unscanned();
    } else if (type === Msg.Query) {
      this.queryArrived();
      this.unscanned();
      this.expectUnread(inFlight - 1);
    } else if (type === Msg.Parse) {
      this.sentInSegment++;
      this.unscanned();
      this.expectUnread(inFlight);
    } else if (type === Msg.Close) this.sentInSegment++;
  }

  /**
   * A call the engine did not read went to PostgreSQL: SQL too large to scan, or a FunctionCall (the
   * fast path names a function by OID: pg_advisory_lock's as well as lo_read's). It may leave anything
   * behind (a session advisory lock), so the session's backend is closed, not pooled (residue.ts).
   * Large-object clients, the fast path's users, pay a fresh backend for their next session.
   */
  private unscanned(): void {
    this.residue = true;
  }

  /**
   * A whole Query, Parse, Bind or Close from the client. DropAndPause: the pump calls take() and
   * sends what it gives instead. `aborted`: the session's transaction has failed and nothing is in
   * flight that could end it, so a call would only be refused (the calls are then not made).
   * `inFlight`: ReadyForQuery messages PostgreSQL owes, counting a Query's own.
   */
  clientFrame(type: number, buf: Buffer, start: number, end: number, aborted: boolean, inFlight: number): Verdict {
    try {
      switch (type) {
        case Msg.Query:
          return this.onQuery(buf, start, end, aborted, inFlight);
        case Msg.Parse:
          return this.onParse(buf, start, end, inFlight);
        case Msg.Bind:
          return this.onBind(buf, start, end, aborted);
        case Msg.Close:
          this.onClose(buf, start, end);
          return Verdict.Forward;
        default:
          return Verdict.Forward;
      }
    } catch {
      // A malformed message: PostgreSQL reads it too, and answers with its own error.
      return Verdict.Forward;
    }
  }

  /** What the last DropAndPause stands for: bytes to send now, or a call to run first. */
  take(): Buffer | Held | null {
    const w = this.work;
    this.work = null;
    return w;
  }

  /** Runs the held calls, in order, stopping at the first failure. Never rejects. */
  async evaluate(held: Held): Promise<Answer> {
    const results: string[] = [];
    if (held.kind === 'misplaced') return { held, results, error: held.refused };
    if (held.kind === 'bind' && held.prepared.call === null) return { held, results, error: held.prepared.refused! };
    const calls = held.kind === 'query' ? held.calls : [held.prepared.call!];
    for (const call of calls) {
      if (held.aborted) return { held, results, error: ABORTED };
      try {
        results.push(await this.port.call(call.fn, this.argsOf(call, held), this.caller));
      } catch (err) {
        const raise = toRaise(err);
        if (raise.code === 'XX000') this.logger.error('control function failed', { fn: call.fn, err: asPgxError(err).cause ?? err });
        else this.logger.debug('control function refused', { fn: call.fn, code: raise.code, reason: raise.message });
        return { held, results, error: raise };
      }
    }
    return { held, results, error: null };
  }

  /**
   * The bytes to send PostgreSQL for an answered call. `inFlight`: ReadyForQuery messages PostgreSQL
   * still owes, counting the held Query's own.
   */
  emit(answer: Answer, inFlight: number): Buffer {
    const { held, results, error } = answer;
    if (held.kind !== 'bind') {
      const statements = held.kind === 'query' ? results.map((r, i) => resultSelect(r, held.calls[i]!.column)) : [];
      if (error) {
        statements.push(raiseStatement(error));
        this.expected.push({ rfqAhead: inFlight - 1, completesAhead: 0, swallow: 0, raise: error });
      }
      return queryMessage((held.kind === 'misplaced' ? held.before : '') + statements.join('; '));
    }
    const bind = held.bind;
    if (!error) {
      // $1 carries the result; the client's other values stay, as the statement still declares them.
      const params = [Buffer.from(results[0]!), ...bind.params.slice(1)];
      return bindMessage({ ...bind, paramFormats: [], params });
    }
    // Completions still due in this segment before ours: when no earlier segment is outstanding,
    // some of what was sent in it may have been answered already.
    const completesAhead = inFlight === 0 ? this.sentInSegment - this.receivedInHead : this.sentInSegment;
    this.expected.push({ rfqAhead: inFlight, completesAhead, swallow: 2, raise: error });
    this.sentInSegment += 2;
    return Buffer.concat([
      closeMessage({ kind: 'S', name: ERROR_STATEMENT }),
      parseMessage({ name: ERROR_STATEMENT, query: raiseStatement(error), paramTypes: [] }),
      bindMessage({ portal: bind.portal, statement: ERROR_STATEMENT, paramFormats: [], params: [], resultFormats: [] }),
    ]);
  }

  /** A ParseComplete or CloseComplete from PostgreSQL, passed on unread. */
  backendNote(): void {
    this.receivedInHead++;
  }

  /** A ReadyForQuery from PostgreSQL: a segment ended, and with it what we waited for in it. */
  readyForQuery(): void {
    this.receivedInHead = 0;
    for (let i = this.expected.length - 1; i >= 0; i--) {
      const e = this.expected[i]!;
      if (e.rfqAhead > 0) e.rfqAhead--;
      else this.expected.splice(i, 1);
    }
  }

  /** A ParseComplete, CloseComplete or ErrorResponse from PostgreSQL, read while expecting(). */
  backendFrame(type: number, buf: Buffer, start: number, end: number): Verdict {
    if (type === PARSE_COMPLETE || type === CLOSE_COMPLETE) {
      this.receivedInHead++;
      let verdict = Verdict.Forward;
      for (const e of this.expected) {
        if (e.rfqAhead > 0) continue;
        if (e.completesAhead > 0) e.completesAhead--;
        else if (e.swallow > 0) {
          e.swallow--;
          verdict = Verdict.Drop;
        }
      }
      return verdict;
    }
    if (type !== Msg.ErrorResponse) return Verdict.Forward;
    // PostgreSQL skips the rest of a segment after an error, so whatever we waited for there is over.
    let verdict = Verdict.Forward;
    if (this.expected.some((e) => e.rfqAhead === 0)) {
      const fields = parseErrorFields(buf.subarray(start + 5, end));
      const rewritten = this.rewrite(fields.get('C'), fields.get('M'));
      if (rewritten !== null) {
        this.backendWork = errorResponse({ severity: 'ERROR', ...rewritten });
        verdict = Verdict.DropAndPause;
      }
    }
    for (let i = this.expected.length - 1; i >= 0; i--) if (this.expected[i]!.rfqAhead === 0) this.expected.splice(i, 1);
    return verdict;
  }

  /** The rewritten ErrorResponse to send the client in place of the one dropped. */
  takeBackend(): Buffer | null {
    const w = this.backendWork;
    this.backendWork = null;
    return w;
  }

  private argsOf(call: ControlCall, held: Held): (string | null)[] {
    return call.args.map((a) => {
      if ('value' in a) return a.value;
      // Text format, or binary: for text parameters the binary form is the same bytes.
      const v = held.kind === 'bind' ? held.bind.params[a.param] : null;
      return v === null || v === undefined ? null : v.toString('utf8');
    });
  }

  /** What the client sees instead of PostgreSQL's error (code, message), or null to pass it on. */
  private rewrite(code: string | undefined, message: string | undefined): Raise | null {
    for (const e of this.expected) {
      if (e.rfqAhead > 0) continue;
      if (e.raise === null) {
        const name = code === UNDEFINED_FUNCTION ? (UNDEFINED_CONTROL.exec(message ?? '')?.[1] ?? '') : '';
        if (CONTROL_NAMES.has(name)) return unread(name);
      } else if (e.swallow === 0 && code === e.raise.code && message === e.raise.message) {
        return e.raise;
      }
    }
    return null;
  }

  /** SQL that mentions a control function went to PostgreSQL unread: its 42883 for one becomes 0A000. */
  private expectUnread(rfqAhead: number): void {
    this.expected.push({ rfqAhead, completesAhead: 0, swallow: 0, raise: null });
  }

  private queryArrived(): void {
    this.sentInSegment = 0;
    // A simple Query replaces the unnamed statement (PostgreSQL drops it).
    this.statements.delete('');
  }

  private onQuery(buf: Buffer, start: number, end: number, aborted: boolean, inFlight: number): Verdict {
    this.queryArrived();
    if (!this.residue) this.residue = mayLeaveResidue(buf, start + 5, end);
    if (!mentionsControl(buf, start + 5, end)) return Verdict.Forward;
    const plan = planQuery(queryText(buf.subarray(start + 5, end)), false);
    if (plan === null) {
      this.expectUnread(inFlight - 1);
      return Verdict.Forward;
    }
    this.work = 'calls' in plan ? { kind: 'query', calls: plan.calls, aborted } : { kind: 'misplaced', before: plan.before, refused: plan.refused };
    return Verdict.DropAndPause;
  }

  private onParse(buf: Buffer, start: number, end: number, inFlight: number): Verdict {
    this.sentInSegment++;
    if (!this.residue) this.residue = mayLeaveResidue(buf, start + 5, end);
    // A Parse replaces the unnamed statement, and a named one the client deallocated with SQL (which
    // the engine does not follow). Were the name still prepared, PostgreSQL would refuse the Parse
    // (42P05): a client error, after which Binds of that name go to PostgreSQL unchanged.
    if (this.statements.size > 0) this.statements.delete(statementName(buf, start, end));
    if (!mentionsControl(buf, start + 5, end)) return Verdict.Forward;
    const msg = readParse(buf, start, end);
    const plan = planQuery(msg.query, true);
    if (plan === null) {
      this.expectUnread(inFlight);
      return Verdict.Forward;
    }
    let prepared: Prepared;
    if ('calls' in plan) {
      // Several statements: PostgreSQL refuses to prepare them (42601).
      if (plan.calls.length !== 1) return Verdict.Forward;
      const call = plan.calls[0]!;
      let clientParams = msg.paramTypes.length;
      for (const a of call.args) if ('param' in a) clientParams = Math.max(clientParams, a.param + 1);
      prepared = { call, clientParams, declared: Math.max(clientParams, 1) };
    } else {
      if (plan.before.trim() !== '') return Verdict.Forward;
      // Refused at each Bind, as a failed call is: the error comes at the client's Execute.
      const clientParams = Math.max(msg.paramTypes.length, plan.params);
      prepared = { call: null, refused: plan.refused, clientParams, declared: Math.max(clientParams, 1) };
    }
    this.statements.set(msg.name, prepared);
    this.work = parseMessage({
      name: msg.name,
      query: `SELECT $1::text AS ${identifier(prepared.call?.column ?? '?column?')}`,
      paramTypes: new Array<number>(prepared.declared).fill(TEXT_OID),
    });
    return Verdict.DropAndPause;
  }

  private onBind(buf: Buffer, start: number, end: number, aborted: boolean): Verdict {
    if (this.statements.size === 0) return Verdict.Forward;
    const prepared = this.statements.get(statementName(buf, start, end));
    if (!prepared) return Verdict.Forward;
    const bind = readBind(buf, start, end);
    const n = bind.params.length;
    const formats = bind.paramFormats.length;
    // Counts PostgreSQL would refuse go on unchanged for it to refuse. A zero-argument call takes no
    // value, or the one value a Describe of its statement announced.
    if (n !== prepared.declared && n !== prepared.clientParams) return Verdict.Forward;
    if (formats > 1 && formats !== n) return Verdict.Forward;
    this.work = { kind: 'bind', bind, prepared, aborted };
    return Verdict.DropAndPause;
  }

  private onClose(buf: Buffer, start: number, end: number): void {
    this.sentInSegment++;
    if (this.statements.size === 0) return;
    const msg = readClose(buf, start, end);
    if (msg.kind === 'S') this.statements.delete(msg.name);
  }
}
