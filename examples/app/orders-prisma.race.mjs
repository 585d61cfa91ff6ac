// race run examples/app/orders-prisma.race.mjs --schedule lockstep   (after: npx prisma generate --schema examples/app/prisma/schema.prisma)
// Prisma 7's PrismaPg takes a node-postgres Pool: new ctx.pg.Pool() hands out the session's own connection. Prisma
// names every table with its schema (public unless told): the adapter's `schema` is the run's own.
import { Conflict, createOrder, makePrisma } from './orders-prisma.mjs'

export default {
  title: 'createOrder with Prisma 7 ($transaction over @prisma/adapter-pg): count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  open: (_client, ctx) => makePrisma(new ctx.pg.Pool(), { schema: ctx.schema }),
  close: (prisma) => prisma.$disconnect(),
  session: (prisma, ctx) => createOrder(prisma, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
