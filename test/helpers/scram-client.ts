// A minimal SCRAM-SHA-256 client (RFC 5802/7677, no channel binding, no SASLprep: pass an ASCII
// password) for raw-socket protocol tests.

import { createHash, createHmac, pbkdf2Sync, randomBytes } from 'node:crypto';

export interface ScramClient {
  /** client-first-message: the SASLInitialResponse data. */
  first: Buffer;
  /** client-final-message for the server-first-message, and the server-final-message to expect. */
  final(serverFirst: string): { message: Buffer; expectedServerFinal: string };
}

export function scramClient(password: string, opts: { nonce?: string; proof?: 'right' | 'wrong' } = {}): ScramClient {
  const nonce = opts.nonce ?? randomBytes(18).toString('base64');
  const gs2 = 'n,,';
  const bare = `n=,r=${nonce}`;
  return {
    first: Buffer.from(gs2 + bare),
    final(sf) {
      const attrs = new Map(sf.split(',').map((kv) => [kv[0], kv.slice(2)] as const));
      const combined = attrs.get('r') ?? '';
      const salt = Buffer.from(attrs.get('s') ?? '', 'base64');
      const iterations = Number(attrs.get('i'));
      const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
      const clientKey = createHmac('sha256', salted).update('Client Key').digest();
      const storedKey = createHash('sha256').update(clientKey).digest();
      const serverKey = createHmac('sha256', salted).update('Server Key').digest();
      const withoutProof = `c=${Buffer.from(gs2).toString('base64')},r=${combined}`;
      const authMessage = `${bare},${sf},${withoutProof}`;
      const sig = createHmac('sha256', storedKey).update(authMessage).digest();
      const proof = Buffer.from(clientKey.map((b, i) => b ^ sig[i]!));
      if (opts.proof === 'wrong') proof[0] = proof[0]! ^ 0xff;
      return {
        message: Buffer.from(`${withoutProof},p=${proof.toString('base64')}`),
        expectedServerFinal: `v=${createHmac('sha256', serverKey).update(authMessage).digest('base64')}`,
      };
    },
  };
}
