// The server side of SCRAM-SHA-256 (RFC 5802, RFC 7677) as PostgreSQL implements it in
// src/backend/libpq/auth-scram.c: the stored verifier format of pg_authid.rolpassword, the parsing
// rules for client-first and client-final messages (including PostgreSQL's leniencies), and the
// proof check. Pure functions over node:crypto: no sockets, timers or logs.
//
// Channel binding (RFC 5929 tls-server-end-point): over TLS the server offers SCRAM-SHA-256-PLUS, and
// the client proves it sees the server's own certificate (a hash of it, computed here by
// tlsServerEndPoint), so a man in the middle holding another certificate cannot relay the exchange.
// Without TLS nothing is offered, and a client-first message asking for binding ("p=...") is
// rejected as PostgreSQL rejects it when the client picked plain SCRAM-SHA-256.
//
// Nothing here throws on bytes from the network: the exchange functions return a result whose failure
// side carries a ScramError (the only exception type this module ever throws, and only for bad
// arguments from our own code, e.g. an invalid makeVerifier option).
//
// Over 450 lines on purpose: it is one exchange (verifier, SASLprep, client-first and client-final
// parsing, proof, channel binding) checked against PostgreSQL's auth-scram.c rule by rule, and those
// rules read best side by side, as auth-scram.c keeps them in one file.

import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';

const SCHEME = 'SCRAM-SHA-256';
const KEY_LEN = 32; // SHA-256 output
const DEFAULT_ITERATIONS = 4096; // SCRAM_SHA_256_DEFAULT_ITERATIONS
const DEFAULT_SALT_LEN = 16; // SCRAM_DEFAULT_SALT_LEN
const RAW_NONCE_LEN = 18; // SCRAM_RAW_NONCE_LEN
const MAX_ITERATIONS = 0x7fffffff; // PostgreSQL stores iterations in an int

export interface ScramVerifier {
  iterations: number;
  salt: Buffer;
  storedKey: Buffer;
  serverKey: Buffer;
}

/** What the caller does with a failure. Values are members of the project's ErrorCode union. */
export type ScramErrorKind = 'PROTOCOL_VIOLATION' | 'FEATURE_NOT_SUPPORTED' | 'INVALID_PASSWORD';

const SQLSTATE: Record<ScramErrorKind, string> = {
  PROTOCOL_VIOLATION: '08P01',
  FEATURE_NOT_SUPPORTED: '0A000',
  INVALID_PASSWORD: '28P01',
};

export class ScramError extends Error {
  /** The SQLSTATE PostgreSQL reports for this case. A caller may still answer 28P01 for all of them. */
  readonly sqlstate: string;

  constructor(
    readonly kind: ScramErrorKind,
    /** PostgreSQL's primary message, e.g. "malformed SCRAM message". */
    message: string,
    /** PostgreSQL's errdetail, for logs. Never echo to an unauthenticated client beyond what PG would. */
    readonly detail?: string,
  ) {
    super(detail === undefined ? message : `${message}: ${detail}`);
    this.name = 'ScramError';
    this.sqlstate = SQLSTATE[kind];
  }
}

export type ScramFailure = { ok: false; error: ScramError };

function malformed(detail: string): ScramError {
  return new ScramError('PROTOCOL_VIOLATION', 'malformed SCRAM message', detail);
}

// ---------------------------------------------------------------------------------------------------
// Primitives

function sha256(data: Buffer): Buffer {
  return createHash('sha256').update(data).digest();
}

function hmac(key: Buffer, data: Buffer | string): Buffer {
  return createHmac('sha256', key).update(data).digest();
}

const B64_RE = /^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?$/;

/** Strict base64 (Buffer.from is lenient and silently skips garbage). Null if not valid base64. */
function b64decode(s: string): Buffer | null {
  if (!B64_RE.test(s)) return null;
  return Buffer.from(s, 'base64');
}

