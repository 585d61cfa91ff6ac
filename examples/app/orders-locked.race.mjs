// race run examples/app/orders-locked.race.mjs --n 10
// The same function with pg_advisory_xact_lock on the user's key before the count: the invariant holds.
import { Conflict, createOrderLocked } from './orders.mjs'

export default {
  title: 'createOrderLocked: the count and the insert under a transaction-scoped advisory lock',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  session: (db, ctx) => createOrderLocked(db, ctx.user, 42),
  // The error the application throws on purpose to say no: a session that throws it is rejected (any other
  // error that is not the driver's is a bug, and the trial cannot be decided).
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'held',
}
