import { expect } from 'chai';
import { PassThrough } from 'node:stream';
import { createLogger } from '../src/log.js';

describe('log: structured lines, secrets dropped, debug free when off', function () {
  function capture(level: 'info' | 'debug') {
    const stream = new PassThrough();
    const lines: string[] = [];
    stream.setEncoding('utf8').on('data', (s: string) => lines.push(...s.split('\n').filter(Boolean)));
    return { logger: createLogger({ format: 'json', level, stream }), lines };
  }

  it('at the default level, a debug call reads none of its fields', function () {
    const { logger } = capture('info');
    let reads = 0;
    const fields = {
      get database() {
        reads++;
        return 'tdb_app__x';
      },
    };
    logger.debug('database-minted', fields);
    logger.child({ component: 'engine' }).debug('database-minted', fields);
    expect(reads).to.equal(0);
  });

  it('at debug level, a debug line is written, without password-like fields', async function () {
    const { logger, lines } = capture('debug');
    logger.child({ component: 'engine' }).debug('database-minted', { database: 'tdb_app__x', password: 'hunter2' });
    await new Promise((resolve) => setImmediate(resolve));
    expect(lines).to.have.length(1);
    const line = JSON.parse(lines[0]!) as Record<string, unknown>;
    expect(line).to.include({ level: 'debug', message: 'database-minted', database: 'tdb_app__x', component: 'engine' });
    expect(lines[0]).not.to.include('hunter2');
  });
});
