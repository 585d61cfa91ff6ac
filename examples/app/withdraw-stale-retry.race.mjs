// race explore examples/app/withdraw-stale-retry.race.mjs --isolation serializable --inject 40001@commit
// a retry loop that keeps the balance its first attempt read.
import { InsufficientFunds, withdrawStaleRetry } from './withdraw.mjs'
import { account } from './withdraw-setup.mjs'

export default {
  title: 'withdraw: a retry loop that keeps the balance its first attempt read',
  driver: 'pg',
  sessions: 2,
  ...account,
  session: (db) => withdrawStaleRetry(db, 1, 60),
  rejects: [InsufficientFunds],
  expect: 'violated',
}
