// Probing which roles exist through SCRAM salts, across a restart: a real role's salt is stored and
// stays; an unknown role's mock salt must stay too (derived from the data directory's 0600 secret,
// as PostgreSQL derives it from its cluster nonce), or comparing salts before and after a restart
// tells the two apart.

import { expect } from 'chai';
import fs from 'node:fs';
import path from 'node:path';
import { RawSocket, expectAuth, saslInitialResponse, startupPacket } from '../helpers/raw-socket.js';
import { startTestRuntime, type TestRuntime } from '../helpers/runtime.js';

async function saltOf(rt: TestRuntime, user: string): Promise<string> {
  const conn = await RawSocket.connect(rt.port, '127.0.0.1');
  try {
    conn.write(startupPacket({ user, database: 'postgres' }));
    await expectAuth(conn, 10);
    conn.write(saslInitialResponse('SCRAM-SHA-256', Buffer.from('n,,n=,r=probe-nonce')));
    const serverFirst = (await expectAuth(conn, 11)).toString();
    return /,s=([^,]+),/.exec(serverFirst)![1]!;
  } finally {
    conn.destroy();
  }
}

describe('engine: role existence cannot be probed through salts across restarts', function () {
  this.timeout(90_000);
  let rt: TestRuntime | null = null;
  let dataDir = '';

  after(async function () {
    await rt?.stop();
    if (dataDir) fs.rmSync(path.dirname(dataDir), { recursive: true, force: true });
  });

  it("an unknown role's mock salt is the same after a restart, like a real role's", async function () {
    rt = await startTestRuntime({ auth: 'scram', users: [{ name: 'app', password: 'secret-app-password' }] });
    dataDir = rt.dataDir;
    const before = { real: await saltOf(rt, 'app'), ghost: await saltOf(rt, 'ghost') };
    expect(before.ghost).to.equal(await saltOf(rt, 'ghost'));
    expect(before.ghost).to.not.equal(await saltOf(rt, 'ghost2'));
    // Stops the runtime but keeps its data directory (TestRuntime.stop would remove it).
    await rt.runtime.stop();
    fs.rmSync(rt.socketDir, { recursive: true, force: true });
    rt = null;
    rt = await startTestRuntime({ auth: 'scram', dataDir });
    expect({ real: await saltOf(rt, 'app'), ghost: await saltOf(rt, 'ghost') }).to.deep.equal(before);
    const file = path.join(dataDir, 'pgx-auth.secret');
    expect(fs.statSync(file).mode & 0o777).to.equal(0o600);
  });
});
