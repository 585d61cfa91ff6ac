// race run examples/app/orders-mikro-orm.race.mjs --schedule lockstep
// MikroORM 6 builds its knex (3.1, its own copy) from `driverOptions`, and knex takes the dialect class it connects
// with (`client`); that class's _driver() names the pg module: MikroORM's own PostgreSQL dialect, returning ctx.pg.
import { PostgreSqlKnexDialect } from '@mikro-orm/postgresql'
import { Conflict, createOrder, initOrm } from './orders-mikro-orm.mjs'

export default {
  title: 'createOrder with MikroORM 6 (em.transactional): count, then insert',
  driver: 'pg',
  sessions: 10,
  setup: ['create table orders (id bigserial primary key, user_id text not null, amount int not null, status text not null)'],
  open: (_client, ctx) =>
    initOrm({
      driverOptions: {
        client: class extends PostgreSqlKnexDialect {
          _driver() {
            return ctx.pg
          }
        },
      },
    }),
  close: (orm) => orm.close(),
  session: (orm, ctx) => createOrder(orm, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
