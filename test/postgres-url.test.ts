// A source URL's secrets: the password in the userinfo or the query goes to PGPASSWORD and nowhere
// else; what is shown keeps only the query values libpq itself would show.

import { expect } from 'chai';
import { parsePostgresUrl } from '../src/postgres-url.js';

describe('postgres-url: a source URL, shown without its secrets', function () {
  it('a ?password= is the password, and is in neither the shown form nor the command-line form', function () {
    const u = parsePostgresUrl('postgresql://someuser@127.0.0.1:1/srcdb?password=TopSecretPw123', 'the source');
    expect(u.password).to.equal('TopSecretPw123');
    expect(u.display).to.equal('postgresql://someuser@127.0.0.1:1/srcdb?password=***');
    expect(u.withoutPassword).to.equal('postgresql://someuser@127.0.0.1:1/srcdb');
    expect(u.secretParameters).to.deep.equal([]);
  });

  it("the query's password wins over the userinfo's, as in libpq; both leave the command line", function () {
    const u = parsePostgresUrl('postgres://app:old-pw@db.example:5433/shop?sslmode=require&password=new%2Bpw+x&application_name=etl', '--from');
    // %2B is '+', and a literal '+' stays '+' (libpq decodes %XX only, not a form's '+' for space).
    expect(u.password).to.equal('new+pw+x');
    expect(u.withoutPassword).to.equal('postgres://app@db.example:5433/shop?sslmode=require&application_name=etl');
    expect(u.display).to.equal('postgres://app@db.example:5433/shop?sslmode=require&password=***&application_name=etl');
  });

  it('the userinfo password alone, as before', function () {
    const u = parsePostgresUrl('postgresql://app:p%40ss@h/db', '--from');
    expect(u).to.deep.include({ password: 'p@ss', display: 'postgresql://app@h/db', withoutPassword: 'postgresql://app@h/db' });
  });

  it("masks every query value libpq does not show (its secret and debug parameters, unknown ones), and the fragment", function () {
    const text = 'postgresql://app@h/db?sslpassword=Key-Pw&oauth_client_secret=Oauth-S&scram_client_key=Ck&scram_server_key=Sk&pasword=Typo-Pw&sslkeylogfile=/tmp/k&connect_timeout=5#Frag-S';
    const u = parsePostgresUrl(text, 'the source');
    expect(u.display).to.equal('postgresql://app@h/db?sslpassword=***&oauth_client_secret=***&scram_client_key=***&scram_server_key=***&pasword=***&sslkeylogfile=***&connect_timeout=5');
    for (const secret of ['Key-Pw', 'Oauth-S', 'Ck', 'Sk', 'Typo-Pw', 'Frag-S']) expect(u.display).to.not.include(secret);
    expect(u.secretParameters).to.deep.equal(['sslpassword', 'oauth_client_secret', 'scram_client_key', 'scram_server_key']);
    expect(u.url).to.equal(text);
  });

  it('a bad percent escape is refused without quoting the URL', function () {
    expect(() => parsePostgresUrl('postgresql://app@h/db?password=Bad%zzSecret', '--from'))
      .to.throw(/^--from: a part of the URL has a % that is not followed by two hex digits$/)
      .and.satisfy((e: Error) => !e.message.includes('Bad'));
  });
});
