// race explore examples/app/withdraw.race.mjs --isolation all
// Two withdrawals of 60 from one account holding 100: read the balance, check it, write it back. The invariant is
// the bookkeeping: the balance is 100 minus what was withdrawn, and never negative.
import { InsufficientFunds, withdraw } from './withdraw.mjs'
import { account } from './withdraw-setup.mjs'

export default {
  title: 'withdraw: read the balance, check it, write it back (read-modify-write)',
  driver: 'pg',
  sessions: 2,
  ...account,
  session: (db) => withdraw(db, 1, 60),
  rejects: [InsufficientFunds],
  expect: 'violated',
}