/** RFC 5802 "printable": %x21-2B / %x2D-7E, i.e. printable ASCII except ','. */
function isPrintable(s: string): boolean {
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 0x21 || c > 0x7e || c === 0x2c) return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------------
// SASLprep (RFC 4013), approximated.
//
// PostgreSQL (src/common/saslprep.c) leaves pure-ASCII passwords untouched, and for other valid UTF-8
// maps non-ASCII spaces (RFC 3454 C.1.2) to U+0020, deletes "commonly mapped to nothing" characters
// (B.1), applies NFKC, then checks prohibited output, unassigned code points and bidi rules. If any
// check fails (or the mapped string is empty) it silently falls back to the raw password bytes.
//
// We implement the mapping, NFKC (String.prototype.normalize, whose Unicode version may differ from
// PostgreSQL's tables) and the prohibited-output check. We do NOT implement the unassigned-code-point
// (A.1) or bidi (RFC 3454 section 6) checks, so a password that PostgreSQL would reject under those
// rules (and therefore hash raw) is hashed normalised here. This matches PostgreSQL for ASCII and
// for ordinary non-ASCII passwords, which is the common case.

const NON_ASCII_SPACE = /[\u00A0\u1680\u2000-\u200B\u202F\u205F\u3000]/gu;
const MAPPED_TO_NOTHING = /[\u00AD\u034F\u1806\u180B-\u180D\u200C\u200D\u2060\uFE00-\uFE0F\uFEFF]/gu;
// RFC 4013 section 2.3 prohibited output: C.1.2, C.2.1, C.2.2, C.3, C.4, C.5, C.6, C.7, C.8, C.9.
const PROHIBITED =
  /[\u00A0\u1680\u2000-\u200B\u202F\u205F\u3000\u0000-\u001F\u007F\u0080-\u009F\u06DD\u070F\u180E\u200C\u200D\u2028\u2029\u2060-\u2063\u206A-\u206F\uFEFF\uFFF9-\uFFFC\u{1D173}-\u{1D17A}\uE000-\uF8FF\u{F0000}-\u{FFFFD}\u{100000}-\u{10FFFD}\uFDD0-\uFDEF\uFFFE\uFFFF\u{1FFFE}\u{1FFFF}\u{2FFFE}\u{2FFFF}\u{3FFFE}\u{3FFFF}\u{4FFFE}\u{4FFFF}\u{5FFFE}\u{5FFFF}\u{6FFFE}\u{6FFFF}\u{7FFFE}\u{7FFFF}\u{8FFFE}\u{8FFFF}\u{9FFFE}\u{9FFFF}\u{AFFFE}\u{AFFFF}\u{BFFFE}\u{BFFFF}\u{CFFFE}\u{CFFFF}\u{DFFFE}\u{DFFFF}\u{EFFFE}\u{EFFFF}\u{10FFFE}\u{10FFFF}\uD800-\uDFFF\uFFFD\u2FF0-\u2FFB\u0340\u0341\u200E\u200F\u202A-\u202E\u{E0001}\u{E0020}-\u{E007F}]/u;
// Lone surrogates cannot come from valid UTF-8; the `u` regex above does not match them, so check apart.
const LONE_SURROGATE = /\p{Surrogate}/u;

/** The bytes PostgreSQL feeds to PBKDF2 for this password (see the approximation note above). */
export function saslprep(password: string): Buffer {
  const raw = Buffer.from(password, 'utf8');
  if (/^[\u0000-\u007f]*$/.test(password)) return raw;
  if (LONE_SURROGATE.test(password)) return raw; // not valid UTF-8 in PostgreSQL's terms
  const mapped = password.replace(NON_ASCII_SPACE, ' ').replace(MAPPED_TO_NOTHING, '');
  if (mapped.length === 0) return raw;
  const normalized = mapped.normalize('NFKC');
  if (PROHIBITED.test(normalized)) return raw;
  return Buffer.from(normalized, 'utf8');
}

// ---------------------------------------------------------------------------------------------------
// Verifiers

