// Where a runtime's PostgreSQL spends its time, statement by statement, from its own log: a runtime
// started with `-c log_min_duration_statement=0` logs `duration: X ms  statement: ...` (or `execute`,
// `parse`, `bind` for the extended protocol) for every statement, the runtime's own admin sessions
// included, and passes each line on as JSON on stderr (message "postgres", field "text"). Statements
// are grouped by their text with literals and numbers blanked, so the drops of a thousand databases
// are one row. Logging every statement costs time itself: a traced run's totals are for where, not
// how fast.

export interface StatementTotal {
  /** The statement with literals, quoted names and numbers blanked, at most 120 characters. */
  statement: string;
  count: number;
  totalMs: number;
  maxMs: number;
}

const DURATION = /^duration: ([\d.]+) ms {2}(?:statement|execute [^:]*|parse [^:]*|bind [^:]*): ([\s\S]*)$/;

/** The shape of a statement: what is the same for every database it ran on. */
export function statementShape(sql: string): string {
  return sql
    .replace(/'(?:[^']|'')*'/g, "'?'")
    .replace(/"(?:[^"]|"")*"/g, '"?"')
    .replace(/\$\d+/g, '$n')
    .replace(/\b\d+(\.\d+)?\b/g, 'N')
    .replace(/\s+/g, ' ')
    .trim()
    .slice(0, 120);
}

export class StatementTrace {
  private readonly totals = new Map<string, StatementTotal>();

  /** One line of the runtime's stderr; lines that are not a statement's duration are passed over. */
  readonly onLine = (line: string): void => {
    if (!line.includes('"duration: ')) return;
    let entry: { message?: unknown; text?: unknown };
    try {
      entry = JSON.parse(line) as typeof entry;
    } catch {
      return;
    }
    if (entry.message !== 'postgres' || typeof entry.text !== 'string') return;
    const m = DURATION.exec(entry.text);
    if (!m) return;
    const ms = Number(m[1]);
    const statement = statementShape(m[2]!);
    const t = this.totals.get(statement) ?? { statement, count: 0, totalMs: 0, maxMs: 0 };
    t.count++;
    t.totalMs += ms;
    t.maxMs = Math.max(t.maxMs, ms);
    this.totals.set(statement, t);
  };

  /** Empties the totals (between phases of a run). */
  reset(): void {
    this.totals.clear();
  }

  /** The `n` statements that took the most time in all, largest first, ms rounded to 0.1. */
  top(n: number): StatementTotal[] {
    return [...this.totals.values()]
      .sort((a, b) => b.totalMs - a.totalMs)
      .slice(0, n)
      .map((t) => ({ ...t, totalMs: Math.round(t.totalMs * 10) / 10, maxMs: Math.round(t.maxMs * 10) / 10 }));
  }
}
