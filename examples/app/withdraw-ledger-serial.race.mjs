// race explore examples/app/withdraw-ledger-serial.race.mjs --oracle serial
// withdraw-ledger.race.mjs without its invariant: no SQL says what must hold. --oracle serial runs the two
// withdrawals one after the other (both orders) first, and calls violated every interleaving whose accounts and
// ledger rows, or whose sessions' endings, no serial order gives: both read 100, both write 70, two ledger rows.
import ledger from './withdraw-ledger.race.mjs'

const { invariant: _, ...race } = ledger

export default { ...race, title: 'withdraw-ledger, no invariant: judged against its serial orders', sessions: 2 }
