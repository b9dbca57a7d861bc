// The pump's one state value (forwarding, awaitingSlot, terminating, stopped) driven without
// PostgreSQL: real socket pairs, the client and the backend played with messages built by name
// (helpers/backend-messages.ts). The real-PostgreSQL tests (psql, clients, malformed, active-slots)
// stay; these pin each move of the state on its own.

import { expect } from 'chai';
import { waitFor } from '../helpers/commands.js';
import type net from 'node:net';
import { Pump } from '../../src/engine/pump.js';
import type { PumpEvents } from '../../src/engine/pump-ports.js';
import { ActiveSlots } from '../../src/engine/active-slots.js';
import { backendMessages as be, frontendMessages as fe, readMessages } from '../helpers/backend-messages.js';
import { socketPairs, type SocketPairs } from '../helpers/socket-pair.js';

const CANCELED = be.errorResponse({ C: '57014', M: 'canceling statement due to user request' });

/** A socket's reads handed to whoever the pump names as reader, as the engine's sockets do. */
function port(socket: net.Socket): { socket: net.Socket; setReader(r: ((chunk: Buffer) => boolean) | null): void } {
  let reader: ((chunk: Buffer) => boolean) | null = null;
  socket.on('data', (chunk: Buffer) => reader?.(chunk));
  return { socket, setReader: (r) => (reader = r) };
}

/** Everything a socket has received so far, as whole messages. */
function inbox(socket: net.Socket): { messages(): Buffer[]; types(): string[] } {
  let bytes = Buffer.alloc(0);
  socket.on('data', (chunk: Buffer) => (bytes = Buffer.concat([bytes, chunk])));
  const messages = (): Buffer[] => readMessages(bytes).messages;
  return { messages, types: () => messages().map((m) => String.fromCharCode(m[0]!)) };
}

interface Session {
  pump: Pump;
  /** The client's end: what it writes the pump reads. */
  client: net.Socket;
  /** PostgreSQL's end. */
  postgres: net.Socket;
  toClient: ReturnType<typeof inbox>;
  toPostgres: ReturnType<typeof inbox>;
  events: { terminated: number; violations: Array<{ type: number; length: number }>; failures: unknown[] };
}

