// race run examples/app/orders-mariadb.race.mjs --database-url mysql://root@127.0.0.1:3306/test --schedule lockstep
import { Conflict, createOrder } from './orders-mariadb.mjs'

export default {
  title: 'createOrder with the mariadb connector: count, then insert',
  driver: 'mariadb',
  sessions: 10,
  setup: [
    'create table orders (id bigint auto_increment primary key, user_id varchar(64) not null, amount int not null, status varchar(16) not null) engine=innodb',
    'create table users (id varchar(64) primary key) engine=innodb',
    'insert into users (id) values (:user)',
  ],
  session: (conn, ctx) => createOrder(conn, ctx.user, 42),
  // The error the application throws on purpose to say no: a session that throws it is rejected (any other
  // error that is not the driver's is a bug, and the trial cannot be decided).
  rejects: [Conflict],
  invariant: "select count(*) <= 1 from orders where status = 'pending'",
  expect: 'violated',
}
