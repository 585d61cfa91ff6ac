// race explore examples/app/orders-serial.race.mjs --oracle serial
// orders.race.mjs (count, then insert) without its invariant, and 2 sessions: in every serial order the second call
// counts the first one's order and is rejected (Conflict). An interleaving in which both count 0 and both insert
// ends as no serial order does: two rows in orders, and s2 committed where it was rejected.
import orders from './orders.race.mjs'

const { invariant: _, ...race } = orders

export default { ...race, title: 'createOrder, no invariant: judged against its serial orders', sessions: 2 }
