// race run examples/app/orders-locked.race.mts --schedule lockstep
// The fix, as an .mts race module: the same TypeScript function with its advisory lock.
import type { ClientBase } from 'pg'
import { defineAppRace } from 'racelab'
import { Conflict, createOrder } from './orders-typed.js'

export default defineAppRace({
  title: 'createOrder in TypeScript, with pg_advisory_xact_lock: the invariant holds',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  session: (db: ClientBase, ctx) => createOrder(db, ctx.user, 42, { locked: true }),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'held',
})
