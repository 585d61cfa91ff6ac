// race run examples/app/orders-drizzle.race.mjs --n 10 --schedule lockstep
import { createOrder } from './orders-drizzle.mjs'

export default {
  title: 'createOrder with Drizzle over node-postgres: count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  session: (client, ctx) => createOrder(client, ctx.user, 42),
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
