// The repository function written with Prisma 7: an interactive transaction, then count and create, as Prisma's docs
// write them. The client is the one `prisma generate` writes from prisma/schema.prisma.
import { PrismaPg } from '@prisma/adapter-pg'
import { Conflict } from './orders.mjs'
import { PrismaClient } from './prisma/generated/index.js'

/** The application's client: Prisma 7 talks to PostgreSQL through node-postgres (PrismaPg takes a pg Pool or its options). */
export function makePrisma(poolOrOptions, adapterOptions) {
  return new PrismaClient({ adapter: new PrismaPg(poolOrOptions, adapterOptions) })
}

export async function createOrder(prisma, userId, amount, { locked = false } = {}) {
  return prisma.$transaction(async (tx) => {
    if (locked) await tx.$executeRaw`select pg_advisory_xact_lock(hashtextextended(${`orders:${userId}`}, 0))`
    const pending = await tx.order.count({ where: { userId, status: 'pending' } })
    if (pending > 0) throw new Conflict('409: an order is already pending')
    await tx.order.create({ data: { userId, amount, status: 'pending' } })
  })
}

export { Conflict }