/**
 * Parse PostgreSQL's stored form `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>`.
 * Slightly stricter than parse_scram_secret(), which uses strtol: iterations must be plain decimal
 * digits in 1..2^31-1, and the salt must be non-empty.
 */
export function parseVerifier(text: string): ScramVerifier | null {
  if (typeof text !== 'string') return null;
  const m = /^SCRAM-SHA-256\$([0-9]{1,10}):([^$:]*)\$([^$:]*):([^$:]*)$/.exec(text);
  if (m === null) return null;
  const iterations = Number(m[1]);
  if (!Number.isSafeInteger(iterations) || iterations < 1 || iterations > MAX_ITERATIONS) return null;
  const salt = b64decode(m[2]!);
  const storedKey = b64decode(m[3]!);
  const serverKey = b64decode(m[4]!);
  if (salt === null || salt.length === 0) return null;
  if (storedKey === null || storedKey.length !== KEY_LEN) return null;
  if (serverKey === null || serverKey.length !== KEY_LEN) return null;
  return { iterations, salt, storedKey, serverKey };
}

/** The stored text form of a verifier, as PostgreSQL writes it. */
export function formatVerifier(v: ScramVerifier): string {
  return (
    `${SCHEME}$${v.iterations}:${v.salt.toString('base64')}` +
    `$${v.storedKey.toString('base64')}:${v.serverKey.toString('base64')}`
  );
}

/** Build a verifier (pg_be_scram_build_secret): SaltedPassword = PBKDF2-HMAC-SHA-256(SASLprep(pw)). */
export function makeVerifier(password: string, opts: { iterations?: number; salt?: Buffer } = {}): string {
  const iterations = opts.iterations ?? DEFAULT_ITERATIONS;
  if (!Number.isInteger(iterations) || iterations < 1 || iterations > MAX_ITERATIONS) {
    throw new ScramError('PROTOCOL_VIOLATION', 'invalid SCRAM iteration count', String(iterations));
  }
  const salt = opts.salt ?? randomBytes(DEFAULT_SALT_LEN);
  if (!Buffer.isBuffer(salt) || salt.length === 0) {
    throw new ScramError('PROTOCOL_VIOLATION', 'invalid SCRAM salt', 'salt must be a non-empty Buffer');
  }
  const salted = pbkdf2Sync(saslprep(password), salt, iterations, KEY_LEN, 'sha256');
  const storedKey = sha256(hmac(salted, 'Client Key'));
  const serverKey = hmac(salted, 'Server Key');
  return formatVerifier({ iterations, salt: Buffer.from(salt), storedKey, serverKey });
}

/**
 * A deterministic fake verifier for a user that does not exist (or has no SCRAM secret), after
 * PostgreSQL's mock_scram_secret(): the salt is stable per user so probing cannot tell real users
 * from unknown ones, and the keys are all zero, so no proof can ever verify (no ClientKey hashes to
 * 32 zero bytes). The salt is SHA-256(secret || user) truncated to 16 bytes; PostgreSQL hashes
 * username || mock_auth_nonce, the order does not matter for the purpose. `iterations` should match
 * what real verifiers use (PostgreSQL's default 4096).
 */
export function mockVerifier(user: string, secret: Buffer, iterations = DEFAULT_ITERATIONS): ScramVerifier {
  const salt = createHash('sha256').update(secret).update(user, 'utf8').digest().subarray(0, DEFAULT_SALT_LEN);
  return {
    iterations,
    salt: Buffer.from(salt),
    storedKey: Buffer.alloc(KEY_LEN),
    serverKey: Buffer.alloc(KEY_LEN),
  };
}

// ---------------------------------------------------------------------------------------------------
// Message parsing. Messages are handled as "binary" strings (latin1: one char per byte), so that the
// AuthMessage is rebuilt from exactly the bytes the client sent, whatever their encoding.

