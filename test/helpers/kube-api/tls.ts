// A test certificate authority and a server certificate it signs, made with node:crypto and a few lines
// of DER, so that no `openssl` binary is needed. The Kubernetes API double serves HTTPS with them and the
// kubeconfig it writes carries the CA, exactly as a real cluster's kubeconfig carries its cluster CA:
// @kubernetes/client-node refuses plain http:// servers, and we want it to verify TLS as it would in a
// cluster rather than run with skipTLSVerify.

import crypto, { type KeyObject } from 'node:crypto';
import { systemClock } from '../../../src/clock.js';

export interface TestTls {
  /** PEM of the CA certificate: what kubeconfig's certificate-authority-data holds. */
  caPem: string;
  /** PEM of the server certificate (CN localhost, SAN DNS:localhost and IP:127.0.0.1), signed by the CA. */
  certPem: string;
  /** PEM (PKCS#8) of the server's private key. */
  keyPem: string;
}

// --- DER, only the constructs an X.509 v3 certificate needs ---

function length(n: number): Buffer {
  if (n < 0x80) return Buffer.from([n]);
  const bytes: number[] = [];
  for (let v = n; v > 0; v >>= 8) bytes.unshift(v & 0xff);
  return Buffer.from([0x80 | bytes.length, ...bytes]);
}

function tlv(tag: number, ...content: Buffer[]): Buffer {
  const body = Buffer.concat(content);
  return Buffer.concat([Buffer.from([tag]), length(body.length), body]);
}

const seq = (...items: Buffer[]): Buffer => tlv(0x30, ...items);
const set = (...items: Buffer[]): Buffer => tlv(0x31, ...items);
const octets = (b: Buffer): Buffer => tlv(0x04, b);
const bits = (b: Buffer): Buffer => tlv(0x03, Buffer.from([0]), b);
const bool = (v: boolean): Buffer => tlv(0x01, Buffer.from([v ? 0xff : 0]));
const utf8 = (s: string): Buffer => tlv(0x0c, Buffer.from(s, 'utf8'));

function integer(b: Buffer): Buffer {
  return tlv(0x02, b[0]! & 0x80 ? Buffer.concat([Buffer.from([0]), b]) : b);
}

function oid(dotted: string): Buffer {
  const parts = dotted.split('.').map(Number);
  const out: number[] = [40 * parts[0]! + parts[1]!];
  for (const p of parts.slice(2)) {
    const chunk: number[] = [p & 0x7f];
    for (let v = p >> 7; v > 0; v >>= 7) chunk.unshift((v & 0x7f) | 0x80);
    out.push(...chunk);
  }
  return tlv(0x06, Buffer.from(out));
}

/** UTCTime, YYMMDDHHMMSSZ (valid for years before 2050). */
function utcTime(ms: number): Buffer {
  const iso = new Date(ms).toISOString(); // 2026-11-30T07:16:16.000Z
  const s = iso.slice(2, 4) + iso.slice(5, 7) + iso.slice(8, 10) + iso.slice(11, 13) + iso.slice(14, 16) + iso.slice(17, 19) + 'Z';
  return tlv(0x17, Buffer.from(s, 'ascii'));
}

const ECDSA_WITH_SHA256 = seq(oid('1.2.840.10045.4.3.2'));
const commonName = (cn: string): Buffer => seq(set(seq(oid('2.5.4.3'), utf8(cn))));

function extension(id: string, critical: boolean, value: Buffer): Buffer {
  return critical ? seq(oid(id), bool(true), octets(value)) : seq(oid(id), octets(value));
}

/**
 * 16 random bytes, positive and minimally encoded: a first byte of 0x00 followed by one below 0x80 is
 * not valid DER, and OpenSSL then refuses the certificate (a test that failed about once in 500 runs).
 */
function serialNumber(): Buffer {
  const serial = crypto.randomBytes(16);
  serial[0] = (serial[0]! & 0x7f) | 0x01;
  return serial;
}

function keyId(key: KeyObject): Buffer {
  return crypto.createHash('sha1').update(key.export({ type: 'spki', format: 'der' })).digest();
}

function certificate(opts: { subject: string; issuer: string; subjectKey: KeyObject; issuerKey: KeyObject; issuerPublic: KeyObject; ca: boolean }): string {
  const now = systemClock.now();
  const extensions = [
    // basicConstraints: cA TRUE for the authority, empty (cA FALSE) for the server.
    extension('2.5.29.19', true, opts.ca ? seq(bool(true)) : seq()),
    // keyUsage: keyCertSign + cRLSign for the authority, digitalSignature for the server.
    extension('2.5.29.15', true, opts.ca ? tlv(0x03, Buffer.from([1, 0x06])) : tlv(0x03, Buffer.from([7, 0x80]))),
    extension('2.5.29.14', false, octets(keyId(opts.subjectKey))), // subjectKeyIdentifier
    extension('2.5.29.35', false, seq(tlv(0x80, keyId(opts.issuerPublic)))), // authorityKeyIdentifier
  ];
  if (!opts.ca) {
    // subjectAltName: what the client checks the host name against (CN is ignored by modern clients).
    extensions.push(extension('2.5.29.17', false, seq(tlv(0x82, Buffer.from('localhost')), tlv(0x87, Buffer.from([127, 0, 0, 1])))));
    extensions.push(extension('2.5.29.37', false, seq(oid('1.3.6.1.5.5.7.3.1')))); // extKeyUsage serverAuth
  }
  const tbs = seq(
    tlv(0xa0, integer(Buffer.from([2]))), // version v3
    integer(serialNumber()),
    ECDSA_WITH_SHA256,
    commonName(opts.issuer),
    seq(utcTime(now - 3_600_000), utcTime(now + 7 * 24 * 3_600_000)),
    commonName(opts.subject),
    opts.subjectKey.export({ type: 'spki', format: 'der' }),
    tlv(0xa3, seq(...extensions)),
  );
  const signature = crypto.sign('sha256', tbs, opts.issuerKey); // DER-encoded ECDSA signature
  const der = seq(tbs, ECDSA_WITH_SHA256, bits(signature));
  const b64 = der.toString('base64').replace(/.{64}/g, '$&\n');
  return `-----BEGIN CERTIFICATE-----\n${b64}${b64.endsWith('\n') ? '' : '\n'}-----END CERTIFICATE-----\n`;
}

/** A fresh CA and a localhost server certificate signed by it; valid from an hour ago for a week. */
export function makeTestTls(): TestTls {
  const ca = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const server = crypto.generateKeyPairSync('ec', { namedCurve: 'prime256v1' });
  const caPem = certificate({ subject: 'pgx-test-kubernetes-ca', issuer: 'pgx-test-kubernetes-ca', subjectKey: ca.publicKey, issuerKey: ca.privateKey, issuerPublic: ca.publicKey, ca: true });
  const certPem = certificate({ subject: 'localhost', issuer: 'pgx-test-kubernetes-ca', subjectKey: server.publicKey, issuerKey: ca.privateKey, issuerPublic: ca.publicKey, ca: false });
  return { caPem, certPem, keyPem: server.privateKey.export({ type: 'pkcs8', format: 'pem' }).toString() };
}
