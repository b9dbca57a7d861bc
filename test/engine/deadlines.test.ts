// Deadlines: many same-length deadlines on one timer (the login timeout and the AuthenticationOk hold).

import { expect } from 'chai';
import { setTimeout as sleep } from 'node:timers/promises';
import { Deadlines } from '../../src/engine/deadlines.js';

describe('Deadlines', () => {
  it('expires items in the order they were added, each after its own length', async () => {
    const expired: Array<[string, number]> = [];
    const t0 = performance.now();
    const d = new Deadlines<string>(40, (item) => expired.push([item, performance.now() - t0]));
    d.add('a');
    await sleep(20);
    d.add('b');
    await sleep(80);
    expect(expired.map(([item]) => item)).to.deep.equal(['a', 'b']);
    expect(expired[0]![1]).to.be.at.least(39);
    // b was added 20 ms later, so it expires no earlier than 20 ms after a's deadline.
    expect(expired[1]![1]).to.be.at.least(59);
    d.clear();
  });

  it('never expires an item deleted before its deadline, and goes on with the next one', async () => {
    const expired: string[] = [];
    const d = new Deadlines<string>(30, (item) => expired.push(item));
    d.add('gone');
    d.add('kept');
    d.delete('gone');
    await sleep(60);
    expect(expired).to.deep.equal(['kept']);
    d.clear();
  });

  it('restarts an item added again from the second add, and clear() stops everything', async () => {
    const expired: string[] = [];
    const d = new Deadlines<string>(40, (item) => expired.push(item));
    d.add('x');
    await sleep(25);
    d.add('x');
    await sleep(25);
    expect(expired).to.deep.equal([]);
    await sleep(30);
    expect(expired).to.deep.equal(['x']);
    d.add('y');
    d.clear();
    await sleep(60);
    expect(expired).to.deep.equal(['x']);
  });
});
