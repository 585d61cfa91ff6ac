// The repository function written with knex: knex.transaction, then the query builder's count and insert, as knex's
// docs write them.
import knex from 'knex'
import { Conflict } from './orders.mjs'

/** The application's knex instance; `options` adds what the deployment says (a connection, or race's connectionPool). */
export function makeKnex(options = {}) {
  return knex({ client: 'pg', ...options })
}

export async function createOrder(db, userId, amount, { locked = false } = {}) {
  return db.transaction(async (trx) => {
    if (locked) await trx.raw('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`orders:${userId}`])
    const [{ pending }] = await trx('orders').where({ user_id: userId, status: 'pending' }).count({ pending: '*' })
    if (Number(pending) > 0) throw new Conflict('409: an order is already pending')
    await trx('orders').insert({ user_id: userId, amount, status: 'pending' })
  })
}

export { Conflict }
