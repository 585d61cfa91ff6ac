// An application's repository code, as it would be written without race in mind: a user may have at most one
// pending order. It counts, then inserts: the check-then-insert race. createOrderLocked is the fix: a
// transaction-scoped advisory lock on the user's key, taken before the count, serializes the decision.

export class Conflict extends Error {
  constructor(message) {
    super(message)
    this.name = 'Conflict'
    this.status = 409
  }
}

async function inTransaction(db, work) {
  await db.query('begin')
  try {
    const out = await work()
    await db.query('commit')
    return out
  } catch (e) {
    await db.query('rollback')
    throw e
  }
}

async function countThenInsert(db, userId, amount) {
  const { rows } = await db.query("select count(*)::int as pending from orders where user_id = $1 and status = 'pending'", [userId])
  if (rows[0].pending > 0) throw new Conflict('409: an order is already pending')
  await db.query("insert into orders (user_id, amount, status) values ($1, $2, 'pending')", [userId, amount])
}

/** The race: every concurrent call may see no pending order and insert one. */
export function createOrder(db, userId, amount) {
  return inTransaction(db, () => countThenInsert(db, userId, amount))
}

/** The fix: one user's decisions take turns (the lock is released at commit or rollback). */
export function createOrderLocked(db, userId, amount) {
  return inTransaction(db, async () => {
    await db.query("select pg_advisory_xact_lock(hashtextextended('orders:' || $1, 0))", [userId])
    return countThenInsert(db, userId, amount)
  })
}
