// The level each PostgreSQL line is logged at: a FATAL "does not exist" for a name under the mint
// prefix is the engine's own race (a login sent beside a warm claim that looked too early, then made
// again), logged at debug; for any other name it is a client's, at warn.

import { expect } from 'chai';
import { EventEmitter } from 'node:events';
import type { ChildProcess } from 'node:child_process';
import { PassThrough } from 'node:stream';
import { createLogger } from '../../src/log.js';
import { LogPipe } from '../../src/runtime/postgres/log-pipe.js';

async function levels(prefix: string | undefined, lines: string[]): Promise<string[]> {
  const out = new PassThrough();
  const raw: string[] = [];
  out.setEncoding('utf8').on('data', (s: string) => raw.push(s));
  const pipe = new LogPipe(createLogger({ format: 'json', level: 'debug', stream: out }), prefix);
  const stderr = new PassThrough();
  pipe.pipePostgres(Object.assign(new EventEmitter(), { stdout: new PassThrough(), stderr }) as unknown as ChildProcess);
  stderr.write(lines.map((l) => `${l}\n`).join(''));
  await new Promise((resolve) => setImmediate(resolve));
  return raw.join('').split('\n').filter(Boolean).map((l) => (JSON.parse(l) as { level: string }).level);
}

describe('runtime: the level of PostgreSQL log lines', function () {
  const lost = '[7] erin@tdb_tpl.app__erin2 FATAL:  database "tdb_tpl.app__erin2" does not exist';
  const typo = '[8] app@app_typo FATAL:  database "app_typo" does not exist';
  const similar = '[9] app@xtdb_tpl FATAL:  database "xtdb_tpl" does not exist';

  it('logs "does not exist" for a name under the mint prefix at debug, any other at warn', async function () {
    expect(await levels('tdb_', [lost, typo, similar])).to.deep.equal(['debug', 'warn', 'warn']);
  });

  it('with no mint prefix, at warn', async function () {
    expect(await levels(undefined, [lost])).to.deep.equal(['warn']);
  });
});
