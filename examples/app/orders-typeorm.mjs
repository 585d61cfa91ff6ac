// The repository function written with TypeORM (an EntitySchema, so that plain JavaScript needs no decorators):
// DataSource.transaction, then the EntityManager's count and insert, as TypeORM's docs write them.
import { DataSource, EntitySchema } from 'typeorm'
import { Conflict } from './orders.mjs'

export const Order = new EntitySchema({
  name: 'Order',
  tableName: 'orders',
  columns: {
    id: { type: 'bigint', primary: true, generated: true },
    userId: { type: 'text', name: 'user_id' },
    amount: { type: 'int' },
    status: { type: 'text' },
  },
})

/** The application's DataSource; `options` adds what the deployment says (a URL, or race's `driver: ctx.pg`). */
export function makeDataSource(options = {}) {
  return new DataSource({ type: 'postgres', entities: [Order], ...options })
}

export async function createOrder(dataSource, userId, amount, { locked = false } = {}) {
  return dataSource.transaction(async (manager) => {
    if (locked) await manager.query('select pg_advisory_xact_lock(hashtextextended($1, 0))', [`orders:${userId}`])
    const pending = await manager.count(Order, { where: { userId, status: 'pending' } })
    if (pending > 0) throw new Conflict('409: an order is already pending')
    await manager.insert(Order, { userId, amount, status: 'pending' })
  })
}

export { Conflict }
