// Everything a benchmark starts (runtime, PgBouncer, temp directories) registers how to undo it here.
// The steps run last-in first-out on a normal end, on an error, and on Ctrl-C / SIGTERM.

import { killRunningCommands } from './exec.js';

type Step = { name: string; undo: () => Promise<void> | void };

export class Cleanup {
  private readonly steps: Step[] = [];
  private running: Promise<void> | undefined;

  add(name: string, undo: () => Promise<void> | void): void {
    this.steps.push({ name, undo });
  }

  /** Undoes every registered step once; a failing step is reported and the rest still run. */
  run(): Promise<void> {
    this.running ??= (async () => {
      killRunningCommands();
      while (this.steps.length > 0) {
        const step = this.steps.pop()!;
        try {
          await step.undo();
        } catch (err) {
          process.stderr.write(`cleanup: ${step.name} failed: ${(err as Error).message}\n`);
        }
      }
    })();
    return this.running;
  }

  /** On SIGINT/SIGTERM: clean up, then exit 130. A second signal exits at once. */
  onSignals(): () => void {
    let interrupted = false;
    const handler = (signal: NodeJS.Signals): void => {
      if (interrupted) process.exit(130);
      interrupted = true;
      process.stderr.write(`\n${signal}: cleaning up (again to exit at once)\n`);
      void this.run().finally(() => process.exit(130));
    };
    process.on('SIGINT', handler);
    process.on('SIGTERM', handler);
    return () => {
      process.off('SIGINT', handler);
      process.off('SIGTERM', handler);
    };
  }
}
