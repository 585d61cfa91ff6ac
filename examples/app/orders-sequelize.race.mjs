// race run examples/app/orders-sequelize.race.mjs --schedule lockstep
// Sequelize takes the driver module it connects with (`dialectModule`): ctx.pg's Client hands out the session's own
// connection.
import { Conflict, createOrder, makeSequelize } from './orders-sequelize.mjs'

export default {
  title: 'createOrder with Sequelize (sequelize.transaction): count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  // Once per session's connection, as the application does at start-up (sequelize.authenticate(): Sequelize's
  // SETs and type lookups on a new connection are sent here, where no query is a step).
  open: async (_client, ctx) => {
    const sequelize = makeSequelize({ dialectModule: ctx.pg })
    await sequelize.authenticate()
    return sequelize
  },
  close: (sequelize) => sequelize.close(),
  session: (sequelize, ctx) => createOrder(sequelize, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
