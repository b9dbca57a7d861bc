// The engine's TLS certificate and key, read from files at start and again on SIGHUP (as PostgreSQL
// reloads its ssl_cert_file). A reload that fails (a half-written file, a key that does not match)
// keeps the certificate in use and says why; connections already encrypted are not touched.

import fs from 'node:fs';
import tls from 'node:tls';
import { PgxError } from '../errors.js';
import type { Logger } from '../log.js';

export class TlsCertificate {
  private context: tls.SecureContext;

  constructor(
    private readonly certFile: string,
    private readonly keyFile: string,
    private readonly logger: Logger,
  ) {
    this.context = this.load();
  }

  /** The context for the next handshake. */
  current(): tls.SecureContext {
    return this.context;
  }

  /** Reads the files again; true if the new certificate is in use. */
  reload(): boolean {
    try {
      this.context = this.load();
      this.logger.info('tls-reloaded', { cert: this.certFile });
      return true;
    } catch (err) {
      this.logger.error('tls-reload-failed', { cert: this.certFile, err: (err as Error).message, hint: 'The previous certificate stays in use; fix the files and send SIGHUP again.' });
      return false;
    }
  }

  private load(): tls.SecureContext {
    let cert: Buffer;
    let key: Buffer;
    try {
      cert = fs.readFileSync(this.certFile);
      key = fs.readFileSync(this.keyFile);
    } catch (err) {
      throw new PgxError('CONFIG_INVALID', `cannot read the TLS certificate or key: ${(err as Error).message}`, {
        hint: 'Give readable PEM files with --tls-cert and --tls-key.',
      });
    }
    try {
      return tls.createSecureContext({ cert, key, minVersion: 'TLSv1.2' });
    } catch (err) {
      throw new PgxError('CONFIG_INVALID', `--tls-cert ${this.certFile} / --tls-key ${this.keyFile}: ${(err as Error).message}`, {
        hint: 'The certificate and key must be PEM and belong together.',
      });
    }
  }
}
