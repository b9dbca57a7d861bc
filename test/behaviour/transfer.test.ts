// Bulk data on direct PostgreSQL and through the engine: large objects (descriptors that live only in
// their transaction, visibility to another session) and COPY in binary format both ways, byte for byte.

import { expect } from 'chai';
import { createHash } from 'node:crypto';
import { Readable, Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { from as copyFrom, to as copyTo } from 'pg-copy-streams';
import { code, errorSeen, rows, describeScenarios, type Scenario, type Session } from './harness.js';

/** INV_READ | INV_WRITE */
const READ_WRITE = 0x60000;
const OID = 424242;

const largeObjects: Scenario = {
  name: 'large objects',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    await a.q('BEGIN');
    expect(rows(await a.q(`SELECT lo_create(${OID})::int AS oid`))).to.deep.equal([{ oid: OID }]);
    await a.q(`SELECT lo_put(${OID}, 0, 'hello, '::bytea)`);
    const [open] = rows(await a.q(`SELECT lo_open(${OID}, ${READ_WRITE}) AS fd`)) as { fd: number }[];
    const fd = open!.fd;
    expect(rows(await a.q('SELECT lo_lseek64($1, 0, 2) AS pos', [fd]))).to.deep.equal([{ pos: '7' }]);
    const chunk = Buffer.concat([Buffer.from('large object ☃ '), Buffer.from(Array.from({ length: 256 }, (_, i) => i))]);
    expect(rows(await a.q('SELECT lowrite($1, $2) AS n', [fd, chunk]))).to.deep.equal([{ n: chunk.length }]);
    expect(rows(await a.q('SELECT lo_lseek64($1, 0, 0) AS pos', [fd]))).to.deep.equal([{ pos: '0' }]);
    expect(rows(await a.q('SELECT loread($1, 12) AS head', [fd]))).to.deep.equal([{ head: Buffer.from('hello, large') }]);
    expect(rows(await a.q('SELECT lo_tell64($1) AS pos', [fd]))).to.deep.equal([{ pos: '12' }]);
    await a.q('SELECT lo_truncate64($1, 100)', [fd]);
    await a.q('SELECT lo_close($1)', [fd]);
    // Not committed: the other session cannot see it.
    const unseen = await b.q(`SELECT lo_get(${OID})`);
    expect(unseen.error).to.include({ code: '42704', message: `large object ${OID} does not exist` });
    await a.q('COMMIT');
    const whole = Buffer.concat([Buffer.from('hello, '), chunk]).subarray(0, 100);
    expect(rows(await b.q(`SELECT lo_get(${OID}) AS data`))).to.deep.equal([{ data: whole }]);
    expect(rows(await b.q(`SELECT lo_get(${OID}, 7, 5) AS part`))).to.deep.equal([{ part: Buffer.from('large') }]);
    // A descriptor lives only as long as its transaction.
    const [outside] = rows(await a.q(`SELECT lo_open(${OID}, ${READ_WRITE}) AS fd`)) as { fd: number }[];
    const stale = await a.q('SELECT loread($1, 5)', [outside!.fd]);
    expect(stale.error).to.include({ code: '42704', message: `invalid large-object descriptor: ${outside!.fd}` });
    // Created and rolled back; from bytea; unlinked.
    await a.q('BEGIN');
    await a.q(`SELECT lo_create(${OID + 1})`);
    await a.q('ROLLBACK');
    expect(code(await b.q(`SELECT lo_get(${OID + 1})`))).to.equal('42704');
    expect(rows(await a.q(`SELECT lo_from_bytea(${OID + 2}, '\\x00ff00'::bytea)::int AS oid`))).to.deep.equal([{ oid: OID + 2 }]);
    expect(rows(await b.q(`SELECT lo_get(${OID + 2}) AS data`))).to.deep.equal([{ data: Buffer.from([0, 255, 0]) }]);
    expect(rows(await b.q(`SELECT lo_unlink(${OID}) AS done`))).to.deep.equal([{ done: 1 }]);
    expect(code(await a.q(`SELECT lo_get(${OID})`))).to.equal('42704');
    expect(rows(await a.q('SELECT oid::int FROM pg_largeobject_metadata ORDER BY oid'))).to.deep.equal([{ oid: OID + 2 }]);
    expect(code(await a.q(`SELECT lo_create(${OID + 2})`))).to.equal('23505');
  },
};

/** Runs COPY ... TO STDOUT and returns the bytes, or what failed. */
async function copyOut(s: Session, sql: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  await pipeline(
    s.client.query(copyTo(sql)),
    new Writable({
      write(chunk: Buffer, _enc, done) {
        chunks.push(chunk);
        done();
      },
    }),
  );
  return Buffer.concat(chunks);
}

