// race run examples/app/orders-prisma.race.ts --schedule lockstep   (after: npx prisma generate --schema examples/app/prisma/schema.prisma)
// The Prisma race in TypeScript, over the client Prisma 7's `prisma-client` generator writes (TypeScript too).
import { defineAppRace } from 'racelab'
import { Conflict, createOrder, makePrisma } from './orders-prisma.js'
import type { PrismaClient } from './prisma/generated-ts/client.js'

export default defineAppRace({
  title: 'createOrder with Prisma 7 in TypeScript: count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  open: (_client, ctx) => makePrisma(new ctx.pg.Pool(), { schema: ctx.schema }),
  close: (prisma: PrismaClient) => prisma.$disconnect(),
  session: (prisma: PrismaClient, ctx) => createOrder(prisma, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
})
