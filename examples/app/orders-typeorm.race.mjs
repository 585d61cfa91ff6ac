// race run examples/app/orders-typeorm.race.mjs --schedule lockstep
// TypeORM takes the pg module it builds its pool from (`driver`): ctx.pg hands out the session's own connection.
import { Conflict, createOrder, makeDataSource } from './orders-typeorm.mjs'

export default {
  title: 'createOrder with TypeORM (DataSource.transaction): count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  // Once per session's connection, as the application does at start-up: its queries are not steps.
  open: (_client, ctx) => makeDataSource({ driver: ctx.pg }).initialize(),
  close: (dataSource) => dataSource.destroy(),
  session: (dataSource, ctx) => createOrder(dataSource, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
