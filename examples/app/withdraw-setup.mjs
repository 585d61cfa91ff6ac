// What the withdrawal races share: one account holding 100, what was withdrawn from it, and the bookkeeping
// invariant. `withdrawn` is added to atomically (withdrawn = withdrawn + $2), so it counts every withdrawal that
// committed even when the balance written beside it was computed from a stale read.
export const account = {
  setup: ['create table accounts (id int primary key, balance int not null, withdrawn int not null default 0)', 'insert into accounts (id, balance) values (1, 100)'],
  invariant: {
    sql: 'select balance = 100 - withdrawn and balance >= 0 as held, balance, withdrawn from accounts where id = 1',
    description: 'the balance is 100 minus what was withdrawn, and never negative',
  },
}
