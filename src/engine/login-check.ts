// Whether a pooled backend is still what a fresh login would give. PostgreSQL checks a role and its
// database only when a backend logs in (NOLOGIN, CONNECT, connection limits, datallowconn, the login
// event trigger) and applies role and database defaults (pg_db_role_setting) only then; a backend
// reused for the next client would skip all of it. So a backend records, right after its login, what
// the defaults it got came from (LOGIN_BASELINE, pipelined behind the startup packet; its answer is
// read off ahead of the first client's, see server.ts; for a warm mint's backend, the same rows read
// by the claim before the login, ports.ts Route.loginBaselineRows), and is checked each time it is
// handed to another client:
//
//   - SNAPSHOT: `pg_current_snapshot()` by FunctionCall, cheaper than `SELECT 1`. If it equals the snapshot of the
//     backend's last full check, no transaction has completed since then, so no catalog row can have
//     changed: the backend is still good (unless a connection limit applies, whose count changes
//     without a commit; such backends always get the full check).
//   - FULL_CHECK, when the snapshot moved: the refusals evaluated now as PostgreSQL's login would
//     (role can log in, same superuser status, database allows connections, CONNECT privilege,
//     connection limits counted as PostgreSQL counts them, no login event trigger), the session's
//     role still the one it logged in as, and the settings rows compared with the login's baseline.
//
// Any other answer (a refusal, other defaults, an error, no row because the role was renamed or
// dropped) closes the backend and opens a new one, so PostgreSQL itself refuses or applies the new
// defaults and fires login triggers. The queries name everything with pg_catalog and OPERATOR(), so
// a tenant's search_path cannot put its own functions or operators in their place.

import { serialize } from 'pg-protocol';

/**
 * The pg_db_role_setting rows that can apply to a role (its own and ALTER ROLE ALL's), a row each:
 * which database, which role, and the row version (xmin), which any ALTER ... SET or RESET replaces.
 * Rows of other databases' (db, 0) settings are included too: changing them costs a fresh backend,
 * never a wrong default. `roleName`: an SQL expression of the role's name as text (SESSION_USER, or a
 * quoted literal when read from another session: a warm mint's claim, ports.ts Route.loginBaselineRows);
 * quote_ident makes it what regrole reads as that name (regrole folds an unquoted "MyRole" to myrole:
 * another role, or none). Written to be cheap on a backend whose catalog caches are cold (a warm
 * mint's): no operator (resolving `=` between oid and regrole reads every `=` operator), no sort; 0.3
 * ms of backend CPU where the earlier one-column form took 1.1 ms.
 */
export function settingsRowsSql(roleName: string): string {
  return (
    `SELECT s.setdatabase, s.setrole, s.xmin FROM pg_catalog.pg_db_role_setting s ` +
    `WHERE pg_catalog.oideq(s.setrole, '0'::pg_catalog.oid) ` +
    `OR pg_catalog.oideq(s.setrole, pg_catalog.quote_ident(${roleName})::pg_catalog.regrole::pg_catalog.oid)`
  );
}

/** What a backend's own login read its defaults from. */
const SETTINGS_ROWS = settingsRowsSql('SESSION_USER');

/** Right after the login: what its defaults came from (SETTINGS_ROWS). */
export const LOGIN_BASELINE = serialize.query(SETTINGS_ROWS);

/**
 * `pg_current_snapshot()` as a FunctionCall (no parse, no plan: half the backend's work of the same
 * SELECT). 5061 is its OID in every PostgreSQL since 13 (pg_proc.dat); were it another function, the
 * answer would not match and the full check would run.
 */
const PG_CURRENT_SNAPSHOT_OID = 5061;
export const SNAPSHOT = functionCall(PG_CURRENT_SNAPSHOT_OID);

/** FunctionCall ('F') with no arguments, text result: the protocol's fast path. */
function functionCall(oid: number): Buffer {
  const msg = Buffer.alloc(15);
  msg[0] = 0x46;
  msg.writeInt32BE(14, 1);
  msg.writeInt32BE(oid, 5);
  // No argument format codes, no arguments, result in text.
  msg.writeInt16BE(0, 9);
  msg.writeInt16BE(0, 11);
  msg.writeInt16BE(0, 13);
  return msg;
}

