// Real memory cgroups for tests (root only): one is made under this process's own memory cgroup, with a
// limit, for a child process to move itself into before it execs (`sh -c 'echo $$ > cgroup.procs;
// exec ...'`), so the runtime and PostgreSQL run under a limit the kernel enforces. cgroup v1 (the
// memory controller's own hierarchy) and v2 (the unified one, where memory is enabled) are both found
// through /proc/self/mountinfo. remove() stops what is left inside (processes the test started) and
// removes the directory, so a failed test leaves no cgroup behind.

import fs from 'node:fs';
import path from 'node:path';

export interface TestCgroup {
  version: 1 | 2;
  /** The cgroup's directory. */
  dir: string;
  /** Its path as /proc/PID/cgroup shows it. */
  cgroupPath: string;
  /** argv prefix that runs a command inside the cgroup: sh moves itself in, then execs the rest. */
  wrap(argv: string[]): string[];
  /** Pids inside it now. */
  pids(): number[];
  /** Times the kernel's OOM killer killed a process in it (v1 memory.oom_control, v2 memory.events). */
  oomKills(): number;
  /** A cgroup inside this one, with no limit of its own. */
  child(name: string): TestCgroup;
  /** SIGKILLs what is left inside (by pid), waits for it to go, and removes the directory. */
  remove(): Promise<void>;
}

interface Hierarchy {
  version: 1 | 2;
  mount: string;
  /** This process's cgroup path in it. */
  own: string;
}

/** Where this process's memory controller is mounted, if a writable one is. */
export function memoryHierarchy(): Hierarchy | null {
  let mountinfo: string;
  let membership: string;
  try {
    mountinfo = fs.readFileSync('/proc/self/mountinfo', 'utf8');
    membership = fs.readFileSync('/proc/self/cgroup', 'utf8');
  } catch {
    return null;
  }
  const lines = membership.split('\n').map((l) => l.split(':'));
  for (const line of mountinfo.split('\n')) {
    // id parent major:minor root mountpoint options ... - fstype source superoptions
    const [left, right] = line.split(' - ');
    if (!left || !right) continue;
    const mount = left.split(' ')[4]!;
    const [fstype, , superOptions = ''] = right.split(' ');
    if (fstype === 'cgroup' && superOptions.split(',').includes('memory')) {
      const own = lines.find((l) => l[1]?.split(',').includes('memory'))?.[2];
      if (own !== undefined) return { version: 1, mount, own };
    }
    if (fstype === 'cgroup2') {
      const own = lines.find((l) => l[0] === '0' && l[1] === '')?.[2];
      const controllers = readOr(path.join(mount, own ?? '/', 'cgroup.controllers'), '');
      if (own !== undefined && controllers.split(/\s+/).includes('memory')) return { version: 2, mount, own };
    }
  }
  return null;
}

function readOr(file: string, fallback: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return fallback;
  }
}

let made = 0;

/** A new cgroup limited to `limitBytes`, under this process's own memory cgroup. */
export function createCgroup(limitBytes: number): TestCgroup {
  const h = memoryHierarchy();
  if (h === null) throw new Error('no memory cgroup hierarchy is mounted');
  const cgroupPath = path.posix.join(h.own, `pgx-test-${process.pid}-${++made}`);
  const dir = path.join(h.mount, cgroupPath);
  if (h.version === 2) {
    // Children of our cgroup get the memory controller only if it is enabled in its subtree.
    fs.writeFileSync(path.join(h.mount, h.own, 'cgroup.subtree_control'), '+memory');
  }
  fs.mkdirSync(dir);
  const group = handle(h.version, dir, cgroupPath);
  try {
    fs.writeFileSync(path.join(dir, h.version === 1 ? 'memory.limit_in_bytes' : 'memory.max'), String(limitBytes));
    if (h.version === 2) fs.writeFileSync(path.join(dir, 'memory.swap.max'), '0');
  } catch (err) {
    void group.remove();
    throw err;
  }
  return group;
}

function handle(version: 1 | 2, dir: string, cgroupPath: string): TestCgroup {
  const pids = (): number[] =>
    readOr(path.join(dir, 'cgroup.procs'), '')
      .split('\n')
      .filter((l) => l !== '')
      .map(Number);
  const children: TestCgroup[] = [];
  return {
    version,
    dir,
    cgroupPath,
    wrap: (argv) => ['sh', '-c', `echo $$ > '${path.join(dir, 'cgroup.procs')}' && exec "$@"`, 'sh', ...argv],
    pids,
    oomKills() {
      const file = version === 1 ? 'memory.oom_control' : 'memory.events';
      const m = /^oom_kill (\d+)$/m.exec(readOr(path.join(dir, file), ''));
      return m ? Number(m[1]) : 0;
    },
    child(name) {
      const sub = path.join(dir, name);
      fs.mkdirSync(sub);
      const c = handle(version, sub, path.posix.join(cgroupPath, name));
      children.push(c);
      return c;
    },
    async remove() {
      for (const c of children.splice(0)) await c.remove();
      const deadline = performance.now() + 20_000;
      while (fs.existsSync(dir)) {
        for (const pid of pids()) {
          try {
            process.kill(pid, 'SIGKILL');
          } catch {
            // gone already
          }
        }
        try {
          fs.rmdirSync(dir);
        } catch (err) {
          if (performance.now() > deadline) throw err;
          await new Promise((r) => setTimeout(r, 50));
        }
      }
    },
  };
}
