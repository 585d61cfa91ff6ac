// race run examples/app/orders.race.ts --schedule lockstep
// A race module in TypeScript, importing the application's TypeScript code as TypeScript imports it (./x.js for
// ./x.ts): race loads it through tsx (npm install --save-dev tsx), only for .ts and .mts modules.
import type { ClientBase } from 'pg'
import { defineAppRace } from 'racelab'
import { Conflict, createOrder } from './orders-typed.js'

export default defineAppRace({
  title: 'createOrder in TypeScript: count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  session: (db: ClientBase, ctx) => createOrder(db, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
})
