// The repository function written with pg-promise: db.tx, then one() and none(), as pg-promise's docs write them.
import pgPromise from 'pg-promise'
import { Conflict } from './orders.mjs'

const pgp = pgPromise()

/**
 * The application's database object: `pgp(connection, context)`; a connection object may name the pg Client class
 * to use, and a database context (here the session's name) tells one object from another on the same connection.
 */
export function makeDb(connection, context) {
  return pgp(connection, context)
}

export async function createOrder(db, userId, amount, { locked = false } = {}) {
  return db.tx(async (t) => {
    if (locked) await t.one('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`orders:${userId}`])
    const { pending } = await t.one("select count(*)::int as pending from orders where user_id = $1 and status = 'pending'", [userId])
    if (pending > 0) throw new Conflict('409: an order is already pending')
    await t.none("insert into orders (user_id, amount, status) values ($1, $2, 'pending')", [userId, amount])
  })
}

export { Conflict }