/** Runs COPY ... FROM STDIN with these bytes, in pieces of `piece` bytes; returns the row count. */
async function copyIn(s: Session, sql: string, data: Buffer, piece = 4096): Promise<number> {
  const stream = s.client.query(copyFrom(sql));
  const pieces: Buffer[] = [];
  for (let i = 0; i < data.length; i += piece) pieces.push(data.subarray(i, i + piece));
  await pipeline(Readable.from(pieces), stream);
  return stream.rowCount ?? -1;
}

function digest(data: Buffer): { bytes: number; sha256: string } {
  return { bytes: data.length, sha256: createHash('sha256').update(data).digest('hex') };
}

const binaryCopy: Scenario = {
  name: 'COPY in binary format',
  async run(t) {
    const a = await t.session('a');
    const b = await t.session('b');
    const out = await copyOut(a, 'COPY samples TO STDOUT (FORMAT binary)');
    t.note('COPY samples TO STDOUT (FORMAT binary)', digest(out));
    // The binary COPY signature, then one tuple per row, then the -1 trailer.
    expect(out.subarray(0, 11)).to.deep.equal(Buffer.from('PGCOPY\n\xff\r\n\0', 'latin1'));
    expect(out.readInt16BE(out.length - 2)).to.equal(-1);
    const loaded = await copyIn(b, 'COPY samples_in FROM STDIN (FORMAT binary)', out);
    t.note('rows loaded', loaded);
    expect(loaded).to.equal(3000);
    const back = await copyOut(a, 'COPY samples_in TO STDOUT (FORMAT binary)');
    expect(back.equals(out), 'the round trip is byte-identical').to.equal(true);
    expect(rows(await a.q('SELECT count(*)::int AS n FROM (SELECT * FROM samples EXCEPT SELECT * FROM samples_in) d'))).to.deep.equal([{ n: 0 }]);
    // A query, one byte per write, and a binary COPY inside a transaction that rolls back.
    const query = await copyOut(a, "COPY (SELECT id, blob, ratio, span FROM samples WHERE id % 500 = 0 ORDER BY id) TO STDOUT (FORMAT binary)");
    t.note('COPY (query) TO STDOUT (FORMAT binary)', query.toString('hex'));
    await b.q('BEGIN');
    await b.q('CREATE TABLE small (id int, blob bytea, ratio float8, span interval)');
    expect(await copyIn(b, 'COPY small FROM STDIN (FORMAT binary)', query, 1)).to.equal(6);
    expect(rows(await b.q('SELECT id FROM small ORDER BY id'))).to.deep.equal([500, 1000, 1500, 2000, 2500, 3000].map((id) => ({ id })));
    await b.q('ROLLBACK');
    expect(rows(await b.q("SELECT to_regclass('small') AS t"))).to.deep.equal([{ t: null }]);
    // A damaged stream: PostgreSQL rejects it and the session goes on.
    const damaged = await copyIn(b, 'COPY samples_in FROM STDIN (FORMAT binary)', Buffer.from('NOTCOPY\n\xff\r\n\0', 'latin1')).then(
      (n) => ({ rows: n }),
      (err: unknown) => ({ error: errorSeen(err) }),
    );
    t.note('damaged COPY', damaged);
    expect(damaged).to.have.nested.property('error.code', '22P04');
    // Cut off mid-stream: the row count is where PostgreSQL says the file ended.
    const truncated = await copyIn(b, 'COPY samples_in FROM STDIN (FORMAT binary)', out.subarray(0, 1000)).then(
      (n) => ({ rows: n }),
      (err: unknown) => ({ error: errorSeen(err) }),
    );
    t.note('truncated COPY', truncated);
    expect(truncated).to.have.nested.property('error.code', '22P04');
    // The client gives up: CopyFail, and PostgreSQL reports it.
    const stream = b.client.query(copyFrom('COPY samples_in FROM STDIN (FORMAT binary)'));
    const gaveUp = new Promise<unknown>((resolve) => stream.on('error', resolve));
    stream.write(out.subarray(0, 500));
    stream.destroy(new Error('client gave up'));
    t.note('COPY abandoned by the client', errorSeen(await gaveUp));
    expect(rows(await b.q('SELECT count(*)::int AS n FROM samples_in'))).to.deep.equal([{ n: 3000 }]);
  },
};

describeScenarios('large objects and binary COPY', [largeObjects, binaryCopy]);