class Cursor {
  pos = 0;
  constructor(readonly s: string) {}
  get atEnd(): boolean {
    return this.pos >= this.s.length;
  }
  peek(): string {
    return this.s.charAt(this.pos); // '' at end, like PostgreSQL's '\0'
  }
  /** Rest of the input as shown in PostgreSQL's error details (first char only for brevity). */
  shown(): string {
    return this.atEnd ? '' : JSON.stringify(this.s.slice(this.pos, this.pos + 1)).slice(1, -1);
  }
  /** read_attr_value(): `<attr>=<value>` up to ',' or end; a following ',' is consumed. */
  attrValue(attr: string): string {
    if (this.peek() !== attr) {
      throw malformed(`Expected attribute "${attr}" but found "${this.shown()}".`);
    }
    this.pos++;
    if (this.peek() !== '=') throw malformed(`Expected character "=" for attribute "${attr}".`);
    this.pos++;
    return this.value();
  }
  /** read_any_attr(): an ALPHA attribute name, '=', value. */
  anyAttr(): { attr: string; value: string } {
    const attr = this.peek();
    if (attr === '') throw malformed('Attribute expected, but found end of string.');
    if (!/^[A-Za-z]$/.test(attr)) {
      throw malformed(`Attribute expected, but found invalid character "${this.shown()}".`);
    }
    this.pos++;
    if (this.peek() !== '=') throw malformed(`Expected character "=" for attribute "${attr}".`);
    this.pos++;
    return { attr, value: this.value() };
  }
  private value(): string {
    const start = this.pos;
    let end = this.s.indexOf(',', start);
    if (end < 0) end = this.s.length;
    this.pos = end < this.s.length ? end + 1 : end;
    return this.s.slice(start, end);
  }
}

/** scram_exchange()'s checks common to both client messages. */
function decodeMessage(body: unknown): string {
  if (!Buffer.isBuffer(body) && !(body instanceof Uint8Array)) throw malformed('The message is empty.');
  if (body.length === 0) throw malformed('The message is empty.');
  if (body.indexOf(0) >= 0) throw malformed('Message length does not match input length.');
  return Buffer.from(body.buffer, body.byteOffset, body.byteLength).toString('latin1');
}

function guard<T>(fn: () => T): T | ScramFailure {
  try {
    return fn();
  } catch (e) {
    if (e instanceof ScramError) return { ok: false, error: e };
    // Should be unreachable; never let anything else escape on network input.
    return {
      ok: false,
      error: new ScramError('PROTOCOL_VIOLATION', 'malformed SCRAM message', `internal error: ${String(e)}`),
    };
  }
}

/** Channel binding offered on this connection (TLS): SCRAM-SHA-256-PLUS with tls-server-end-point. */
export interface ChannelBinding {
  /** The client selected SCRAM-SHA-256-PLUS (rather than SCRAM-SHA-256). */
  selected: boolean;
  /** The tls-server-end-point data: tlsServerEndPoint() of the server's certificate. */
  data: Buffer;
}

const CHANNEL_BINDING_TYPE = 'tls-server-end-point';

export interface ClientFirst {
  ok: true;
  /**
   * The GS2 channel-binding flag: 'n' (client does not support it), 'y' (thinks we do not) or 'p'
   * (binds to tls-server-end-point).
   */
  cbindFlag: 'n' | 'y' | 'p';
  /** The GS2 header, up to and including its second comma: what client-final's c= repeats. */
  gs2Header: string;
  /** client-first-message-bare as a binary (latin1, one char per byte) string; plain text for ASCII. */
  clientFirstBare: string;
  /** The client nonce (printable ASCII, possibly empty as PostgreSQL allows). */
  clientNonce: string;
  /** The `n=` value decoded as UTF-8, for logs only: PostgreSQL authenticates the startup user. */
  username: string;
}

/**
 * Parse the SASLInitialResponse data (read_client_first_message). `binding`: what this connection
 * offers (absent: no TLS, nothing offered).
 */
