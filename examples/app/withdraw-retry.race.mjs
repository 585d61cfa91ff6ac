// race explore examples/app/withdraw-retry.race.mjs --isolation serializable --inject 40001@commit
// SERIALIZABLE with the correct retry loop: re-read and retry on 40001/40P01, at most 5 times.
import { InsufficientFunds, withdrawWithRetry } from './withdraw.mjs'
import { account } from './withdraw-setup.mjs'

export default {
  title: 'withdraw: SERIALIZABLE with the correct retry loop: re-read and retry on 40001/40P01, at most 5 times',
  driver: 'pg',
  sessions: 2,
  ...account,
  session: (db) => withdrawWithRetry(db, 1, 60),
  rejects: [InsufficientFunds],
  expect: 'held',
}
