// race run examples/app/orders-pg-promise.race.mjs --schedule lockstep
// pg-promise builds a pg Pool from the connection object it is given, and a pg Pool takes the Client class to make
// its connections with (`Client`): ctx.pg's Client hands out the session's own connection.
import { Conflict, createOrder, makeDb } from './orders-pg-promise.mjs'

export default {
  title: 'createOrder with pg-promise (db.tx): count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  open: (_client, ctx) => makeDb({ Client: ctx.pg.Client }, ctx.session),
  close: (db) => db.$pool.end(),
  session: (db, ctx) => createOrder(db, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
