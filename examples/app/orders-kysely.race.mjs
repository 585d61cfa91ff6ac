// race run examples/app/orders-kysely.race.mjs --n 10 --schedule lockstep
// Kysely takes a pool: ctx.pool is one over the session's own connection.
import { Conflict, createOrder } from './orders-kysely.mjs'

export default {
  title: 'createOrder with Kysely (PostgresDialect): count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  session: (_client, ctx) => createOrder(ctx.pool, ctx.user, 42),
  // The error the application throws on purpose to say no: a session that throws it is rejected (any other
  // error that is not the driver's is a bug, and the trial cannot be decided).
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
