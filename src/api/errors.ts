// Errors as the API answers them: {code, sqlstate, message, hint} with the HTTP status src/errors.ts
// maps the code to (or one the API chooses, e.g. 409 for a reused request id). Unknown throws become
// INTERNAL: the cause is logged, never returned.

import { PgxError } from '../errors.js';
import type { Logger } from '../log.js';
import type { ErrorBody } from './contract.js';

/** A PgxError answered with an HTTP status other than its code's (405, 413, 415, 422, a reused request id's 409). */
export class ApiError extends PgxError {
  constructor(
    readonly status: number,
    error: PgxError,
  ) {
    super(error.code, error.message, { hint: error.hint, detail: error.detail, cause: error.cause ?? error, sqlstate: error.sqlstate });
    this.name = 'ApiError';
  }

  override withHint(hint: string | undefined): PgxError {
    return hint === undefined ? this : new ApiError(this.status, super.withHint(hint));
  }
}

/** An error as HTTP answers it: a status and the JSON body. */
export interface HttpError {
  status: number;
  body: ErrorBody;
}

export function toHttpError(err: unknown, logger: Logger, requestId: string | undefined): HttpError {
  if (err instanceof ApiError) return { status: err.status, body: errorBody(err) };
  if (err instanceof PgxError && err.code !== 'INTERNAL') return { status: err.httpStatus, body: errorBody(err) };
  logger.error('api-internal-error', { request_id: requestId, err });
  return {
    status: 500,
    body: { code: 'INTERNAL', sqlstate: 'XX000', message: 'internal error', hint: 'See the runtime log for details.' },
  };
}

/** An error as the API sends it. */
export function errorBody(err: PgxError): ErrorBody {
  return { code: err.code, sqlstate: err.sqlstate, message: err.message, hint: err.hint ?? null, ...(err.detail !== undefined ? { detail: err.detail } : {}) };
}
