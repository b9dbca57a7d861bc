// The one place that reads the time, so tests can drive time-dependent code with a fake clock.

export interface Clock {
  /** Milliseconds since the epoch. */
  now(): number;
  /** A monotonic reading in milliseconds with sub-millisecond precision, for durations. */
  monotonic(): number;
}

export const systemClock: Clock = {
  now: () => Date.now(),
  monotonic: () => performance.now(),
};
