// The same repository function written with postgres.js: sql.begin gives the transaction its own sql.
import { Conflict } from './orders.mjs'
export async function createOrder(sql, userId, amount, { locked = false } = {}) {
  return sql.begin(async (tx) => {
    if (locked) await tx`select pg_advisory_xact_lock(hashtextextended('orders:' || ${userId}, 0))`
    const [{ pending }] = await tx`select count(*)::int as pending from orders where user_id = ${userId} and status = 'pending'`
    if (pending > 0) throw new Conflict('409: an order is already pending')
    await tx`insert into orders (user_id, amount, status) values (${userId}, ${amount}, 'pending')`
  })
}

export { Conflict }
