// Connected pairs of real sockets without PostgreSQL: a local server on a Unix socket in a temp dir,
// each connection to it giving both ends. Engine unit tests put the engine on one end and play the
// client or the backend on the other with message builders (backend-messages.ts).

import fs from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { scratchDir } from './scratch.js';

export interface SocketPairs {
  /** A new connected pair: `near` is the connecting end, `far` the accepted one. */
  pair(): Promise<{ near: net.Socket; far: net.Socket }>;
  close(): Promise<void>;
}

export async function socketPairs(): Promise<SocketPairs> {
  const dir = scratchDir('pgx-pair-');
  const file = path.join(dir, 'pair.sock');
  const accepted: net.Socket[] = [];
  const server = net.createServer((s) => accepted.push(s));
  const made: net.Socket[] = [];
  await new Promise<void>((resolve) => server.listen(file, resolve));
  return {
    async pair() {
      const near = net.connect(file);
      made.push(near);
      await new Promise<void>((resolve, reject) => near.once('connect', resolve).once('error', reject));
      while (accepted.length === 0) await new Promise((r) => setImmediate(r));
      const far = accepted.shift()!;
      made.push(far);
      return { near, far };
    },
    async close() {
      for (const s of made) s.destroy();
      await new Promise<void>((resolve) => server.close(() => resolve()));
      fs.rmSync(dir, { recursive: true, force: true });
    },
  };
}
