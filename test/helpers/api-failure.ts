// What a call through ApiClient failed with: the test asserts it failed as an API error, then reads
// its status, SQLSTATE and message.

import { expect } from 'chai';
import { ApiClientError } from '../../src/api/client.js';

export async function apiFailure(work: Promise<unknown>): Promise<ApiClientError> {
  const err = await work.then(
    () => null,
    (e: unknown) => e,
  );
  expect(err).to.be.instanceOf(ApiClientError);
  return err as ApiClientError;
}
