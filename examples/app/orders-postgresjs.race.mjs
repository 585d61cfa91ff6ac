// race run examples/app/orders-postgresjs.race.mjs --n 10
import { Conflict, createOrder } from './orders-postgresjs.mjs'

export default {
  title: 'createOrder with postgres.js (sql.begin): count, then insert',
  driver: 'postgres',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  session: (sql, ctx) => createOrder(sql, ctx.user, 42),
  // The error the application throws on purpose to say no: a session that throws it is rejected (any other
  // error that is not the driver's is a bug, and the trial cannot be decided).
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
