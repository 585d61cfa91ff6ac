// race explore examples/app/withdraw-ledger-locked.race.mjs --n 3 --reduce
// The same withdrawal with SELECT ... FOR UPDATE: the second read waits for the first transaction to end, so no
// write is lost in any interleaving.
import { InsufficientFunds, withdrawLocked } from './withdraw-ledger.mjs'

export default {
  title: 'withdrawLocked: the balance read with SELECT ... FOR UPDATE',
  driver: 'pg',
  sessions: 3,
  setup: [
    'create table accounts (id int primary key, balance int not null)',
    'insert into accounts values (1, 100)',
    'create table ledger (id bigserial primary key, account_id int not null, amount int not null)',
  ],
  session: (db) => withdrawLocked(db, 1, 30),
  rejects: [InsufficientFunds],
  invariant: 'select (select balance from accounts where id = 1) = 100 - (select coalesce(sum(amount), 0) from ledger where account_id = 1) as held',
  expect: 'held',
}
