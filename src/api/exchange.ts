// One HTTP request and its whole answer, for the API client, over node:http (or node:https for an
// https URL). Not fetch: in a one-shot `pgx` command, fetch's first request (undici and its WASM
// parser) and the wait before node could exit cost about 80 ms, more than all the rest of `pgx
// status` (77 ms, node's start included); node:http answers a local API in a few ms and lets the
// process exit at once. Unlike fetch it follows no redirect: the API sends none. Keep-alive
// connections come from node's global agents, whose idle sockets keep no process alive.

import http from 'node:http';
import https from 'node:https';

export interface Exchange {
  method: string;
  headers: Record<string, string>;
  body?: string;
  /** From the request to the answer's last byte. */
  timeoutMs: number;
}

export interface Answer {
  status: number;
  text: string;
}

/**
 * Sends the request and reads the answer as UTF-8. Rejects with the socket's error (its `code`, e.g.
 * ECONNREFUSED) or, past the deadline, an Error named TimeoutError.
 */
export function exchange(url: string, req: Exchange): Promise<Answer> {
  const target = new URL(url);
  const transport = target.protocol === 'https:' ? https : http;
  const headers = req.body === undefined ? req.headers : { ...req.headers, 'content-length': String(Buffer.byteLength(req.body)) };
  return new Promise((resolve, reject) => {
    const fail = (err: Error): void => {
      clearTimeout(deadline);
      reject(err);
    };
    const request = transport.request(target, { method: req.method, headers }, (response) => {
      const chunks: Buffer[] = [];
      response.on('data', (chunk: Buffer) => chunks.push(chunk));
      response.on('error', fail);
      response.on('end', () => {
        clearTimeout(deadline);
        resolve({ status: response.statusCode ?? 0, text: Buffer.concat(chunks).toString('utf8') });
      });
    });
    const deadline = setTimeout(() => {
      const err = new Error(`no answer within ${req.timeoutMs} ms`);
      err.name = 'TimeoutError';
      request.destroy(err);
    }, req.timeoutMs);
    request.on('error', fail);
    request.end(req.body);
  });
}
