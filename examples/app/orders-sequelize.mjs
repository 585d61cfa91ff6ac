// The repository function written with Sequelize 6: a managed transaction, then Model.count and Model.create, as
// Sequelize's docs write them.
import { DataTypes, Sequelize } from 'sequelize'
import { Conflict } from './orders.mjs'

/** The application's Sequelize instance and its Order model; `options` adds what the deployment says. */
export function makeSequelize(options = {}) {
  const sequelize = new Sequelize({ dialect: 'postgres', logging: false, ...options })
  sequelize.define(
    'Order',
    {
      id: { type: DataTypes.BIGINT, primaryKey: true, autoIncrement: true },
      userId: { type: DataTypes.TEXT, field: 'user_id', allowNull: false },
      amount: { type: DataTypes.INTEGER, allowNull: false },
      status: { type: DataTypes.TEXT, allowNull: false },
    },
    { tableName: 'orders', timestamps: false },
  )
  return sequelize
}

export async function createOrder(sequelize, userId, amount, { locked = false } = {}) {
  const { Order } = sequelize.models
  return sequelize.transaction(async (transaction) => {
    if (locked) await sequelize.query('select pg_advisory_xact_lock(hashtextextended(:key, 0))', { replacements: { key: `orders:${userId}` }, transaction })
    const pending = await Order.count({ where: { userId, status: 'pending' }, transaction })
    if (pending > 0) throw new Conflict('409: an order is already pending')
    await Order.create({ userId, amount, status: 'pending' }, { transaction })
  })
}

export { Conflict }