describe('engine: the pump state, without PostgreSQL', function () {
  this.timeout(20_000);
  let pairs: SocketPairs;

  before(async () => {
    pairs = await socketPairs();
  });
  after(async () => {
    await pairs.close();
  });

  /** The client's `n`th statement, answered by PostgreSQL with 57014: what the client got in its place. */
  async function canceledStatement(s: Session, n: number): Promise<Buffer | undefined> {
    s.client.write(fe.query('SELECT pg_sleep(60)'));
    await waitFor(`statement ${n} at PostgreSQL`, () => s.toPostgres.types().length === n);
    s.postgres.write(Buffer.concat([CANCELED, be.readyForQuery('I')]));
    await waitFor(`the answer to statement ${n}`, () => s.toClient.types().length === 2 * n);
    return s.toClient.messages()[2 * (n - 1)];
  }

  async function session(gate: { slots: ActiveSlots; database: string } | null = null): Promise<Session> {
    const c = await pairs.pair();
    const b = await pairs.pair();
    const events: Session['events'] = { terminated: 0, violations: [], failures: [] };
    const handlers: PumpEvents = {
      terminate: () => events.terminated++,
      violation: (type, length) => events.violations.push({ type, length }),
      failed: (err) => events.failures.push(err),
    };
    // The engine's ends: the accepted client socket and the connecting backend socket.
    const pump = new Pump(port(c.far), port(b.near), handlers, null, gate);
    const s = { pump, client: c.near, postgres: b.far, toClient: inbox(c.near), toPostgres: inbox(b.far), events };
    pump.start(null, null);
    return s;
  }

  it('forwards a query and its answer: busy while in flight, reusable once PostgreSQL is idle again', async () => {
    const s = await session();
    expect(s.pump.state).to.equal('forwarding');
    expect(s.pump.reusable).to.equal(true);
    s.client.write(fe.query('SELECT 1'));
    await waitFor('the query at PostgreSQL', () => s.toPostgres.types().length === 1);
    expect(s.toPostgres.messages()[0]).to.deep.equal(fe.query('SELECT 1'));
    expect(s.pump.busy).to.equal(true);
    expect(s.pump.reusable).to.equal(false);
    s.postgres.write(Buffer.concat([be.dataRow(['1']), be.commandComplete('SELECT 1'), be.readyForQuery('I')]));
    await waitFor('the answer at the client', () => s.toClient.types().join('') === 'DCZ');
    expect(s.pump.busy).to.equal(false);
    expect(s.pump.reusable).to.equal(true);
    s.pump.stop();
    expect(s.pump.state).to.equal('stopped');
  });

  it('is not reusable inside a transaction, nor after a half-sent extended query', async () => {
    const s = await session();
    s.client.write(fe.query('BEGIN'));
    await waitFor('BEGIN at PostgreSQL', () => s.toPostgres.types().length === 1);
    s.postgres.write(Buffer.concat([be.commandComplete('BEGIN'), be.readyForQuery('T')]));
    await waitFor('BEGIN answered', () => s.toClient.types().join('') === 'CZ');
    expect(s.pump.busy).to.equal(false);
    expect(s.pump.reusable).to.equal(false);
    s.client.write(fe.query('COMMIT'));
    await waitFor('COMMIT at PostgreSQL', () => s.toPostgres.types().length === 2);
    s.postgres.write(Buffer.concat([be.commandComplete('COMMIT'), be.readyForQuery('I')]));
    await waitFor('COMMIT answered', () => s.toClient.types().length === 4);
    expect(s.pump.reusable).to.equal(true);
    s.client.write(Buffer.concat([fe.parse('SELECT 1'), fe.bind()]));
    await waitFor('Parse and Bind at PostgreSQL', () => s.toPostgres.types().length === 4);
    expect(s.pump.reusable, 'no Sync yet').to.equal(false);
    s.pump.stop();
  });

  it('after Terminate: terminating until the statements in flight are answered, then the session ends', async () => {
    const s = await session();
    s.client.write(Buffer.concat([fe.query('SELECT pg_sleep(1)'), fe.terminate()]));
    await waitFor('terminating', () => s.pump.state === 'terminating');
    await waitFor('the query at PostgreSQL', () => s.toPostgres.types().length === 1);
    expect(s.toPostgres.types(), 'Terminate is the engine\'s, not forwarded').to.deep.equal(['Q']);
    expect(s.events.terminated).to.equal(0);
    s.postgres.write(Buffer.concat([be.commandComplete('SELECT 1'), be.readyForQuery('I')]));
    await waitFor('the session to end', () => s.events.terminated === 1);
    expect(s.toClient.types(), 'the answer reached the client first').to.deep.equal(['C', 'Z']);
    s.pump.stop();
  });

  it('after Terminate while PostgreSQL waits for COPY data: the session ends at once', async () => {
    const s = await session();
    s.client.write(fe.query('COPY t FROM STDIN'));
    await waitFor('the COPY at PostgreSQL', () => s.toPostgres.types().length === 1);
    s.postgres.write(be.copyInResponse());
    await waitFor('CopyInResponse at the client', () => s.toClient.types().join('') === 'G');
    s.client.write(fe.terminate());
    await waitFor('the session to end', () => s.events.terminated === 1);
    expect(s.pump.busy, 'the COPY never finished').to.equal(true);
    s.pump.stop();
  });

  it('a message type no client sends is reported as a violation, and the backend is not reused', async () => {
    const s = await session();
    s.client.write(fe.raw('!', Buffer.from('xx')));
    await waitFor('the violation', () => s.events.violations.length === 1);
    expect(s.events.violations[0]!.type).to.equal(0x21);
    expect(s.pump.reusable).to.equal(false);
    s.pump.stop();
  });

  it('awaitingSlot: a second transaction on a database at its cap waits, then goes out in order', async () => {
    const slots = new ActiveSlots(1, 10_000);
    const a = await session({ slots, database: 'd' });
    const b = await session({ slots, database: 'd' });
    a.client.write(fe.query('BEGIN'));
    await waitFor('BEGIN at PostgreSQL', () => a.toPostgres.types().length === 1);
    a.postgres.write(Buffer.concat([be.commandComplete('BEGIN'), be.readyForQuery('T')]));
    await waitFor('BEGIN answered', () => a.toClient.types().length === 2);

    b.client.write(fe.query('SELECT 1'));
    b.client.write(fe.query('SELECT 2'));
    await waitFor('b awaiting the slot', () => b.pump.state === 'awaitingSlot');
    expect(b.pump.reusable).to.equal(false);
    expect(b.toPostgres.types(), 'nothing of b goes out while it waits').to.deep.equal([]);

    a.client.write(fe.query('COMMIT'));
    await waitFor('COMMIT at PostgreSQL', () => a.toPostgres.types().length === 2);
    a.postgres.write(Buffer.concat([be.commandComplete('COMMIT'), be.readyForQuery('I')]));
    await waitFor('b forwarding again', () => b.pump.state === 'forwarding');
    await waitFor("b's queries at PostgreSQL", () => b.toPostgres.types().length === 2);
    expect(b.toPostgres.messages()).to.deep.equal([fe.query('SELECT 1'), fe.query('SELECT 2')]);
    a.pump.stop();
    b.pump.stop();
  });

  it('a session stopped while awaiting its slot gives its place up', async () => {
    const slots = new ActiveSlots(1, 10_000);
    const a = await session({ slots, database: 'd' });
    const b = await session({ slots, database: 'd' });
    const c = await session({ slots, database: 'd' });
    a.client.write(fe.query('BEGIN'));
    await waitFor('BEGIN at PostgreSQL', () => a.toPostgres.types().length === 1);
    b.client.write(fe.query('SELECT 1'));
    await waitFor('b awaiting', () => b.pump.state === 'awaitingSlot');
    c.client.write(fe.query('SELECT 2'));
    await waitFor('c awaiting', () => c.pump.state === 'awaitingSlot');
    b.pump.stop();
    expect(b.pump.state).to.equal('stopped');
    a.postgres.write(Buffer.concat([be.commandComplete('BEGIN'), be.readyForQuery('I')]));
    await waitFor('c has the slot', () => c.pump.state === 'forwarding');
    await waitFor("c's query at PostgreSQL", () => c.toPostgres.types().length === 1);
    expect(b.toPostgres.types()).to.deep.equal([]);
    a.pump.stop();
    c.pump.stop();
  });

  it("the engine's own cancel: PostgreSQL's 57014 reaches the client as the error it was given", async () => {
    const s = await session();
    s.client.write(fe.query('SELECT pg_sleep(60)'));
    await waitFor('the query at PostgreSQL', () => s.toPostgres.types().length === 1);
    const ours = be.errorResponse({ C: '53200', M: 'out of memory: the session used too much' });
    s.pump.replaceCancelError(ours);
    s.postgres.write(Buffer.concat([CANCELED, be.readyForQuery('I')]));
    await waitFor('the answer at the client', () => s.toClient.types().join('') === 'EZ');
    expect(s.toClient.messages()[0]).to.deep.equal(ours);
    // Only that one: a later 57014 (the client's own cancel) passes as PostgreSQL sent it.
    expect(await canceledStatement(s, 2)).to.deep.equal(CANCELED);
    s.pump.stop();
  });

  it("the engine's own cancel taken by PostgreSQL after its statement ended: the next statement's 57014 is ours, and none after it is taken", async () => {
    const s = await session();
    s.client.write(fe.query('INSERT 1'));
    await waitFor('the first statement at PostgreSQL', () => s.toPostgres.types().length === 1);
    const ours = be.errorResponse({ C: '53100', M: 'the data filesystem is nearly full' });
    s.pump.replaceCancelError(ours);
    // The statement ends before the cancel reaches the backend; the client's next one gets it.
    s.postgres.write(Buffer.concat([be.commandComplete('INSERT 0 1'), be.readyForQuery('I')]));
    await waitFor('the first answer', () => s.toClient.types().join('') === 'CZ');
    expect(await canceledStatement(s, 2)).to.deep.equal(ours);
    // Taken while nothing runs: a later 57014 (the client's own cancel) passes as PostgreSQL sent it.
    s.pump.replaceCancelError(ours);
    s.pump.cancelTaken();
    expect(await canceledStatement(s, 3)).to.deep.equal(CANCELED);
    s.pump.stop();
  });
});
