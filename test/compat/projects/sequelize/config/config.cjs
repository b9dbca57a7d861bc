// The database comes from the environment the lifecycle gives sequelize-cli.
module.exports = {
  development: {
    dialect: 'postgres',
    host: process.env.DB_HOST,
    port: Number(process.env.DB_PORT),
    username: process.env.DB_USER,
    database: process.env.DB_NAME,
    logging: false,
  },
};
