// The janitor: one loop of named tasks, run every interval. Each task is idempotent (running it twice
// does what running it once does), bounded per pass (a backlog drains over passes instead of stalling
// one), and logs each action with a reason naming the setting behind it. A task that fails is logged
// and retried next pass; it does not stop the others.

import type { Clock } from '../../clock.js';
import type { Logger } from '../../log.js';

export interface JanitorTask {
  name: string;
  /** Does at most one pass's worth of work; returns how many things it acted on. */
  run(): Promise<number>;
}

export interface JanitorOptions {
  intervalMs: number;
  tasks: JanitorTask[];
  clock: Clock;
  logger: Logger;
}

export class Janitor {
  private timer: NodeJS.Timeout | undefined;
  private running: Promise<void> = Promise.resolve();
  private stopped = true;
  /** Clock.now() when the last pass finished; null before the first. */
  lastRun: number | null = null;

  constructor(private readonly opts: JanitorOptions) {}

  start(): void {
    if (!this.stopped) return;
    this.stopped = false;
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearTimeout(this.timer);
    this.timer = undefined;
    await this.running;
  }

  /** One pass of every task, after any pass in progress (tests and control calls use it). */
  runOnce(): Promise<void> {
    this.running = this.running.then(() => this.pass());
    return this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.timer = undefined;
      void this.runOnce().then(() => this.schedule());
    }, this.opts.intervalMs);
  }

  private async pass(): Promise<void> {
    for (const task of this.opts.tasks) {
      try {
        const acted = await task.run();
        if (acted > 0) this.opts.logger.debug('janitor-task', { task: task.name, acted });
      } catch (err) {
        this.opts.logger.warn('janitor-task-failed', { task: task.name, err });
      }
    }
    this.lastRun = this.opts.clock.now();
  }
}
