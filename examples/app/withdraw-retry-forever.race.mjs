// race explore examples/app/withdraw-retry-forever.race.mjs --isolation serializable --inject 40001@commit
// a retry loop that retries every error with no limit.
import { InsufficientFunds, withdrawRetryForever } from './withdraw.mjs'
import { account } from './withdraw-setup.mjs'

export default {
  title: 'withdraw: a retry loop that retries every error with no limit',
  driver: 'pg',
  sessions: 2,
  ...account,
  session: (db) => withdrawRetryForever(db, 1, 60),
  rejects: [InsufficientFunds],
  expect: 'held',
  // A call that sends more queries than this is stopped as a retry loop without end (default 100).
  maxQueries: 20,
}