export function parseClientFirst(body: Buffer, binding?: ChannelBinding): ClientFirst | ScramFailure {
  return guard((): ClientFirst => {
    const cur = new Cursor(decodeMessage(body));
    const flag = cur.peek();
    let cbindFlag: 'n' | 'y' | 'p';
    switch (flag) {
      case 'n':
      case 'y':
        if (binding?.selected) {
          throw malformed('The client selected SCRAM-SHA-256-PLUS, but the SCRAM message does not include channel binding data.');
        }
        if (flag === 'y' && binding) {
          // A client that would bind, told (by someone in the middle) that we cannot.
          throw new ScramError(
            'PROTOCOL_VIOLATION',
            'SCRAM channel binding negotiation error',
            'The client supports SCRAM channel binding but thinks the server does not.  However, this server does support channel binding.',
          );
        }
        cbindFlag = flag;
        cur.pos++;
        if (cur.peek() !== ',') throw malformed(`Comma expected, but found character "${cur.shown()}".`);
        cur.pos++;
        break;
      case 'p': {
        if (!binding?.selected) {
          throw malformed(
            'The client selected SCRAM-SHA-256 without channel binding, but the SCRAM message includes channel binding data.',
          );
        }
        const type = cur.attrValue('p');
        if (type !== CHANNEL_BINDING_TYPE) {
          throw new ScramError('PROTOCOL_VIOLATION', `unsupported SCRAM channel-binding type "${type}"`);
        }
        cbindFlag = 'p';
        break;
      }
      default:
        throw malformed(`Unexpected channel-binding type "${cur.shown()}".`);
    }
    if (cur.peek() === 'a') {
      throw new ScramError('FEATURE_NOT_SUPPORTED', 'client uses authorization identity, but it is not supported');
    }
    if (cur.peek() !== ',') throw malformed(`Unexpected attribute "${cur.shown()}" in client-first-message.`);
    cur.pos++;

    const gs2Header = cur.s.slice(0, cur.pos);
    const clientFirstBare = cur.s.slice(cur.pos);
    if (cur.peek() === 'm') {
      throw new ScramError('FEATURE_NOT_SUPPORTED', 'client requires an unsupported SCRAM extension');
    }
    const username = cur.attrValue('n');
    const clientNonce = cur.attrValue('r');
    if (!isPrintable(clientNonce)) throw malformed('non-printable characters in SCRAM nonce');
    while (!cur.atEnd) cur.anyAttr(); // optional extensions, ignored
    return {
      ok: true,
      cbindFlag,
      gs2Header,
      clientFirstBare,
      clientNonce,
      username: Buffer.from(username, 'latin1').toString('utf8'),
    };
  });
}

/**
 * The server-first-message: `r=<client nonce><server nonce>,s=<salt>,i=<iterations>`.
 * `serverNonce`: a Buffer is base64-encoded (default: 18 random bytes, as PostgreSQL); a string is used
 * verbatim and must be printable (for test vectors). Throws ScramError only on bad arguments.
 */
export function serverFirst(clientNonce: string, verifier: ScramVerifier, serverNonce?: Buffer | string): string {
  return buildServerFirst(clientNonce, verifier, serverNonce).message;
}

function buildServerFirst(
  clientNonce: string,
  verifier: ScramVerifier,
  serverNonce: Buffer | string | undefined,
): { message: string; serverNonce: string } {
  const nonce =
    typeof serverNonce === 'string' ? serverNonce : (serverNonce ?? randomBytes(RAW_NONCE_LEN)).toString('base64');
  if (nonce.length === 0 || !isPrintable(nonce) || !isPrintable(clientNonce)) {
    throw new ScramError('PROTOCOL_VIOLATION', 'invalid SCRAM nonce', 'nonces must be printable and not contain ","');
  }
  return {
    message: `r=${clientNonce}${nonce},s=${verifier.salt.toString('base64')},i=${verifier.iterations}`,
    serverNonce: nonce,
  };
}

