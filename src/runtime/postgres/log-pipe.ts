// What PostgreSQL and initdb print, turned into the runtime's log: each line at the level its severity
// deserves (a routine FATAL is debug, a PANIC an error), and the last lines kept for error messages
// (a failed initdb or start quotes them). As CloudNativePG's instance manager has logpipe/. No
// password literal gets through (log-redact.ts).

import type { ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import type { Logger } from '../../log.js';
import { PasswordRedactor } from './log-redact.js';

/** Lines kept for error messages. */
const KEEP_LINES = 30;

/** "[123] user@db ERROR:  text", our log_line_prefix; early lines use PostgreSQL's default prefix. */
const LINE = /^(?:.*?\[(\d+)\] )?(?:.*? )?(DEBUG[1-5]|LOG|INFO|NOTICE|WARNING|ERROR|FATAL|PANIC|DETAIL|HINT|QUERY|CONTEXT|LOCATION|STATEMENT):  (.*)$/;
/** LOG lines worth info level: the server's own lifecycle. */
const LIFECYCLE = /starting PostgreSQL|ready to accept connections|shutdown request|shutting down|database system is shut down|database system was (interrupted|not properly shut down)|terminated by signal|exited with exit code|all server processes terminated|redo (starts|done)|listening on/;
/** FATAL lines that are expected traffic, not trouble: our readiness probe, sessions ended on stop. */
const ROUTINE_FATAL = /the database system is (starting up|shutting down|not yet accepting connections|in recovery mode)|terminating connection due to administrator command/;

type Level = 'error' | 'warn' | 'info' | 'debug';

export class LogPipe {
  /** The last lines PostgreSQL (or initdb) printed, for error messages. */
  private lastLines: string[] = [];
  /** Level of the last postgres log line, for its DETAIL/HINT/continuation lines. */
  private lastLevel: Level = 'info';

  /**
   * FATAL "database ... does not exist" for a name under the mint prefix: never a client's typo (the
   * engine answers those itself), but the engine's own race, which it handles: a login sent beside a
   * warm claim that looked the name up before the claim committed logs in again (engine/client.ts).
   */
  private readonly mintRace: RegExp | null;

  constructor(
    private readonly log: Logger,
    mintPrefix?: string,
  ) {
    this.mintRace = mintPrefix ? new RegExp(`^database "${mintPrefix.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')}[^"]*" does not exist$`) : null;
  }

  /**
   * Reads the process's stdout and stderr line by line: each, its password literals redacted
   * (log-redact.ts), is remembered, then given to `onLine`. Redacted before remembering: the last
   * lines are quoted in error messages and in the log line of a PostgreSQL that died.
   */
  pipe(proc: ChildProcess, onLine: (line: string) => void): void {
    for (const stream of [proc.stdout, proc.stderr]) {
      if (!stream) continue;
      // One per stream: a literal cut by a line end continues on the same stream's next line.
      const redactor = new PasswordRedactor();
      createInterface({ input: stream, crlfDelay: Infinity }).on('line', (raw) => {
        const line = redactor.line(raw);
        this.remember(line);
        onLine(line);
      });
    }
  }

  /** Pipes a postgres process: every line logged at its severity's level. */
  pipePostgres(proc: ChildProcess): void {
    this.lastLines = [];
    this.pipe(proc, (line) => this.logPostgresLine(line));
  }

  /** Keeps a line of our own (a failed spawn) among PostgreSQL's, for the error message. */
  remember(line: string): void {
    this.lastLines.push(line);
    if (this.lastLines.length > KEEP_LINES) this.lastLines.shift();
  }

  /** The last `n` lines, or "(no output)". */
  tail(n: number): string {
    return this.lastLines.slice(-n).join('\n') || '(no output)';
  }

  /** One postgres log line at the level its severity deserves. */
  private logPostgresLine(line: string): void {
    const m = LINE.exec(line);
    if (!m) {
      // Continuation lines of a multi-line message start with a tab; other odd lines (the dynamic
      // linker, early startup) are rare and worth seeing.
      this.log[line.startsWith('\t') ? this.lastLevel : 'info']('postgres', { text: line });
      return;
    }
    const [, pid, severity = 'LOG', text = ''] = m;
    const level = levelOf(severity, text, this.lastLevel, this.mintRace);
    this.lastLevel = level;
    this.log[level]('postgres', { severity, ...(pid ? { pid: Number(pid) } : {}), text });
  }
}

function levelOf(severity: string, text: string, previous: Level, mintRace: RegExp | null): Level {
  switch (severity) {
    case 'PANIC':
      return 'error';
    // A FATAL ends one session (a wrong database name, a client gone); PANIC is the server's trouble.
    case 'FATAL':
      return ROUTINE_FATAL.test(text) || mintRace?.test(text) ? 'debug' : 'warn';
    case 'ERROR':
    case 'WARNING':
      return 'warn';
    case 'LOG':
      return LIFECYCLE.test(text) ? 'info' : 'debug';
    case 'DETAIL':
    case 'HINT':
    case 'QUERY':
    case 'CONTEXT':
    case 'LOCATION':
    case 'STATEMENT':
      return previous;
    default:
      return 'debug';
  }
}

/** How a child process (postgres, initdb) ended. */
export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/** An exit in words, for logs and error messages. */
export function describeExit(exit: Exit | undefined): string {
  if (!exit) return 'still running';
  if (exit.signal) return `killed by ${exit.signal}`;
  return exit.code === null ? 'did not start' : `exit code ${exit.code}`;
}
