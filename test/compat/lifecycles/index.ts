// Every framework lifecycle, in the order the tests and the benchmark run them.

import type { Lifecycle } from './lifecycle.js';
import { drizzleLifecycle } from './drizzle.js';
import { knexLifecycle } from './knex.js';
import { kyselyLifecycle } from './kysely.js';
import { nodePostgres } from './node-postgres.js';
import { postgresJs } from './postgres-js.js';
import { sequelizeLifecycle } from './sequelize.js';
import { typeormLifecycle } from './typeorm.js';

export const LIFECYCLES: readonly Lifecycle[] = [nodePostgres, postgresJs, knexLifecycle, kyselyLifecycle, typeormLifecycle, sequelizeLifecycle, drizzleLifecycle];