/** Everything verifyClientFinal needs from the first round trip. Plain data; keep it per connection. */
export interface ScramExchangeState {
  cbindFlag: 'n' | 'y' | 'p';
  gs2Header: string;
  /** The tls-server-end-point data client-final must carry, when the client binds ('p'). */
  bindingData: Buffer | null;
  clientFirstBare: string;
  clientNonce: string;
  serverNonce: string;
  serverFirst: string;
  verifier: ScramVerifier;
}

/**
 * First round trip in one call: parse the SASLInitialResponse data and build the server-first-message
 * (send it as AuthenticationSASLContinue) plus the state for verifyClientFinal. `binding`: the
 * channel binding this connection offers (TLS), absent without.
 */
export function startExchange(
  body: Buffer,
  verifier: ScramVerifier,
  serverNonce?: Buffer | string,
  binding?: ChannelBinding,
): { ok: true; serverFirst: string; state: ScramExchangeState } | ScramFailure {
  const first = parseClientFirst(body, binding);
  if (!first.ok) return first;
  return guard(() => {
    const sf = buildServerFirst(first.clientNonce, verifier, serverNonce);
    const state: ScramExchangeState = {
      cbindFlag: first.cbindFlag,
      gs2Header: first.gs2Header,
      bindingData: first.cbindFlag === 'p' ? binding!.data : null,
      clientFirstBare: first.clientFirstBare,
      clientNonce: first.clientNonce,
      serverNonce: sf.serverNonce,
      serverFirst: sf.message,
      verifier,
    };
    return { ok: true as const, serverFirst: sf.message, state };
  });
}

/**
 * Check the SASLResponse data (client-final-message) against the state from the first round trip
 * (read_client_final_message + verify_final_nonce + verify_client_proof). On success `serverFinal` is
 * the `v=<ServerSignature>` to send as AuthenticationSASLFinal. On failure, error.kind is
 * INVALID_PASSWORD for a wrong proof (wrong password or unknown user) and PROTOCOL_VIOLATION for a
 * malformed or inconsistent message, as PostgreSQL distinguishes them.
 */
export function verifyClientFinal(
  body: Buffer,
  state: ScramExchangeState,
): { ok: true; serverFinal: string } | ScramFailure {
  return guard(() => {
    const input = decodeMessage(body);
    const cur = new Cursor(input);

    const cbind = cur.attrValue('c');
    if (state.cbindFlag === 'p') {
      // The GS2 header and the hash of the certificate this client saw: ours, or someone else's.
      const expected = Buffer.concat([Buffer.from(state.gs2Header, 'latin1'), state.bindingData!]).toString('base64');
      if (cbind !== expected) throw new ScramError('PROTOCOL_VIOLATION', 'SCRAM channel binding check failed');
    } else if (!((cbind === 'biws' && state.cbindFlag === 'n') || (cbind === 'eSws' && state.cbindFlag === 'y'))) {
      // Without channel binding the data is the base64 GS2 header, and must repeat the first flag.
      throw new ScramError(
        'PROTOCOL_VIOLATION',
        'unexpected SCRAM channel-binding attribute in client-final-message',
      );
    }
    const finalNonce = cur.attrValue('r');

    // Optional extensions, then p=; the message without proof ends before the ',' preceding "p=".
    let proofStart: number;
    let proofValue: string;
    for (;;) {
      proofStart = cur.pos - 1;
      const { attr, value } = cur.anyAttr();
      if (attr === 'p') {
        proofValue = value;
        break;
      }
    }
    const proof = b64decode(proofValue);
    if (proof === null || proof.length !== KEY_LEN) throw malformed('Malformed proof in client-final-message.');
    if (!cur.atEnd) throw malformed('Garbage found at the end of client-final-message.');
    const finalWithoutProof = input.slice(0, proofStart);

    if (finalNonce !== state.clientNonce + state.serverNonce) {
      throw new ScramError('PROTOCOL_VIOLATION', 'invalid SCRAM response', 'Nonce does not match.');
    }

    const { storedKey, serverKey } = state.verifier;
    if (storedKey.length !== KEY_LEN || serverKey.length !== KEY_LEN) {
      throw new ScramError('INVALID_PASSWORD', 'password authentication failed', 'invalid SCRAM verifier');
    }
    const authMessage = Buffer.from(`${state.clientFirstBare},${state.serverFirst},${finalWithoutProof}`, 'latin1');
    const clientSignature = hmac(storedKey, authMessage);
    const clientKey = Buffer.alloc(KEY_LEN);
    for (let i = 0; i < KEY_LEN; i++) clientKey[i] = proof[i]! ^ clientSignature[i]!;
    if (!timingSafeEqual(sha256(clientKey), storedKey)) {
      throw new ScramError('INVALID_PASSWORD', 'password authentication failed', 'SCRAM proof does not match');
    }
    return { ok: true as const, serverFinal: `v=${hmac(serverKey, authMessage).toString('base64')}` };
  });
}

