// The repository function written with Kysely (PostgresDialect over a node-postgres pool).
import { Conflict } from './orders.mjs'
import { Kysely, PostgresDialect, sql } from 'kysely'

export async function createOrder(pool, userId, amount, { locked = false } = {}) {
  const db = new Kysely({ dialect: new PostgresDialect({ pool }) })
  return db.transaction().execute(async (trx) => {
    if (locked) await sql`select pg_advisory_xact_lock(hashtextextended(${'orders:' + userId}, 0))`.execute(trx)
    const { n } = await trx
      .selectFrom('orders')
      .select((eb) => eb.fn.countAll().as('n'))
      .where('user_id', '=', userId)
      .where('status', '=', 'pending')
      .executeTakeFirstOrThrow()
    if (Number(n) > 0) throw new Conflict('409: an order is already pending')
    await trx.insertInto('orders').values({ user_id: userId, amount, status: 'pending' }).execute()
  })
}

export { Conflict }
