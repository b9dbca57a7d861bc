// The kernel's OOM killer must take a backend, never the postmaster or the runtime's node process:
// PostgreSQL treats any child killed by a signal as a crash and restarts every session of every
// tenant, losing the postmaster is worse, and losing node loses the engine. PostgreSQL's documented
// answer (runtime-config "Linux Memory Overcommit") is to start the postmaster with oom_score_adj
// -1000 and have each child reset its own to 0 through PG_OOM_ADJUST_FILE. Only CAP_SYS_RESOURCE may
// lower a score; anyone may raise their own. So where the runtime may lower scores, the postmaster gets
// -1000, node -999 (the killer's last resort) and PostgreSQL's children 0; where it may not, node and
// the postmaster keep the score they inherited and PostgreSQL's children raise theirs to 1000, which
// puts every one of them ahead of node and the postmaster whatever their sizes (the killer adds
// score/1000 of the memory to each process's size and takes the largest).

import fs from 'node:fs';

const OWN_SCORE = '/proc/self/oom_score_adj';
const POSTMASTER = '-1000';
/** The node process where it may lower its score: killable only when nothing else is left. */
const RUNTIME_OOM_SCORE = -999;
/** PostgreSQL's children where the postmaster runs unprotected: ahead of every other process. */
export const UNPROTECTED_CHILD_OOM_SCORE = 1000;

/** Environment for the postmaster: each child it forks writes `score` to its own (fork_process.c). */
function oomChildEnv(score: number): Record<string, string> {
  return { PG_OOM_ADJUST_FILE: '/proc/self/oom_score_adj', PG_OOM_ADJUST_VALUE: String(score) };
}

/**
 * Lowers this process's score to RUNTIME_OOM_SCORE where it may (and it is not lower already).
 * Returns the score in force afterwards, or null where there is no such file (not Linux).
 */
export function protectRuntime(scoreFile = OWN_SCORE): number | null {
  let own: number;
  try {
    own = Number(fs.readFileSync(scoreFile, 'utf8').trim());
  } catch {
    return null;
  }
  if (own <= RUNTIME_OOM_SCORE) return own;
  try {
    fs.writeFileSync(scoreFile, String(RUNTIME_OOM_SCORE));
    return RUNTIME_OOM_SCORE;
  } catch {
    return own; // no CAP_SYS_RESOURCE
  }
}

/**
 * Calls `spawn` with this process's score at -1000, so the child starts with it (a fork copies it),
 * then puts ours back. `spawn` gets the environment the postmaster needs to set its children's
 * scores: 0 when it is protected, UNPROTECTED_CHILD_OOM_SCORE when it is not (`protectedChild` false:
 * the score could not be lowered, not root).
 */
export function spawnProtected<T>(spawn: (childEnv: Record<string, string>) => T, scoreFile = OWN_SCORE): { child: T; protectedChild: boolean } {
  let own: string;
  try {
    own = fs.readFileSync(scoreFile, 'utf8').trim();
    fs.writeFileSync(scoreFile, POSTMASTER);
  } catch {
    return { child: spawn(oomChildEnv(UNPROTECTED_CHILD_OOM_SCORE)), protectedChild: false };
  }
  try {
    return { child: spawn(oomChildEnv(0)), protectedChild: true };
  } finally {
    fs.writeFileSync(scoreFile, own);
  }
}