/** A FunctionCallResponse ('V') carries its value where a DataRow carries column 0's length word. */
export const FUNCTION_RESULT_AT = 5;

const lt = 'OPERATOR(pg_catalog.<)';
const le = 'OPERATOR(pg_catalog.<=)';
const eq = 'OPERATOR(pg_catalog.=)';
const count = (where: string): string =>
  `(SELECT pg_catalog.count(*) FROM pg_catalog.pg_stat_get_activity(NULL) a WHERE ${where} AND a.backend_type ${eq} 'client backend')`;

/**
 * Two statements. The first, two columns: 'y' (a fresh login would pass, no connection limit applies),
 * 'c' (it would pass, and a limit applies: check fully every time), 'n' (refused, or a login trigger
 * would fire); the statement's snapshot. No row when the session's role is not the one it logged in
 * as (renamed: SESSION_USER, read from the backend's role OID, differs from the login's name), an
 * error when that role is gone (SESSION_USER fails). The second: SETTINGS_ROWS now, to compare with
 * the login's.
 */
export const FULL_CHECK = serialize.query(
  `SELECT CASE WHEN r.rolcanlogin AND d.datallowconn AND NOT d.dathasloginevt ` +
    `AND r.rolsuper ${eq} (pg_catalog.current_setting('is_superuser') ${eq} 'on') ` +
    `AND pg_catalog.has_database_privilege(d.oid, 'CONNECT') THEN ` +
    `CASE WHEN r.rolsuper OR (d.datconnlimit ${lt} 0 AND r.rolconnlimit ${lt} 0) THEN 'y' ` +
    `WHEN (d.datconnlimit ${lt} 0 OR ${count(`a.datid ${eq} d.oid`)} ${le} d.datconnlimit) ` +
    `AND (r.rolconnlimit ${lt} 0 OR ${count(`a.usesysid ${eq} r.oid`)} ${le} r.rolconnlimit) THEN 'c' ` +
    `ELSE 'n' END ELSE 'n' END, pg_catalog.pg_current_snapshot() ` +
    `FROM pg_catalog.pg_database d, pg_catalog.pg_roles r ` +
    `WHERE d.datname ${eq} pg_catalog.current_database() ` +
    `AND r.rolname ${eq} pg_catalog.current_setting('session_authorization') AND r.rolname ${eq} SESSION_USER; ` +
    SETTINGS_ROWS,
);

/** Offset of column `i`'s length word in a DataRow frame (type byte at 0), or -1 if it has fewer. */
function columnAt(frame: Buffer, i: number): number {
  if (frame.length < 7 || frame.readInt16BE(5) <= i) return -1;
  let at = 7;
  for (let c = 0; c < i; c++) {
    const n = frame.readInt32BE(at);
    at += 4 + (n > 0 ? n : 0);
  }
  return at;
}

/** Column `i` of a DataRow, length word included, as a copy (kept past the read buffer's reuse). */
export function copyColumn(frame: Buffer, i: number): Buffer | null {
  const at = columnAt(frame, i);
  if (at < 0) return null;
  const n = frame.readInt32BE(at);
  return Buffer.from(frame.subarray(at, at + 4 + (n > 0 ? n : 0)));
}

/** The length word and value at `at` in `frame` equal `kept`. */
export function valueEquals(frame: Buffer, at: number, kept: Buffer): boolean {
  return at >= 0 && at + kept.length <= frame.length && frame.compare(kept, 0, kept.length, at, at + kept.length) === 0;
}

/** The first byte of column `i`'s value (the verdict letter), or -1. */
export function columnByte(frame: Buffer, i: number): number {
  const at = columnAt(frame, i);
  return at >= 0 && frame.readInt32BE(at) > 0 ? frame[at + 4]! : -1;
}
