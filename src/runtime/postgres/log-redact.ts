// Password literals taken out of PostgreSQL's output before it reaches the runtime's log (log-pipe.ts).
// PostgreSQL logs a failed statement whole (STATEMENT, at its default log_min_error_statement = error),
// and every statement when log_statement or log_min_duration_statement is set (`pgx start -c`): a
// tenant's CREATE ROLE x PASSWORD 'pw', refused with 42501, would put its plaintext password in the
// runtime's log. The statement stays, as the operator's debugging context; only the literal after
// PASSWORD (CREATE/ALTER ROLE and USER, ENCRYPTED PASSWORD, a user mapping's OPTIONS (password '...'))
// becomes '***'.
//
// A literal is read as PostgreSQL's lexer reads it: '...' with '' inside, E'...', U&'...', $tag$...$tag$.
// A backslash escapes the next character in every quoted form, not only in E'...': with
// standard_conforming_strings off, 'a\'b' is one literal; reading too far hides some context, stopping
// too early would log the rest of the password. A statement's newlines reach us as continuation lines
// (a tab, then the text), so a literal, or a PASSWORD keyword, at the end of a line carries over to the
// next continuation line.

/** What a line left open for the next one: a literal, or the keyword whose literal has not come yet. */
type Open = { kind: 'keyword' } | { kind: 'quote' } | { kind: 'dollar'; delimiter: string };

const KEYWORD = /password/gi;
const MASK = "'***'";

/** Redacts the lines of one stream in order (a literal may span lines). */
export class PasswordRedactor {
  private open: Open | null = null;

  /** `line` with each password literal replaced by '***' (a literal cut by a line end: its part on this line). */
  line(line: string): string {
    // A line that is no continuation starts a new message: nothing of the last one is open.
    const open = line.startsWith('\t') ? this.open : null;
    this.open = null;
    let out = '';
    let at = 0;
    let expectLiteral = false;
    if (open?.kind === 'keyword') expectLiteral = true;
    else if (open !== null) {
      const end = closeAt(line, 1, open);
      if (end === -1) {
        this.open = open;
        return '\t***';
      }
      out = `\t***${open.kind === 'dollar' ? open.delimiter : "'"}`;
      at = end;
    }
    for (;;) {
      if (expectLiteral) {
        expectLiteral = false;
        const start = skipSpace(line, at);
        if (start === line.length) {
          // PASSWORD at the end of the line: its literal may start the next one.
          this.open = { kind: 'keyword' };
          break;
        }
        const literal = openerAt(line, start);
        if (literal !== null) {
          const end = closeAt(line, literal.content, literal.open);
          out += line.slice(at, start);
          if (end === -1) {
            this.open = literal.open;
            return `${out}'***`;
          }
          out += MASK;
          at = end;
        }
      }
      KEYWORD.lastIndex = at;
      const keyword = KEYWORD.exec(line);
      if (keyword === null) break;
      const after = keyword.index + keyword[0].length;
      out += line.slice(at, after);
      at = after;
      expectLiteral = true;
    }
    return out + line.slice(at);
  }
}

function skipSpace(line: string, at: number): number {
  while (at < line.length && /\s/.test(line[at]!)) at++;
  return at;
}

/** A literal starting at `at`: where its content starts and how it closes; null when none starts there. */
function openerAt(line: string, at: number): { content: number; open: Open } | null {
  const m = /^(?:[Ee]|[Uu]&)?'|^\$(?:[A-Za-z_\u0080-\uffff][A-Za-z0-9_\u0080-\uffff]*)?\$/.exec(line.slice(at, at + 200));
  if (m === null) return null;
  const content = at + m[0].length;
  return m[0].startsWith('$') ? { content, open: { kind: 'dollar', delimiter: m[0] } } : { content, open: { kind: 'quote' } };
}

/** The index just past the literal's closing quote or delimiter, from `from` inside it; -1: not on this line. */
function closeAt(line: string, from: number, open: Open): number {
  if (open.kind === 'dollar') {
    const i = line.indexOf(open.delimiter, from);
    return i === -1 ? -1 : i + open.delimiter.length;
  }
  for (let i = from; i < line.length; i++) {
    if (line[i] === '\\') i++;
    else if (line[i] === "'") {
      if (line[i + 1] === "'") i++;
      else return i + 1;
    }
  }
  return -1;
}
