// Framework projects on disk, as their command-line tools expect them: a working directory under
// os.tmpdir() with the project's config and migration files and a `node_modules` link to this
// checkout's, and the tools run from node_modules/.bin as a user runs them.

import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Settings } from './targets.js';

const here = path.dirname(fileURLToPath(import.meta.url));

/** The checkout: the first directory above this file (dist/test/compat/lifecycles once built) with package.json. */
export function packageRoot(): string {
  let dir = here;
  while (!existsSync(path.join(dir, 'package.json'))) {
    if (path.dirname(dir) === dir) throw new Error('cannot find the package root above ' + here);
    dir = path.dirname(dir);
  }
  return dir;
}

/** A checked-in project file under test/compat/projects/ (not compiled: .cjs, .ts read by a tool, .sql). */
export function sourceFile(rel: string): string {
  return readFileSync(path.join(packageRoot(), 'test', 'compat', 'projects', rel), 'utf8');
}

/** Every checked-in file under test/compat/projects/<rel>, by its path below it. */
export function sourceTree(rel: string): Record<string, string> {
  const root = path.join(packageRoot(), 'test', 'compat', 'projects', rel);
  const files: Record<string, string> = {};
  const walk = (dir: string): void => {
    for (const e of readdirSync(dir, { withFileTypes: true })) {
      const p = path.join(dir, e.name);
      if (e.isDirectory()) walk(p);
      else files[path.relative(root, p)] = readFileSync(p, 'utf8');
    }
  };
  walk(root);
  return files;
}

/** A compiled project directory: test/compat/projects/<rel> after tsc, beside this file in dist. */
export function compiledDir(rel: string): string {
  return path.join(here, '..', 'projects', rel);
}

/** A new working directory under `parent` with `files` written and node_modules linked. */
export function makeProject(parent: string, name: string, files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(parent, `pgx-compat-${name}-`));
  symlinkSync(path.join(packageRoot(), 'node_modules'), path.join(dir, 'node_modules'));
  writeFiles(dir, files);
  return dir;
}

export function writeFiles(dir: string, files: Record<string, string>): void {
  for (const [rel, text] of Object.entries(files)) {
    mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    writeFileSync(path.join(dir, rel), text);
  }
}

/** Environment for a project's config file: where the database is (DB_HOST, DB_PORT, DB_USER, DB_NAME). */
export function dbEnv(s: Settings): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = {};
  // The tools must see only the lifecycle's database, never a PG* variable of whoever runs the tests.
  for (const [k, v] of Object.entries(process.env)) if (!k.startsWith('PG') && !k.startsWith('DB_')) env[k] = v;
  return { ...env, DB_HOST: s.host, DB_PORT: String(s.port), DB_USER: s.user, DB_NAME: s.database, NO_COLOR: '1', FORCE_COLOR: '0' };
}

export interface CliResult {
  code: number | null;
  /** stdout then stderr, normalised (see normaliseOutput). */
  output: string[];
}

/**
 * What a tool printed, without what differs between two runs of the same work: colours, spinner
 * frames, durations, and the working directory's path.
 */
export function normaliseOutput(text: string, cwd: string): string[] {
  return text
    // A spinner redraws its line: erase-line and cursor moves end one frame.
    .replace(/\x1b\[[0-9;?]*[KGA-F]/g, '\n')
    .replace(/\x1b\[[0-9;?]*[A-Za-z]/g, '')
    .split(/\r?\n|\r/)
    .map((l) => l.split(cwd).join('<project>').replace(/\d+(\.\d+)?\s?(ms|s)\b/g, 'N$2').trimEnd())
    .filter((l) => l !== '' && !/^\[[\u2800-\u28ff]\]/.test(l));
}

/** Runs node_modules/.bin/<tool> in `cwd`; never rejects on a non-zero exit. */
export function runTool(tool: string, args: string[], cwd: string, env: NodeJS.ProcessEnv, timeoutMs = 120_000): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(path.join(packageRoot(), 'node_modules', '.bin', tool), args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
    const out: Buffer[] = [];
    const err: Buffer[] = [];
    child.stdout.on('data', (b: Buffer) => out.push(b));
    child.stderr.on('data', (b: Buffer) => err.push(b));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.once('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.once('close', (code) => {
      clearTimeout(timer);
      const text = `${Buffer.concat(out).toString('utf8')}\n${Buffer.concat(err).toString('utf8')}`;
      resolve({ code, output: normaliseOutput(text, cwd) });
    });
  });
}

/** runTool, failing with the tool's output unless it exits 0. */
export async function tool(name: string, args: string[], cwd: string, env: NodeJS.ProcessEnv): Promise<CliResult> {
  const r = await runTool(name, args, cwd, env);
  if (r.code !== 0) throw new Error(`${name} ${args.join(' ')} exited ${r.code}:\n${r.output.join('\n')}`);
  return r;
}
