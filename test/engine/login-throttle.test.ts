// The failed-login throttle's arithmetic on a fake clock: free attempts up to the limit, turns that
// double in spacing past it, parallel attempts spaced out rather than checked at once, refusal when a
// turn is too far off, the penalty gone a minute after the guessing stops, and a penalised key kept
// however many junk user names fail beside it.

import { expect } from 'chai';
import type { Clock } from '../../src/clock.js';
import { LoginFailures } from '../../src/engine/login-failures.js';

function fakeClock(): Clock & { advance(ms: number): void } {
  let t = 1_000_000;
  return { now: () => t, monotonic: () => t, advance: (ms) => (t += ms) };
}

describe('engine: LoginFailures (the throttle per source and user)', () => {
  it('lets attempts through up to the limit, then spaces them out at a doubling delay', () => {
    const clock = fakeClock();
    const f = new LoginFailures(3, clock, 5000);
    for (let i = 0; i < 3; i++) {
      expect(f.admit('10.0.0.1', 'app')).to.equal(0);
      f.record('10.0.0.1', 'app');
    }
    expect(f.admit('10.0.0.1', 'other')).to.equal(0);
    expect(f.admit('10.0.0.2', 'app')).to.equal(0);
    // Three attempts at once: one turn each, 250 ms apart.
    expect([f.admit('10.0.0.1', 'app'), f.admit('10.0.0.1', 'app'), f.admit('10.0.0.1', 'app')]).to.deep.equal([250, 500, 750]);
    clock.advance(750);
    expect(f.record('10.0.0.1', 'app')).to.deep.equal({ failures: 4, nextWaitMs: 500 });
    expect(f.record('10.0.0.1', 'app').nextWaitMs).to.equal(1000);
  });

  it('refuses an attempt whose turn is further off than the longest hold, and says when to come back', () => {
    const clock = fakeClock();
    const f = new LoginFailures(1, clock, 1000);
    for (let i = 0; i < 5; i++) f.record('s', 'u'); // next turn 4 s off
    expect(f.admit('s', 'u')).to.equal(null);
    expect(f.retryAfterMs('s', 'u')).to.equal(3000);
    clock.advance(3000);
    expect(f.admit('s', 'u')).to.equal(1000);
  });

  it('forgets the penalty a minute after the last failure', () => {
    const clock = fakeClock();
    const f = new LoginFailures(2, clock, 5000);
    for (let i = 0; i < 6; i++) f.record('s', 'u');
    clock.advance(60_001);
    expect(f.admit('s', 'u')).to.equal(0);
    expect(f.failures('s', 'u')).to.equal(0);
  });

  it('keeps a penalised key however many junk user names fail beside it', () => {
    const clock = fakeClock();
    const f = new LoginFailures(2, clock, 5000);
    for (let i = 0; i < 4; i++) f.record('s', 'target');
    for (let i = 0; i < 20_000; i++) f.record('s', `junk${i}`);
    expect(f.failures('s', 'target')).to.equal(4);
    expect(f.admit('s', 'target')).to.be.greaterThan(0);
  });

  it('does nothing without a limit', () => {
    const f = new LoginFailures(null, fakeClock(), 5000);
    for (let i = 0; i < 100; i++) f.record('s', 'u');
    expect(f.admit('s', 'u')).to.equal(0);
  });
});
