// The repository function of orders-prisma.mjs as a TypeScript project writes it with Prisma 7's own generator
// (`prisma-client`, which writes the client as TypeScript into prisma/generated-ts).
import { PrismaPg } from '@prisma/adapter-pg'
import type { Pool, PoolConfig } from 'pg'
import { PrismaClient } from './prisma/generated-ts/client.js'

export class Conflict extends Error {
  readonly status = 409
  constructor(message: string) {
    super(message)
    this.name = 'Conflict'
  }
}

export function makePrisma(pool: Pool | PoolConfig, options?: { schema?: string }): PrismaClient {
  return new PrismaClient({ adapter: new PrismaPg(pool, options) })
}

export async function createOrder(prisma: PrismaClient, userId: string, amount: number, { locked = false }: { locked?: boolean } = {}): Promise<void> {
  await prisma.$transaction(async (tx) => {
    if (locked) await tx.$executeRaw`select pg_advisory_xact_lock(hashtextextended(${`orders:${userId}`}, 0))`
    const pending = await tx.order.count({ where: { userId, status: 'pending' } })
    if (pending > 0) throw new Conflict('409: an order is already pending')
    await tx.order.create({ data: { userId, amount, status: 'pending' } })
  })
}
