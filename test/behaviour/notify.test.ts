// LISTEN/NOTIFY between sessions, on direct PostgreSQL and through the engine: payloads, delivery to
// an idle listener (the engine must pass on a message nobody asked for), delivery at commit and not
// before, nothing after a rollback, and a pooled backend that forgets what its last session listened to.

import { expect } from 'chai';
import { waitFor } from '../helpers/commands.js';
import { rows, describeScenarios, type Scenario, type Session } from './harness.js';

const listenNotify: Scenario = {
  name: 'LISTEN and NOTIFY with payloads',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    await a.q('LISTEN jobs');
    await a.q('LISTEN "Mixed Case"');
    // a is idle: the notification arrives on its own.
    await b.q("NOTIFY jobs, 'hello'");
    expect(await a.notified(1)).to.deep.equal([{ channel: 'jobs', payload: 'hello', from: 'b' }]);
    const long = `ünïcødé ☃ ${'x'.repeat(7000)}`;
    await b.q("SELECT pg_notify('Mixed Case', $1)", [long]);
    expect(await a.notified(1)).to.deep.equal([{ channel: 'Mixed Case', payload: long, from: 'b' }]);
    const tooLong = await b.q("SELECT pg_notify('jobs', repeat('y', 8000))");
    expect(tooLong.error).to.include({ code: '22023', message: 'payload string too long' });
    // Sent in a transaction: delivered at commit, once per distinct payload, in order.
    await b.q('BEGIN');
    await b.q("NOTIFY jobs, 'in-tx-1'");
    await b.q("NOTIFY jobs, 'in-tx-1'");
    await b.q("NOTIFY jobs, 'in-tx-2'");
    await a.q('SELECT 1');
    expect(a.takeNotifications()).to.deep.equal([]);
    await b.q('COMMIT');
    expect(await a.notified(2)).to.deep.equal([
      { channel: 'jobs', payload: 'in-tx-1', from: 'b' },
      { channel: 'jobs', payload: 'in-tx-2', from: 'b' },
    ]);
    // Rolled back: never delivered (the next notification from b comes first).
    await b.q('BEGIN');
    await b.q("NOTIFY jobs, 'rolled-back'");
    await b.q('ROLLBACK');
    await b.q("NOTIFY jobs, 'after-rollback'");
    expect(await a.notified(1)).to.deep.equal([{ channel: 'jobs', payload: 'after-rollback', from: 'b' }]);
    // A listener inside a transaction hears nothing until it ends.
    await a.q('BEGIN');
    await a.q('SELECT 1');
    await b.q("NOTIFY jobs, 'while-busy'");
    await a.q('SELECT 2');
    expect(a.takeNotifications()).to.deep.equal([]);
    await a.q('COMMIT');
    expect(await a.notified(1)).to.deep.equal([{ channel: 'jobs', payload: 'while-busy', from: 'b' }]);
    // Its own notifications, and a channel it left.
    await a.q("NOTIFY jobs, 'to-self'");
    expect(await a.notified(1)).to.deep.equal([{ channel: 'jobs', payload: 'to-self', from: 'a' }]);
    await a.q('UNLISTEN jobs');
    await b.q("NOTIFY jobs, 'unheard'");
    await b.q(`NOTIFY "Mixed Case", 'heard'`);
    expect(await a.notified(1)).to.deep.equal([{ channel: 'Mixed Case', payload: 'heard', from: 'b' }]);
    expect(rows(await a.q('SELECT pg_listening_channels() AS c'))).to.deep.equal([{ c: 'Mixed Case' }]);
    // LISTEN in a rolled-back transaction does not take effect.
    await a.q('BEGIN');
    await a.q('LISTEN ghost');
    await a.q('ROLLBACK');
    expect(rows(await a.q('SELECT pg_listening_channels() AS c'))).to.deep.equal([{ c: 'Mixed Case' }]);
    // postgres.js listens on a connection of its own.
    const p = t.pgjs('p');
    const heard: string[] = [];
    await p.sql.listen('jobs', (payload) => heard.push(payload));
    await b.q("NOTIFY jobs, 'to-postgres-js'");
    await waitFor('postgres.js to hear the notification', () => heard.length >= 1);
    t.note('postgres.js heard', heard);
    expect(heard).to.deep.equal(['to-postgres-js']);
    // A session that leaves while listening: the next one on its backend does not inherit the channel.
    await t.leave(a);
    const a2 = await t.session('a2');
    t.reuses(a2, a);
    expect(rows(await a2.q('SELECT pg_listening_channels() AS c'))).to.deep.equal([]);
    await a2.q('LISTEN sentinel');
    await b.q(`NOTIFY "Mixed Case", 'stale'`);
    await b.q("NOTIFY sentinel, 'mark'");
    expect(await a2.notified(1)).to.deep.equal([{ channel: 'sentinel', payload: 'mark', from: 'b' }]);
  },
};

/**
 * A client that skips its own notifications compares the sender with the pid in its BackendKeyData
 * (pg-listen and job queues do): through the engine that pid must be the backend's own.
 */
const ownNotifications: Scenario = {
  name: 'a notification from the session itself carries the pid the client was given',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    const keyPid = (s: Session): number => (s.client as unknown as { processID: number }).processID;
    const senders: number[] = [];
    a.client.on('notification', (n) => senders.push(n.processId));
    await a.q('LISTEN news');
    await a.q("NOTIFY news, 'mine'");
    await b.q("NOTIFY news, 'theirs'");
    await a.notified(2);
    const own = senders.map((pid) => pid === keyPid(a));
    t.note('sent by the session itself, by BackendKeyData pid', own);
    expect(own).to.deep.equal([true, false]);
    expect(senders[1]).to.equal(keyPid(b));
  },
};

describeScenarios('LISTEN/NOTIFY', [listenNotify, ownNotifications]);
