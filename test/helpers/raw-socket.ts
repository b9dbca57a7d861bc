// A raw TCP client for protocol tests: writes whatever bytes a test gives it and reads the backend
// messages the engine answers with, with a timeout on every wait. It also logs in (trust or
// SCRAM-SHA-256), so a test can reach any protocol state and then misbehave there.

import net from 'node:net';
import { parseErrorFields } from '../../src/wire/error-response.js';
import { scramClient } from './scram-client.js';

export interface BackendMessage {
  type: string;
  /** The body, after the 5-byte header. */
  body: Buffer;
}

export class RawSocket {
  readonly socket: net.Socket;
  private buf: Buffer = Buffer.alloc(0);
  private waiter: (() => void) | null = null;
  closed = false;
  /** Every byte received, for assertions on what came before a close. */
  received = 0;
  readonly closedPromise: Promise<void>;

  private constructor(socket: net.Socket) {
    this.socket = socket;
    if (socket.remoteAddress !== undefined) socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => {
      this.received += chunk.length;
      this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
      this.wake();
    });
    socket.on('error', () => {});
    this.closedPromise = new Promise((resolve) =>
      socket.once('close', () => {
        this.closed = true;
        this.wake();
        resolve();
      }),
    );
  }

  /** Connects over TCP, or to a Unix socket when `host` is a directory (as libpq reads a host). */
  static connect(port: number, host: string, timeoutMs = 5000): Promise<RawSocket> {
    return new Promise((resolve, reject) => {
      const socket = host.startsWith('/') ? net.connect(`${host}/.s.PGSQL.${port}`) : net.connect(port, host);
      const timer = setTimeout(() => {
        socket.destroy();
        reject(new Error('connect timed out'));
      }, timeoutMs);
      socket.once('connect', () => {
        clearTimeout(timer);
        resolve(new RawSocket(socket));
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        reject(err);
      });
    });
  }

  private wake(): void {
    const w = this.waiter;
    this.waiter = null;
    w?.();
  }

  /** Resolves when more data arrives, the socket closes, or the deadline passes. */
  private wait(deadline: number): Promise<void> {
    return new Promise((resolve) => {
      const timer = setTimeout(resolve, Math.max(0, deadline - Date.now()));
      this.waiter = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  }

  write(bytes: Buffer): void {
    if (!this.socket.destroyed) this.socket.write(bytes);
  }

  /** Bytes not yet read as messages. */
  get pending(): Buffer {
    return this.buf;
  }

  /** Reads exactly n raw bytes (for the one-byte answer to SSLRequest). */
  async readBytes(n: number, timeoutMs = 5000): Promise<Buffer> {
    const deadline = Date.now() + timeoutMs;
    while (this.buf.length < n) {
      if (this.closed) throw new Error(`closed after ${this.buf.length} of ${n} bytes`);
      if (Date.now() >= deadline) throw new Error(`timed out after ${this.buf.length} of ${n} bytes`);
      await this.wait(deadline);
    }
    const out = this.buf.subarray(0, n);
    this.buf = this.buf.subarray(n);
    return out;
  }

  /** The next complete message, or null if the socket closed first. Throws on timeout. */
  async readMessage(timeoutMs = 5000): Promise<BackendMessage | null> {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      if (this.buf.length >= 5) {
        const len = this.buf.readInt32BE(1);
        if (len < 4) throw new Error(`engine sent a message with length ${len}`);
        if (this.buf.length >= len + 1) {
          const msg = { type: String.fromCharCode(this.buf[0]!), body: this.buf.subarray(5, len + 1) };
          this.buf = this.buf.subarray(len + 1);
          return msg;
        }
      }
      if (this.closed) return null;
      if (Date.now() >= deadline) throw new Error(`timed out waiting for a message (${this.buf.length} bytes pending)`);
      await this.wait(deadline);
    }
  }

  /** Messages up to and including the first of `type`; throws if the socket closes or an error comes first. */
  async readUntil(type: string, timeoutMs = 5000): Promise<BackendMessage[]> {
    const deadline = Date.now() + timeoutMs;
    const out: BackendMessage[] = [];
    for (;;) {
      const m = await this.readMessage(Math.max(1, deadline - Date.now()));
      if (m === null) throw new Error(`closed before '${type}'; got ${out.map((x) => x.type).join('')}`);
      out.push(m);
      if (m.type === type) return out;
      if (m.type === 'E' && type !== 'E') {
        const f = parseErrorFields(m.body);
        // An ERROR inside a simple query is followed by Z; the caller may want it.
        if (f.get('S') === 'FATAL') throw new Error(`FATAL ${f.get('C')}: ${f.get('M')}`);
      }
    }
  }

  /** Every message until the socket closes (or the deadline), and whether it closed. */
  async drain(timeoutMs = 5000): Promise<{ messages: BackendMessage[]; closed: boolean }> {
    const deadline = Date.now() + timeoutMs;
    const messages: BackendMessage[] = [];
    for (;;) {
      let m: BackendMessage | null;
      try {
        m = await this.readMessage(Math.max(1, deadline - Date.now()));
      } catch {
        return { messages, closed: this.closed };
      }
      if (m === null) return { messages, closed: true };
      messages.push(m);
    }
  }

  /** True if the socket closes within the timeout. */
  async waitClosed(timeoutMs = 5000): Promise<boolean> {
    if (this.closed) return true;
    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<false>((resolve) => (timer = setTimeout(() => resolve(false), timeoutMs)));
    const result = await Promise.race([this.closedPromise.then(() => true as const), timedOut]);
    clearTimeout(timer);
    return result;
  }

  destroy(): void {
    this.socket.destroy();
  }

  end(): void {
    this.socket.end();
  }
}

