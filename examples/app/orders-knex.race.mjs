// race run examples/app/orders-knex.race.mjs --schedule lockstep
// knex takes a node-postgres Pool as its `connectionPool` (knex 3.3): ctx.pg's Pool hands out the session's own
// connection.
import { Conflict, createOrder, makeKnex } from './orders-knex.mjs'

export default {
  title: 'createOrder with knex (knex.transaction): count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  // Once per session's connection, as the application does at start-up (knex asks the server's version on its
  // first connection; a start-up check sends it here, where no query is a step).
  open: async (_client, ctx) => {
    const db = makeKnex({ connectionPool: new ctx.pg.Pool() })
    await db.raw('select 1')
    return db
  },
  close: (db) => db.destroy(),
  session: (db, ctx) => createOrder(db, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
