// How opening a backend fails, as the pool and the client session tell the cases apart: PostgreSQL
// refused the login (its ErrorResponse goes to the client as sent), or it could not be reached.

/** PostgreSQL refused the connection with an ErrorResponse; `frame` is that message, byte for byte. */
export class BackendRefused extends Error {
  constructor(
    readonly frame: Buffer,
    readonly sqlstate: string,
    message: string,
  ) {
    super(message);
    this.name = 'BackendRefused';
  }
}

/** The socket failed or closed before PostgreSQL answered. */
export class BackendUnreachable extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'BackendUnreachable';
  }
}
