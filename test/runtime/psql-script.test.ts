// The psql-script splitter on its own: statements end where psql ends them (not inside quotes,
// dollar quotes, comments or parentheses), each carries the line it starts on, COPY FROM stdin takes
// its data lines, pg_dump's meta-commands are understood and others refused with their line.

import { expect } from 'chai';
import { isOwnershipOrPrivilege, parseScript } from '../../src/runtime/templates/psql-script.js';

function sqlOf(text: string): [number, string][] {
  return parseScript(text).steps.map((s) => [s.line, s.sql.trim()]);
}

describe('runtime: psql scripts', function () {
  it('splits at semicolons outside quotes, dollar quotes, comments and parentheses', function () {
    const text = [
      "SELECT 'a;b', \"c;d\", E'e\\';f';",
      '-- a comment; with a semicolon',
      'CREATE FUNCTION f() RETURNS int LANGUAGE sql AS $body$ SELECT 1; $body$;',
      '/* outer /* nested; */ still; */ SELECT $$x;y$$;',
      'CREATE RULE r AS ON INSERT TO t DO ALSO (NOTIFY a; NOTIFY b);',
      'SELECT $1',
    ].join('\n');
    const steps = sqlOf(text);
    expect(steps.map(([line]) => line)).to.deep.equal([1, 3, 4, 5, 6]);
    expect(steps[0]![1]).to.equal("SELECT 'a;b', \"c;d\", E'e\\';f';");
    expect(steps[1]![1]).to.match(/^-- a comment; with a semicolon\nCREATE FUNCTION .* \$body\$;$/);
    expect(steps[3]![1]).to.equal('CREATE RULE r AS ON INSERT TO t DO ALSO (NOTIFY a; NOTIFY b);');
    expect(steps[4]![1]).to.equal('SELECT $1');
  });

  it('counts lines inside multi-line strings and comments', function () {
    const steps = sqlOf("SELECT 'one\ntwo';\n/* a\nb */\nSELECT 3;\nSELECT $$\n\n$$;\nSELECT 4;");
    expect(steps.map(([line]) => line)).to.deep.equal([1, 5, 6, 9]);
  });

  it('takes the data lines after COPY ... FROM stdin up to \\.', function () {
    const { steps } = parseScript('COPY public.t (id, body) FROM stdin;\n1\ttab\\there\n2\tsemi;colon\n\\.\nSELECT 1;\n');
    expect(steps).to.have.length(2);
    expect(steps[0]).to.deep.include({ kind: 'copy', line: 1, data: '1\ttab\\there\n2\tsemi;colon\n' });
    expect(steps[1]).to.deep.include({ kind: 'sql', line: 5 });
    expect(() => parseScript('COPY t FROM stdin;\n1\n')).to.throw(/line 3: COPY data has no terminating line/);
  });

  it("understands pg_dump's meta-commands and its header; refuses others with their line", function () {
    const dump = '--\n-- PostgreSQL database dump\n--\n\n\\restrict abc\n\nSET x = 1;\n\\connect shop\nSELECT 1;\n\\unrestrict abc\n';
    const parsed = parseScript(dump);
    expect(parsed.fromPgDump).to.equal(true);
    expect(parsed.steps.map((s) => [s.line, s.sql.trim()])).to.deep.equal([[7, 'SET x = 1;'], [9, 'SELECT 1;']]);
    expect(parseScript('SELECT 1;').fromPgDump).to.equal(false);
    expect(() => parseScript('SELECT 1;\n\\i other.sql\n')).to.throw(/^line 2: psql command \\i is not supported/);
    expect(() => parseScript('\\connect a\nSELECT 1;\n\\connect b\n')).to.throw(/line 3: the script connects to a second database "b"/);
    expect(() => parseScript('SELECT\n\\gexec\n')).to.throw(/line 2: psql command \\gexec inside a statement/);
    // A backslash inside a string at the start of a line is data, not a command.
    expect(sqlOf("SELECT '\n\\i x';")).to.have.length(1);
  });

  it("recognises pg_dump's ownership and privilege statements, nothing else", function () {
    for (const s of ['ALTER TABLE public.t OWNER TO shop_owner;', 'ALTER FUNCTION public.f(a integer) OWNER TO "Shop";', 'GRANT SELECT ON TABLE public.t TO PUBLIC;', 'REVOKE ALL ON SCHEMA public FROM PUBLIC;', 'ALTER DEFAULT PRIVILEGES FOR ROLE x GRANT SELECT ON TABLES TO y;', '--\n-- Name: TABLE t; Type: ACL\n--\nGRANT SELECT ON t TO r;']) {
      expect(isOwnershipOrPrivilege(s), s).to.equal(true);
    }
    for (const s of ['ALTER SEQUENCE public.s OWNED BY public.t.id;', 'ALTER TABLE ONLY public.t ADD CONSTRAINT owner_to_fk FOREIGN KEY (a) REFERENCES b;', 'CREATE TABLE grants (id int);']) {
      expect(isOwnershipOrPrivilege(s), s).to.equal(false);
    }
  });
});
