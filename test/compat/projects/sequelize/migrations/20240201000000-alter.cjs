'use strict';
// sequelize-cli migration 2, in one transaction: a column, an index, a unique and a check
// constraint, a rename.

module.exports = {
  async up(queryInterface, Sequelize) {
    await queryInterface.sequelize.transaction(async (transaction) => {
      await queryInterface.addColumn('books', 'isbn', { type: Sequelize.TEXT }, { transaction });
      await queryInterface.addIndex('books', ['author_id', 'price'], { name: 'books_author_price_idx', transaction });
      await queryInterface.addConstraint('authors', { fields: ['email'], type: 'unique', name: 'authors_email_key', transaction });
      await queryInterface.addConstraint('books', { fields: ['price'], type: 'check', where: { price: { [Sequelize.Op.gte]: 0 } }, name: 'books_price_check', transaction });
      await queryInterface.renameColumn('books', 'title', 'name', { transaction });
    });
  },

  async down(queryInterface) {
    await queryInterface.sequelize.transaction(async (transaction) => {
      await queryInterface.renameColumn('books', 'name', 'title', { transaction });
      await queryInterface.removeConstraint('books', 'books_price_check', { transaction });
      await queryInterface.removeConstraint('authors', 'authors_email_key', { transaction });
      await queryInterface.removeIndex('books', 'books_author_price_idx', { transaction });
      await queryInterface.removeColumn('books', 'isbn', { transaction });
    });
  },
};
