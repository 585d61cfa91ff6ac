// race explore examples/app/withdraw-ledger-locked-serial.race.mjs --oracle serial --expect held
// The fix (SELECT ... FOR UPDATE), without its invariant: every interleaving ends as one of the serial orders does.
import locked from './withdraw-ledger-locked.race.mjs'

const { invariant: _, ...race } = locked

export default { ...race, title: 'withdraw-ledger-locked, no invariant: judged against its serial orders', sessions: 2 }
