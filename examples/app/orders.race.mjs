// race run examples/app/orders.race.mjs --n 10
// The application's own createOrder, unchanged, on 10 real node-postgres connections. In your project:
//   import { defineAppRace } from 'racelab'   and   export default defineAppRace({ ... })
import { Conflict, createOrder } from './orders.mjs'

export default {
  title: 'createOrder: at most one pending order per user (count, then insert)',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  session: (db, ctx) => createOrder(db, ctx.user, 42),
  // The error the application throws on purpose to say no: a session that throws it is rejected (any other
  // error that is not the driver's is a bug, and the trial cannot be decided).
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
