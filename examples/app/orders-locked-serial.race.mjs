// race explore examples/app/orders-locked-serial.race.mjs --oracle serial --expect held
// The fix (an advisory lock on the user's key before the count), without its invariant: every interleaving ends
// as one of the serial orders does.
import locked from './orders-locked.race.mjs'

const { invariant: _, ...race } = locked

export default { ...race, title: 'createOrderLocked, no invariant: judged against its serial orders', sessions: 2 }
