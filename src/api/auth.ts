// Bearer-token check for the API. Both sides are hashed first so timingSafeEqual compares equal
// lengths and the comparison time says nothing about the token.

import { createHash, timingSafeEqual } from 'node:crypto';

export class BearerToken {
  private readonly digest: Buffer;

  constructor(token: string) {
    this.digest = sha256(token);
  }

  /** True when the Authorization header carries this token. */
  accepts(authorization: string | undefined): boolean {
    const m = /^Bearer\s+(\S+)\s*$/i.exec(authorization ?? '');
    const given = sha256(m ? m[1]! : '');
    return timingSafeEqual(given, this.digest) && m !== null;
  }
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}
