'use strict';
// sequelize-cli seeder: the lifecycle fixtures (fixtures.json, written from test/compat/lifecycles/data.ts).

const { authors, books } = require('../fixtures.json');

module.exports = {
  async up(queryInterface) {
    const ids = await queryInterface.bulkInsert('authors', authors, { returning: ['id'] });
    await queryInterface.bulkInsert(
      'books',
      books.map((b) => ({ author_id: ids[b.author].id, title: b.title, price: b.price, published: b.published })),
    );
  },

  async down(queryInterface) {
    await queryInterface.bulkDelete('books', null, {});
    await queryInterface.bulkDelete('authors', null, {});
  },
};