// ---- frontend messages ----

export function int32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeInt32BE(n | 0);
  return b;
}

/** A typed frontend message with a correct length. */
export function message(type: string, body: Buffer | string = Buffer.alloc(0)): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  return Buffer.concat([Buffer.from(type, 'latin1'), int32(b.length + 4), b]);
}

/** A header alone, with any length word. */
export function header(type: string | number, length: number): Buffer {
  return Buffer.concat([Buffer.from([typeof type === 'number' ? type : type.charCodeAt(0)]), int32(length)]);
}

export function query(sql: string): Buffer {
  return message('Q', `${sql}\0`);
}

export const TERMINATE = message('X');

export function startupPacket(params: Record<string, string>, version = 3 << 16): Buffer {
  const body = Buffer.from(Object.entries(params).map(([k, v]) => `${k}\0${v}\0`).join('') + '\0');
  return Buffer.concat([int32(8 + body.length), int32(version), body]);
}

/** A startup-phase packet with a request code instead of a version (SSLRequest, CancelRequest...). */
export function requestPacket(code: number, payload: Buffer = Buffer.alloc(0)): Buffer {
  return Buffer.concat([int32(8 + payload.length), int32(code), payload]);
}

export function sslRequest(): Buffer {
  return requestPacket(80877103);
}

export function gssencRequest(): Buffer {
  return requestPacket(80877104);
}

export function cancelRequest(pid: number, secret: Buffer): Buffer {
  return requestPacket(80877102, Buffer.concat([int32(pid), secret]));
}

export function saslInitialResponse(mechanism: string, data: Buffer | null): Buffer {
  const body = Buffer.concat([Buffer.from(`${mechanism}\0`), int32(data === null ? -1 : data.length), data ?? Buffer.alloc(0)]);
  return message('p', body);
}

export function errorOf(m: BackendMessage): { severity: string; code: string; message: string; hint: string | undefined } {
  const f = parseErrorFields(m.body);
  return { severity: f.get('S') ?? '', code: f.get('C') ?? '', message: f.get('M') ?? '', hint: f.get('H') };
}

// ---- logging in ----

export interface Session {
  conn: RawSocket;
  pid: number;
  secret: Buffer;
}

/**
 * Connects and logs in; trust when no password is given, else SCRAM-SHA-256. Resolves after
 * ReadyForQuery with the cancel key the engine issued.
 */
export async function login(
  port: number,
  host: string,
  opts: { user?: string; database?: string; password?: string; timeoutMs?: number } = {},
): Promise<Session> {
  const timeout = opts.timeoutMs ?? 10_000;
  const conn = await RawSocket.connect(port, host, timeout);
  try {
    const user = opts.user ?? 'postgres';
    conn.write(startupPacket({ user, database: opts.database ?? 'postgres' }));
    if (opts.password !== undefined) await scramLogin(conn, opts.password, timeout);
    const msgs = await conn.readUntil('Z', timeout);
    const k = msgs.find((m) => m.type === 'K');
    if (!k) throw new Error('no BackendKeyData');
    return { conn, pid: k.body.readInt32BE(0), secret: Buffer.from(k.body.subarray(4)) };
  } catch (err) {
    conn.destroy();
    throw err;
  }
}

/** Reads AuthenticationSASL, then runs the exchange; returns after AuthenticationSASLFinal. */
export async function scramLogin(conn: RawSocket, password: string, timeoutMs = 10_000): Promise<void> {
  await expectAuth(conn, 10, timeoutMs);
  const client = scramClient(password);
  conn.write(saslInitialResponse('SCRAM-SHA-256', client.first));
  const cont = await expectAuth(conn, 11, timeoutMs);
  const final = client.final(cont.toString());
  conn.write(message('p', final.message));
  const fin = await expectAuth(conn, 12, timeoutMs);
  if (fin.toString() !== final.expectedServerFinal) throw new Error('server signature does not verify');
}

/** The data of the next Authentication message, which must carry `code`. */
export async function expectAuth(conn: RawSocket, code: number, timeoutMs = 10_000): Promise<Buffer> {
  const m = await conn.readMessage(timeoutMs);
  if (m === null) throw new Error(`closed while waiting for Authentication ${code}`);
  if (m.type === 'E') {
    const e = errorOf(m);
    throw new Error(`${e.severity} ${e.code}: ${e.message}`);
  }
  if (m.type !== 'R' || m.body.readInt32BE(0) !== code) {
    throw new Error(`expected Authentication ${code}, got '${m.type}' ${m.body.subarray(0, 4).toString('hex')}`);
  }
  return m.body.subarray(4);
}
