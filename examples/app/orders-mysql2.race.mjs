// race run examples/app/orders-mysql2.race.mjs --database-url mysql://root@127.0.0.1:3306/test --schedule lockstep
// driver 'mysql2': each session gets mysql2's promise-API connection (ctx.client is the callback API's, the same
// connection); every query, execute, beginTransaction, commit and rollback is a step.
import { Conflict, createOrder } from './orders-mysql2.mjs'

export default {
  title: 'createOrder with mysql2 (promise API): count, then insert',
  driver: 'mysql2',
  sessions: 10,
  setup: [
    'create table orders (id bigint auto_increment primary key, user_id varchar(64) not null, amount int not null, status varchar(16) not null) engine=innodb',
    'create table users (id varchar(64) primary key) engine=innodb',
    'insert into users (id) values (:user)',
  ],
  session: (conn, ctx) => createOrder(conn, ctx.user, 42),
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
