// Times one process's calls of one system call with `perf record` on the syscall tracepoints (no
// ptrace stops, so the traced process runs at full speed), on CLOCK_MONOTONIC: the same clock as
// process.hrtime, so the calls line up with the benchmark's own timestamps.

import { spawn, type ChildProcess } from 'node:child_process';
import { execFile } from 'node:child_process';
import { existsSync, statSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface SyscallCall {
  /** Monotonic milliseconds (process.hrtime's clock). */
  enterMs: number;
  exitMs: number;
  result: number;
}

/** Monotonic milliseconds on the clock perf records with (-k CLOCK_MONOTONIC). */
export function monotonicMs(): number {
  return Number(process.hrtime.bigint()) / 1e6;
}

export interface SyscallTrace {
  /** Stops recording and returns the calls, in order. */
  stop(): Promise<SyscallCall[]>;
}

/** Starts recording `syscall` of process `pid` into `file`; resolves once perf is attached. */
export async function traceSyscall(pid: number, syscall: string, file: string): Promise<SyscallTrace> {
  const child: ChildProcess = spawn(
    'perf',
    ['record', '-q', '-k', 'CLOCK_MONOTONIC', '-e', `syscalls:sys_enter_${syscall}`, '-e', `syscalls:sys_exit_${syscall}`, '-p', String(pid), '-o', file],
    { stdio: ['ignore', 'ignore', 'pipe'] },
  );
  let stderr = '';
  child.stderr?.setEncoding('utf8').on('data', (s: string) => (stderr += s));
  const exited = new Promise<void>((resolve) => child.once('close', () => resolve()));
  let gone = false;
  void exited.then(() => (gone = true));
  // perf writes the file's header once the events are set up.
  for (let i = 0; i < 100 && !(existsSync(file) && statSync(file).size > 0); i++) {
    if (gone) throw new Error(`perf record exited: ${stderr.trim()}`);
    await sleep(20);
  }
  // The header is written before the events are enabled on the process; give perf a moment more.
  await sleep(1000);
  return {
    async stop() {
      child.kill('SIGINT');
      await exited;
      const { stdout } = await run('perf', ['script', '-i', file, '-F', 'time,event,trace', '--ns'], { maxBuffer: 256 * 1024 * 1024 });
      const calls: SyscallCall[] = [];
      let enter: number | null = null;
      for (const line of stdout.split('\n')) {
        const m = /^\s*(\d+\.\d+):\s+syscalls:sys_(enter|exit)_\w+:\s*(.*)$/.exec(line);
        if (!m) continue;
        const ms = Number(m[1]) * 1000;
        if (m[2] === 'enter') enter = ms;
        else if (enter !== null) {
          calls.push({ enterMs: enter, exitMs: ms, result: Number(m[3]) });
          enter = null;
        }
      }
      return calls;
    },
  };
}
