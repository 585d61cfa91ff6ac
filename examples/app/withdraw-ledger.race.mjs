// race explore examples/app/withdraw-ledger.race.mjs --n 3
// Three withdrawals of 30 from an account of 100 (begin; select the balance; update it with the balance computed in
// JavaScript; insert into the ledger; commit), over node-postgres: every way they can interleave that could end
// differently. In some, a write is lost: the balance no longer matches the ledger.
import { InsufficientFunds, withdraw } from './withdraw-ledger.mjs'

export default {
  title: 'withdraw-ledger: the balance read, then written back (a lost update)',
  driver: 'pg',
  sessions: 3,
  setup: [
    'create table accounts (id int primary key, balance int not null)',
    'insert into accounts values (1, 100)',
    'create table ledger (id bigserial primary key, account_id int not null, amount int not null)',
  ],
  session: (db) => withdraw(db, 1, 30),
  rejects: [InsufficientFunds],
  invariant: 'select (select balance from accounts where id = 1) = 100 - (select coalesce(sum(amount), 0) from ledger where account_id = 1) as held',
  expect: 'violated',
}
