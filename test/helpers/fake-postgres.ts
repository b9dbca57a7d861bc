// A stand-in for PostgreSQL's private Unix socket, for pool tests without PostgreSQL: it answers a
// startup packet with a login (AuthenticationOk, a ParameterStatus, BackendKeyData, ReadyForQuery)
// and the engine's own queries (the login baseline, the login check, DISCARD ALL) as PostgreSQL
// would, with messages built by name (backend-messages.ts). Tests set the login check's verdict and
// can end a backend as PostgreSQL would.

import fs from 'node:fs';
import net from 'node:net';
import { serialize } from 'pg-protocol';
import { FULL_CHECK, LOGIN_BASELINE, SNAPSHOT } from '../../src/engine/login-check.js';
import { socketPath } from '../../src/wire/socket-path.js';
import { backendMessages as be, readMessages, readStartupPacket } from './backend-messages.js';
import { scratchDir } from './scratch.js';

const DISCARD_ALL = serialize.query('DISCARD ALL');
/** The settings rows the fake reports, at login and at every check alike unless told otherwise. */
const SETTINGS_ROW = be.dataRow(['0', '10', '731']);

export interface FakeBackend {
  pid: number;
  socket: net.Socket;
  /** The messages the engine sent after its startup packet, as type letters ('Q', 'F', 'X'), with the SQL. */
  received: string[];
  startup: Map<string, string> | null;
}

export class FakePostgres {
  readonly socketDir = scratchDir('pgx-fake-pg-');
  readonly port = 5432;
  readonly backends: FakeBackend[] = [];
  /** The full check's verdict letter: y (a fresh login would pass), n (refused). */
  verdict = 'y';
  private readonly server = net.createServer((s) => this.accept(s));

  async listen(): Promise<this> {
    await new Promise<void>((resolve) => this.server.listen(socketPath(this.socketDir, this.port), resolve));
    return this;
  }

  /** Backends that got a startup packet and have not closed. */
  get live(): FakeBackend[] {
    return this.backends.filter((b) => b.startup !== null && !b.socket.destroyed);
  }

  byPid(pid: number): FakeBackend {
    const b = this.backends.find((x) => x.pid === pid);
    if (!b) throw new Error(`no fake backend ${pid}`);
    return b;
  }

  async close(): Promise<void> {
    for (const b of this.backends) b.socket.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
    fs.rmSync(this.socketDir, { recursive: true, force: true });
  }

  private accept(socket: net.Socket): void {
    const backend: FakeBackend = { pid: 4000 + this.backends.length, socket, received: [], startup: null };
    this.backends.push(backend);
    socket.on('error', () => {});
    let buf = Buffer.alloc(0);
    socket.on('data', (chunk: Buffer) => {
      buf = Buffer.concat([buf, chunk]);
      if (backend.startup === null) {
        const packet = readStartupPacket(buf);
        if (packet === null) return;
        backend.startup = packet.params;
        buf = buf.subarray(packet.length);
        socket.write(Buffer.concat([be.authenticationOk(), be.parameterStatus('server_version', '18.0'), be.backendKeyData(backend.pid, 7), be.readyForQuery('I')]));
      }
      const { messages, rest } = readMessages(buf);
      buf = Buffer.from(rest);
      for (const m of messages) this.answer(backend, m);
    });
  }

  private answer(backend: FakeBackend, m: Buffer): void {
    const type = String.fromCharCode(m[0]!);
    backend.received.push(type === 'Q' ? `Q ${m.toString('utf8', 5, m.length - 1).slice(0, 40)}` : type);
    const socket = backend.socket;
    if (type === 'X') return void socket.end();
    if (m.equals(SNAPSHOT)) return void socket.write(Buffer.concat([be.functionCallResponse('731:731:'), be.readyForQuery('I')]));
    if (m.equals(LOGIN_BASELINE)) return void socket.write(Buffer.concat([SETTINGS_ROW, be.commandComplete('SELECT 1'), be.readyForQuery('I')]));
    if (m.equals(DISCARD_ALL)) return void socket.write(Buffer.concat([be.commandComplete('DISCARD ALL'), be.readyForQuery('I')]));
    if (m.equals(FULL_CHECK)) {
      return void socket.write(
        Buffer.concat([be.dataRow([this.verdict, '731:731:']), be.commandComplete('SELECT 1'), SETTINGS_ROW, be.commandComplete('SELECT 1'), be.readyForQuery('I')]),
      );
    }
    socket.write(Buffer.concat([be.commandComplete('SELECT 0'), be.readyForQuery('I')]));
  }
}
