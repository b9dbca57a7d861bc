// Minted names, spares and the control database: pure functions, so every rule is checked exhaustively
// here, and with generated input for the character set.

import { expect } from 'chai';
import fc from 'fast-check';
import { PgxError } from '../../src/errors.js';
import {
  isReservedName,
  isSpareName,
  isUnderPrefix,
  MAX_NAME_BYTES,
  mintNameProblem,
  parseMintName,
  prefixProblem,
  spareName,
  templateNameProblem,
} from '../../src/runtime/databases/names.js';

const PREFIX = 'tdb_';

function refusal(name: string, prefix = PREFIX): PgxError {
  try {
    parseMintName(name, prefix);
  } catch (err) {
    expect(err).to.be.instanceOf(PgxError);
    return err as PgxError;
  }
  throw new Error(`${JSON.stringify(name)} was accepted`);
}

describe('runtime: names', function () {
  describe('valid minted names', function () {
    it('split template from token at the first "__" after the prefix', function () {
      expect(parseMintName('tdb_tpl_app__agent42', PREFIX)).to.deep.equal({ name: 'tdb_tpl_app__agent42', template: 'tpl_app', token: 'agent42' });
      expect(parseMintName('tdb_app__a__b', PREFIX)).to.include({ template: 'app', token: 'a__b' });
      expect(parseMintName('tdb_app___x', PREFIX)).to.include({ template: 'app', token: '_x' });
      expect(parseMintName('tdb_a1__0', PREFIX)).to.include({ template: 'a1', token: '0' });
      expect(parseMintName('ci_app__run_17', 'ci_')).to.include({ template: 'app', token: 'run_17' });
    });

    it('may be exactly 63 bytes long', function () {
      const name = `tdb_app__${'x'.repeat(MAX_NAME_BYTES - 9)}`;
      expect(Buffer.byteLength(name)).to.equal(63);
      expect(parseMintName(name, PREFIX).token).to.have.length(54);
    });
  });

  describe('bad names are refused as 3D000, worded as PostgreSQL words a missing database', function () {
    const bad: [string, RegExp][] = [
      ['tdb_', /no "__"/],
      ['tdb_app', /no "__"/],
      ['tdb_app_x', /no "__"/],
      ['tdb___x', /template part .* is empty/],
      ['tdb__', /no "__"|empty/],
      ['tdb_app__', /token .* is empty/],
      [`tdb_app__${'x'.repeat(55)}`, /64 bytes/],
      [`tdb_app__${'x'.repeat(200)}`, /bytes long/],
      ['tdb_App__x', /lower-case/],
      ['tdb_app__X', /lower-case/],
      ['tdb_a"b__x', /lower-case/],
      ["tdb_a'b__x", /lower-case/],
      ['tdb_app__x"; DROP DATABASE postgres; --', /lower-case/],
      ["tdb_app__x' OR '1'='1", /lower-case/],
      ['tdb_app__x y', /lower-case/],
      ['tdb_app__x\ty', /lower-case/],
      ['tdb_app__x\ny', /lower-case/],
      ['tdb_app__x\0', /lower-case/],
      ['tdb_my-app__x', /lower-case/],
      ['tdb_my.app__x', /lower-case/],
      ['tdb_app__x$1', /lower-case/],
      ['tdb_app__x\\', /lower-case/],
      ['tdb_café__x', /lower-case/],
      ['tdb_app__токен', /lower-case/],
      ['tdb_app__🙂', /lower-case/],
      ['tdb_app__ｘ', /lower-case/], // full-width x: looks ASCII, is not
      [`tdb_app__${'é'.repeat(30)}`, /bytes long/], // 60 characters, 69 bytes
    ];
    for (const [name, why] of bad) {
      it(`refuses ${JSON.stringify(name.length > 40 ? `${name.slice(0, 40)}...` : name)}`, function () {
        const err = refusal(name);
        expect(err.code).to.equal('UNKNOWN_DATABASE');
        expect(err.sqlstate).to.equal('3D000');
        expect(err.message).to.equal(`database "${name}" does not exist`);
        expect(err.hint).to.match(/tdb_<template>__<token>/);
        expect(err.hint).to.match(/lower-case letters, digits and underscores/);
        expect(err.detail).to.match(why);
      });
    }

    it('refuses every name holding a character outside [a-z0-9_] (generated)', function () {
      fc.assert(
        fc.property(fc.string({ maxLength: 20 }), fc.string({ minLength: 1, maxLength: 3, unit: 'binary' }), fc.string({ maxLength: 20 }), (a, odd, b) => {
          fc.pre(/[^a-z0-9_]/.test(odd));
          const name = `tdb_app__${a}${odd}${b}`;
          expect(mintNameProblem(name, PREFIX)).to.not.equal(null);
          expect(() => parseMintName(name, PREFIX)).to.throw(PgxError, /does not exist/);
        }),
        { numRuns: 2000 },
      );
    });

    it('accepts every well-formed name and gives back its parts (generated)', function () {
      const part = fc.stringMatching(/^[a-z0-9]([a-z0-9_]{0,10}[a-z0-9])?$/).filter((s) => !s.includes('__'));
      fc.assert(
        fc.property(part, fc.stringMatching(/^[a-z0-9_]{1,20}$/), (template, token) => {
          const name = `${PREFIX}${template}__${token}`;
          fc.pre(name.length <= MAX_NAME_BYTES);
          expect(parseMintName(name, PREFIX)).to.deep.equal({ name, template, token });
        }),
        { numRuns: 2000 },
      );
    });
  });

  describe('reserved names', function () {
    it('are the control database and pgx_spare_*', function () {
      expect(isReservedName('pgx_control')).to.equal(true);
      expect(isReservedName('pgx_spare_1')).to.equal(true);
      expect(isReservedName('pgx_spare_anything')).to.equal(true);
      expect(isReservedName('postgres')).to.equal(false);
      expect(isReservedName('tdb_app__x')).to.equal(false);
      expect(isSpareName(spareName(17))).to.equal(true);
      expect(isSpareName('pgx_spare_')).to.equal(false);
      expect(isSpareName('pgx_spare_1x')).to.equal(false);
    });

    it('cannot fall under any valid prefix', function () {
      expect(prefixProblem('pgx_')).to.match(/reserved/);
      expect(prefixProblem('pgx')).to.match(/reserved/);
      expect(prefixProblem('p')).to.match(/reserved/);
      expect(prefixProblem('pgx_spare_')).to.match(/reserved/);
      expect(isUnderPrefix('pgx_control', 'tdb_')).to.equal(false);
    });
  });

  describe('prefixes', function () {
    it('must be lower-case, start with a letter and leave room', function () {
      expect(prefixProblem('tdb_')).to.equal(null);
      expect(prefixProblem('ci')).to.equal(null);
      expect(prefixProblem('')).to.match(/empty/);
      expect(prefixProblem('TDB_')).to.match(/lower-case/);
      expect(prefixProblem('1tdb_')).to.match(/lower-case letter/);
      expect(prefixProblem('tdb-')).to.match(/lower-case/);
      expect(prefixProblem('x'.repeat(60))).to.match(/no room/);
    });
  });

  describe('template names', function () {
    it('must be reachable from a minted name', function () {
      expect(templateNameProblem('tpl_app', PREFIX)).to.equal(null);
      expect(templateNameProblem('app2', PREFIX)).to.equal(null);
      expect(templateNameProblem('App', PREFIX)).to.match(/lower-case/);
      expect(templateNameProblem('tpl-app', PREFIX)).to.match(/lower-case/);
      expect(templateNameProblem('tpl__app', PREFIX)).to.match(/cannot contain "__"/);
      expect(templateNameProblem('app_', PREFIX)).to.match(/cannot end with "_"/);
      expect(templateNameProblem('x'.repeat(57), PREFIX)).to.match(/exceed 63 bytes/);
      expect(templateNameProblem('x'.repeat(56), PREFIX)).to.equal(null);
      expect(templateNameProblem('tdb_app', PREFIX)).to.match(/cannot start with the mint prefix "tdb_"/);
    });
  });
});
