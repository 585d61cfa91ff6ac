// race run examples/app/orders-postgresjs.race.mjs --n 10
import { createOrder } from './orders-postgresjs.mjs'

export default {
  title: 'createOrder with postgres.js (sql.begin): count, then insert',
  driver: 'postgres',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  session: (sql, ctx) => createOrder(sql, ctx.user, 42),
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
