// The repository function written with Drizzle over node-postgres (it takes a Client or a Pool).
import { Conflict } from './orders.mjs'
import { and, count, eq, sql } from 'drizzle-orm'
import { drizzle } from 'drizzle-orm/node-postgres'
import { bigserial, integer, pgTable, text } from 'drizzle-orm/pg-core'

export const orders = pgTable('orders', {
  id: bigserial('id', { mode: 'number' }).primaryKey(),
  userId: text('user_id').notNull(),
  amount: integer('amount').notNull(),
  status: text('status').notNull(),
})

export async function createOrder(client, userId, amount, { locked = false } = {}) {
  const db = drizzle({ client })
  return db.transaction(async (tx) => {
    if (locked) await tx.execute(sql`select pg_advisory_xact_lock(hashtextextended(${'orders:' + userId}, 0))`)
    const [{ n }] = await tx
      .select({ n: count() })
      .from(orders)
      .where(and(eq(orders.userId, userId), eq(orders.status, 'pending')))
    if (n > 0) throw new Conflict('409: an order is already pending')
    await tx.insert(orders).values({ userId, amount, status: 'pending' })
  })
}

export { Conflict }