// ---------------------------------------------------------------------------------------------------
// tls-server-end-point (RFC 5929 section 4.1): the hash of the server certificate, with the hash of
// its signature algorithm, SHA-256 where that is MD5 or SHA-1. Read from the certificate's DER:
// Certificate ::= SEQUENCE { tbsCertificate SEQUENCE, signatureAlgorithm SEQUENCE { OID, ... }, ... }.

/** Signature algorithm OIDs (DER content, hex) and the hash tls-server-end-point uses for each. */
const SIGNATURE_HASH: Record<string, string> = {
  '2a864886f70d010104': 'sha256', // md5WithRSAEncryption
  '2a864886f70d010105': 'sha256', // sha1WithRSAEncryption
  '2a864886f70d01010e': 'sha224',
  '2a864886f70d01010b': 'sha256',
  '2a864886f70d01010c': 'sha384',
  '2a864886f70d01010d': 'sha512',
  '2a8648ce3d0401': 'sha256', // ecdsa-with-SHA1
  '2a8648ce3d040301': 'sha224',
  '2a8648ce3d040302': 'sha256',
  '2a8648ce3d040303': 'sha384',
  '2a8648ce3d040304': 'sha512',
  '2a8648ce380403': 'sha256', // dsa-with-sha1
  '608648016503040302': 'sha256', // dsa-with-sha256
};

/** A DER element's header at `pos`: its tag, where its content starts and ends; null if malformed. */
function derElement(der: Buffer, pos: number): { tag: number; start: number; end: number } | null {
  if (pos + 2 > der.length) return null;
  const tag = der[pos]!;
  let len = der[pos + 1]!;
  let start = pos + 2;
  if (len & 0x80) {
    const n = len & 0x7f;
    if (n === 0 || n > 4 || start + n > der.length) return null;
    len = 0;
    for (let i = 0; i < n; i++) len = len * 256 + der[start + i]!;
    start += n;
  }
  const end = start + len;
  return end > der.length ? null : { tag, start, end };
}

/**
 * The tls-server-end-point channel-binding data for a certificate (DER), or null when its signature
 * algorithm has no single hash (Ed25519, RSA-PSS, ...): then SCRAM-SHA-256-PLUS cannot be offered,
 * as PostgreSQL cannot either.
 */
export function tlsServerEndPoint(certDer: Buffer): Buffer | null {
  const cert = derElement(certDer, 0);
  if (cert === null || cert.tag !== 0x30) return null;
  const tbs = derElement(certDer, cert.start);
  if (tbs === null || tbs.tag !== 0x30) return null;
  const algorithm = derElement(certDer, tbs.end);
  if (algorithm === null || algorithm.tag !== 0x30) return null;
  const oid = derElement(certDer, algorithm.start);
  if (oid === null || oid.tag !== 0x06) return null;
  const hash = SIGNATURE_HASH[certDer.toString('hex', oid.start, oid.end)];
  return hash === undefined ? null : createHash(hash).update(certDer).digest();
}
