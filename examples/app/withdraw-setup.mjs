// What the withdrawal races share: one account holding 100, its withdrawals, and the bookkeeping invariant.
export const account = {
  setup: [
    'create table accounts (id int primary key, balance int not null)',
    'create table withdrawals (id bigserial primary key, account int not null, amount int not null)',
    'insert into accounts values (1, 100)',
  ],
  invariant: {
    sql: `select a.balance = 100 - coalesce(sum(w.amount), 0) and a.balance >= 0 as held, a.balance, coalesce(sum(w.amount), 0) as withdrawn
          from accounts a left join withdrawals w on w.account = a.id where a.id = 1 group by a.balance`,
    description: 'the balance is 100 minus what was withdrawn, and never negative',
  },
}
