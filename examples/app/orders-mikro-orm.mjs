// The repository function written with MikroORM 6: em.transactional, then count and create (flushed at commit), as
// MikroORM's docs write them (an EntitySchema, so that plain JavaScript needs no decorators).
import { EntitySchema, MikroORM, PostgreSqlDriver } from '@mikro-orm/postgresql'
import { Conflict } from './orders.mjs'

export class Order {
  constructor(userId, amount, status) {
    this.userId = userId
    this.amount = amount
    this.status = status
  }
}

export const OrderSchema = new EntitySchema({
  class: Order,
  tableName: 'orders',
  properties: {
    id: { type: 'bigint', primary: true, autoincrement: true },
    userId: { type: 'string', columnType: 'text', fieldName: 'user_id' },
    amount: { type: 'integer' },
    status: { type: 'string', columnType: 'text' },
  },
})

/** The application's MikroORM; `options` adds what the deployment says (a clientUrl, or race's driverOptions). */
export function initOrm(options = {}) {
  return MikroORM.init({ driver: PostgreSqlDriver, dbName: 'postgres', entities: [OrderSchema], discovery: { warnWhenNoEntities: false }, debug: false, ...options })
}

export async function createOrder(orm, userId, amount, { locked = false } = {}) {
  // A request's own EntityManager, as the docs say (em.fork()).
  return orm.em.fork().transactional(async (em) => {
    if (locked) await em.execute('select pg_advisory_xact_lock(hashtextextended(?, 0))', [`orders:${userId}`])
    const pending = await em.count(Order, { userId, status: 'pending' })
    if (pending > 0) throw new Conflict('409: an order is already pending')
    em.create(Order, { userId, amount, status: 'pending' })
  })
}

export { Conflict }
