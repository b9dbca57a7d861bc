// The kernel's OOM killer must never pick the postmaster: PostgreSQL treats any child killed by a
// signal as a crash and restarts every session of every tenant, and losing the postmaster itself is
// worse. PostgreSQL's documented answer (runtime-config "Linux Memory Overcommit") is to start the
// postmaster with oom_score_adj -1000 and have it reset each child to 0 through PG_OOM_ADJUST_FILE, so
// a runaway backend is the one picked. Only root (CAP_SYS_RESOURCE) may lower a score.

import fs from 'node:fs';

const OWN_SCORE = '/proc/self/oom_score_adj';
const PROTECTED = '-1000';

/** Environment for the postmaster: each child it forks writes 0 to its own score (fork_process.c). */
export const OOM_CHILD_ENV = { PG_OOM_ADJUST_FILE: '/proc/self/oom_score_adj', PG_OOM_ADJUST_VALUE: '0' };

/**
 * Calls `spawn` with this process's score at -1000, so the child starts with it (a fork copies it),
 * then puts ours back. `protectedChild` is false when the score could not be lowered (not root).
 */
export function spawnProtected<T>(spawn: () => T, scoreFile = OWN_SCORE): { child: T; protectedChild: boolean } {
  let own: string;
  try {
    own = fs.readFileSync(scoreFile, 'utf8').trim();
    fs.writeFileSync(scoreFile, PROTECTED);
  } catch {
    return { child: spawn(), protectedChild: false };
  }
  try {
    return { child: spawn(), protectedChild: true };
  } finally {
    fs.writeFileSync(scoreFile, own);
  }
}
