// Loaded by `npm test` (mocha --require): once every suite's after hooks have run, a directory a
// test made with scratchDir() and did not remove fails the run, naming it.

import { scratchLeftBehind } from './scratch.js';

export const mochaHooks = {
  afterAll(): void {
    const left = scratchLeftBehind();
    if (left.length > 0) throw new Error(`tests left ${left.length} scratch directories behind (each test removes what it made): ${left.join(', ')}`);
  },
};
