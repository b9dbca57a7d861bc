// Knex seed: the lifecycle fixtures (test/compat/lifecycles/data.ts), replacing whatever is there.

import type { Knex } from 'knex';
import { AUTHORS, BOOKS } from '../../../lifecycles/data.js';

export async function seed(knex: Knex): Promise<void> {
  await knex('books').del();
  await knex('authors').del();
  const ids = await knex('authors').insert(AUTHORS.map((a) => ({ ...a }))).returning<{ id: number }[]>('id');
  await knex('books').insert(BOOKS.map((b) => ({ author_id: ids[b.author]!.id, title: b.title, price: b.price, published: b.published })));
}
