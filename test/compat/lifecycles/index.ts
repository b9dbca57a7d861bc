// Every framework lifecycle, in the order the tests and the benchmark run them.

import type { Lifecycle } from './lifecycle.js';
import { nodePostgres } from './node-postgres.js';

export const LIFECYCLES: readonly Lifecycle[] = [nodePostgres];
