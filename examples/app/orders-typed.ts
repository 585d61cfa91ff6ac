// The repository function of examples/app/orders.mjs as a TypeScript project writes it: typed, imported by a race
// module in TypeScript (orders.race.ts), run as it is by race run and race explore (through tsx).
import type { ClientBase } from 'pg'

export class Conflict extends Error {
  readonly status = 409
  constructor(message: string) {
    super(message)
    this.name = 'Conflict'
  }
}

interface Pending {
  pending: number
}

export async function createOrder(db: ClientBase, userId: string, amount: number, { locked = false }: { locked?: boolean } = {}): Promise<void> {
  await db.query('begin')
  try {
    if (locked) await db.query("select pg_advisory_xact_lock(hashtextextended('orders:' || $1, 0))", [userId])
    const { rows } = await db.query<Pending>("select count(*)::int as pending from orders where user_id = $1 and status = 'pending'", [userId])
    if (rows[0].pending > 0) throw new Conflict('409: an order is already pending')
    await db.query("insert into orders (user_id, amount, status) values ($1, $2, 'pending')", [userId, amount])
    await db.query('commit')
  } catch (e) {
    await db.query('rollback')
    throw e
  }
}
