// What names this machine, and the rule a listener on loopback keeps. Binding to 127.0.0.1 keeps other
// machines out, not the web pages the user opens: a page can rebind its own DNS name to 127.0.0.1 (the
// browser then sends `Host: attacker.example:PORT`), or post across sites straight to 127.0.0.1 (Host is
// loopback then, but the browser adds `Origin: https://attacker.example`). Without a token either one
// acts as the runtime's superuser. So a loopback listener answers only a Host naming loopback, and no
// Origin but its own; programs (pgx, curl, the operator, ApiClient) send such a Host and no Origin.
// The HTTP API (server.ts) and `pgx mcp --http` (mcp/http.ts) share these checks.

import { PgxError } from '../errors.js';

/** A host only this machine reaches: localhost, 127.x.y.z, ::1 (a bind address, or a Host without its port). */
export function isLoopback(host: string): boolean {
  // Exact forms only: a name that merely starts with "127." (127.attacker.example) is anybody's.
  const h = host.toLowerCase().replace(/^\[(.*)\]$/, '$1');
  return h === 'localhost' || h === '::1' || /^(::ffff:)?127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(h);
}

/** The host a Host header names, without its port ('' for none); an IPv6 address keeps its brackets. */
export function hostOfHeader(header: string | undefined): string {
  if (header === undefined) return '';
  if (header.startsWith('[')) return header.slice(0, header.indexOf(']') + 1);
  return header.replace(/:\d*$/, '');
}

/**
 * Why a loopback listener refuses a request, from its Host and Origin headers; null when it may go on.
 * `own` is the listener's URL (http://127.0.0.1:7432), for the hint. Origin is allowed only as the request's own (`http://` + its loopback Host): a browser sends it
 * even on a no-CORS POST, which no Content-Type rule stops when the route takes no body.
 */
export function refuseForeign(headers: { host: string | undefined; origin: string | undefined }, own: string): PgxError | null {
  if (!isLoopback(hostOfHeader(headers.host))) {
    return new PgxError('INSUFFICIENT_PRIVILEGE', `Host ${headers.host === undefined ? '(none)' : `"${headers.host}"`} refused: this API listens on loopback and answers only a Host naming 127.0.0.1, localhost or [::1]`, {
      hint: `Call it as ${own}. To reach it under another name, listen there with a token (--api-host with --api-token-file or PGX_API_TOKEN).`,
    });
  }
  if (headers.origin !== undefined && headers.origin.toLowerCase() !== `http://${headers.host!.toLowerCase()}`) {
    return new PgxError('INSUFFICIENT_PRIVILEGE', `a request from the web origin "${headers.origin}" refused: a page elsewhere may not drive this API`, {
      hint: `Call it from a program (pgx, curl, ApiClient), which sends no Origin header, at ${own}.`,
    });
  }
  return null;
}
