// State a session can leave in its PostgreSQL backend that DISCARD ALL does not remove, so that the
// next client handed that backend would see what a fresh backend never shows:
//   - a temporary schema (pg_temp_N stays in current_schemas(true), pg_my_temp_schema() is non-zero),
//   - a placeholder for a custom setting (SET myapp.x = ...; afterwards current_setting('myapp.x',
//     true) is '' instead of NULL, and SHOW myapp.x no longer fails),
//   - a library loaded with LOAD (its settings stay defined),
//   - a session-level advisory lock, which the deferred reset (pool.ts) would otherwise release only
//     when the backend is handed out next; closing the backend releases it at once.
// The engine does not parse SQL on the hot path; it looks for the words these need, in any case, and
// a session that sent one gives its backend back closed instead of pooled. False alarms ("template",
// "payload", "UPDATE ... SET a = t.b") only cost a fresh backend for the next client, as does what
// the engine does not read (a Query or Parse over 1 MiB, a FunctionCall: see control.ts), which counts
// as residue. State made inside a function (a PL/pgSQL body creating a temp table) is not seen.

const T = 0x74;
const E = 0x65;
const M = 0x6d;
const P = 0x70;
const L = 0x6c;
const O = 0x6f;
const A = 0x61;
const D = 0x64;
const S = 0x73;
const R = 0x72;
const DOT = 0x2e;
const V = 0x76;
const I = 0x69;

/** True if buf[start, end) may leave backend state DISCARD ALL cannot undo (see above). */
export function mayLeaveResidue(buf: Buffer, start: number, end: number): boolean {
  let sawSet = false;
  let sawDot = false;
  for (let i = start; i < end; i++) {
    if (buf[i] === DOT) {
      sawDot = true;
      continue;
    }
    if (i + 2 >= end) continue;
    // `| 0x20` lower-cases an ASCII letter.
    const c = buf[i]! | 0x20;
    // `advi`: pg_advisory_lock and its kin. A session-level advisory lock must be released when the
    // session ends, and a pooled backend is reset only when handed out next (pool.ts).
    if (i + 3 < end && c === A && (buf[i + 1]! | 0x20) === D && (buf[i + 2]! | 0x20) === V && (buf[i + 3]! | 0x20) === I) return true;
    if (i + 3 < end && (c === T || c === L)) {
      const word = c === T ? [E, M, P] : [O, A, D];
      if ((buf[i + 1]! | 0x20) === word[0] && (buf[i + 2]! | 0x20) === word[1] && (buf[i + 3]! | 0x20) === word[2]) return true;
    }
    if (c === S && (buf[i + 1]! | 0x20) === E && (buf[i + 2]! | 0x20) === T && startsWord(buf, start, i)) sawSet = true;
  }
  // SET x.y, SET LOCAL x.y, RESET x.y, set_config('x.y', ...): a custom setting's placeholder.
  return sawSet && sawDot;
}

/** `set` at i begins a word, or ends `reset` that does ("offset", "dataset" do not count). */
function startsWord(buf: Buffer, start: number, i: number): boolean {
  const before = (at: number): boolean => at < start || !isWordByte(buf[at]!);
  if (before(i - 1)) return true;
  return i - 2 >= start && (buf[i - 2]! | 0x20) === R && (buf[i - 1]! | 0x20) === E && before(i - 3);
}

function isWordByte(b: number): boolean {
  const c = b | 0x20;
  return (c >= 0x61 && c <= 0x7a) || (b >= 0x30 && b <= 0x39) || b === 0x5f || b >= 0x80;
}
