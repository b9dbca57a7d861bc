// Runs a document's shell examples as a reader would: the ```sh blocks of a Markdown file, read from
// the file itself (so the tests follow the docs), each line run by bash in order, stopping at the first
// that fails. What a test cannot run as written is named by the test: ADAPTED (a rewrite, e.g. a system
// path to the test's own directory) and PLACEHOLDERS (a line naming something only the reader has, left
// out and returned apart so the test can say which). A `pgx start` line, which a reader leaves running
// in its own terminal, runs in the background until its ready line, with the environment the lines
// before it set. Shared by test/cli/readme-examples.test.ts and test/cli/doc-examples.test.ts.

import { expect } from 'chai';
import { spawn } from 'node:child_process';
import net from 'node:net';
import { createInterface } from 'node:readline';
import { runCommand, type CommandResult } from './commands.js';

/** The text under `## title` of a Markdown document, up to the next `## ` heading. */
export function section(doc: string, title: string): string {
  const start = doc.indexOf(`\n## ${title}\n`);
  expect(start, `the document has a "## ${title}" section`).to.be.greaterThan(-1);
  const end = doc.indexOf('\n## ', start + 1);
  return doc.slice(start, end === -1 ? undefined : end);
}

/** The fenced blocks of `lang` in `text`, in order. */
export function blocks(text: string, lang: string): string[] {
  return [...text.matchAll(new RegExp('^```' + lang + '\\n([\\s\\S]*?)^```$', 'gm'))].map((m) => m[1]!);
}

/** A rewrite a test must make to a line, given the test's directories (or whatever `T` it passes). */
export type Adaptation<T> = [RegExp, (dirs: T) => string];

/** The runnable lines of a block, after `adapted`; lines matching a placeholder are left out and returned apart. */
export function script<T>(block: string, dirs: T, adapted: Adaptation<T>[], placeholders: RegExp[]): { lines: string[]; skipped: string[] } {
  const lines: string[] = [];
  const skipped: string[] = [];
  // A line ending in `\` goes on: the command is the lines joined, as bash reads them.
  for (const raw of block.split(/(?<!\\)\n/)) {
    if (raw.trim() === '' || raw.trimStart().startsWith('#')) continue;
    if (placeholders.some((p) => p.test(raw))) {
      skipped.push(raw);
      continue;
    }
    lines.push(adapted.reduce((line, [re, to]) => line.replace(re, to(dirs)), raw));
  }
  return { lines, skipped };
}

/** The environment of a reader's fresh shell: none of the variables PGX or libpq would read. */
export function readerEnv(): NodeJS.ProcessEnv {
  const e: NodeJS.ProcessEnv = { ...process.env, PGX_CONTAINER: '' };
  for (const k of ['PGX_URL', 'PGX_API_TOKEN', 'PGHOST', 'PGPORT', 'PGUSER', 'PGDATABASE', 'PGPASSWORD', 'DATABASE_URL']) delete e[k];
  return e;
}

/** Runs lines in one bash, stopping at the first that fails; its output says which. */
export function bash(lines: string[], cwd: string, env: NodeJS.ProcessEnv = readerEnv()): Promise<CommandResult> {
  const text = ['set -eo pipefail', "trap 'echo \"doc line failed: $BASH_COMMAND\" >&2' ERR", ...lines].join('\n');
  return runCommand('bash', ['-c', text], { cwd, env, timeoutMs: 120_000 });
}

/** The environment after running `lines` in a reader's shell (its `export`s), for the lines after them. */
export async function shellEnv(lines: string[], cwd: string): Promise<NodeJS.ProcessEnv> {
  const r = await bash([...lines, 'env -0'], cwd);
  expect(r.code, `${lines.join('\n')}\n${r.stderr}`).to.equal(0);
  return Object.fromEntries(
    r.stdout
      .split('\0')
      .filter((kv) => kv.includes('='))
      .map((kv) => [kv.slice(0, kv.indexOf('=')), kv.slice(kv.indexOf('=') + 1)]),
  );
}

export interface StartedLine {
  ready: string;
  stop: () => Promise<void>;
}

/** A `pgx start` line run by bash in the background, until its ready line. */
export async function startLine(line: string, cwd: string, env: NodeJS.ProcessEnv = readerEnv()): Promise<StartedLine> {
  // A newline before the end: the line may end in a `# comment`.
  const child = spawn('bash', ['-c', `exec ${line}\n`], { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const err: Buffer[] = [];
  child.stderr!.on('data', (b: Buffer) => err.push(b));
  const ready = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`no ready line from: ${line}\n${Buffer.concat(err).toString()}`)), 90_000);
    createInterface({ input: child.stdout! }).on('line', (l) => {
      if (l.startsWith('PGX ready')) {
        clearTimeout(timer);
        resolve(l);
      }
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`${line} exited (${code}):\n${Buffer.concat(err).toString()}`));
    });
  });
  return {
    ready,
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return;
      const exited = new Promise((resolve) => child.once('exit', resolve));
      child.kill('SIGINT');
      await exited;
    },
  };
}

/** Whether a `pgx start` line: it runs until stopped, so a reader gives it its own terminal. */
export const isStartLine = (line: string): boolean => /\bpgx(\.js)? start\b/.test(line);

/**
 * A block holding one `pgx start` line: the lines before it (their exports) set the environment of
 * the start and of the lines after it, as in a reader's shell; the start runs in the background until
 * its ready line; `afterStart` (what the test must set up first, named by the test) and then the lines
 * after the start run in one bash. The runtime is left running for the test to look at and stop.
 */
export async function runAroundStart(lines: string[], cwd: string, afterStart: string[] = []): Promise<{ runtime: StartedLine; result: CommandResult }> {
  const at = lines.findIndex(isStartLine);
  expect(at, `a pgx start line in:\n${lines.join('\n')}`).to.be.greaterThan(-1);
  expect(lines.slice(at + 1).some(isStartLine), 'one pgx start line per block').to.equal(false);
  const env = at > 0 ? await shellEnv(lines.slice(0, at), cwd) : readerEnv();
  const runtime = await startLine(lines[at]!, cwd, env);
  try {
    const result = await bash([...afterStart, ...lines.slice(at + 1)], cwd, env);
    return { runtime, result };
  } catch (e) {
    await runtime.stop();
    throw e;
  }
}

export function portFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const server = net.createServer();
    server.once('error', () => resolve(false));
    server.listen({ host: '127.0.0.1', port }, () => server.close(() => resolve(true)));
  });
}
