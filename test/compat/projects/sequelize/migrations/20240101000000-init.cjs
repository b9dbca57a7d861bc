'use strict';
// sequelize-cli migration 1: authors and their books.

module.exports = {
  async up(queryInterface, Sequelize) {
    await queryInterface.createTable('authors', {
      id: { type: Sequelize.INTEGER, autoIncrement: true, primaryKey: true, allowNull: false },
      name: { type: Sequelize.TEXT, allowNull: false },
      email: { type: Sequelize.TEXT, allowNull: false },
      country: { type: Sequelize.CHAR(2) },
    });
    await queryInterface.createTable('books', {
      id: { type: Sequelize.INTEGER, autoIncrement: true, primaryKey: true, allowNull: false },
      author_id: { type: Sequelize.INTEGER, allowNull: false, references: { model: 'authors', key: 'id' }, onDelete: 'CASCADE' },
      title: { type: Sequelize.TEXT, allowNull: false },
      price: { type: Sequelize.DECIMAL(10, 2), allowNull: false },
      published: { type: Sequelize.DATEONLY },
    });
  },

  async down(queryInterface) {
    await queryInterface.dropTable('books');
    await queryInterface.dropTable('authors');
  },
};
