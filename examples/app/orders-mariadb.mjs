// The repository function written with the mariadb connector (MySQL/MariaDB, InnoDB). The fix there is a
// row lock on the user's own row (SELECT ... FOR UPDATE on the parent row every decision goes through; the row
// exists already: inserting it here too, from every session at once, deadlocks on InnoDB's insert locks).
import { Conflict } from './orders.mjs'
export async function createOrder(conn, userId, amount, { locked = false } = {}) {
  await conn.beginTransaction()
  try {
    if (locked) await conn.query('select id from users where id = ? for update', [userId])
    const [{ pending }] = await conn.query("select count(*) as pending from orders where user_id = ? and status = 'pending'", [userId])
    if (Number(pending) > 0) throw new Conflict('409: an order is already pending')
    await conn.query("insert into orders (user_id, amount, status) values (?, ?, 'pending')", [userId, amount])
    await conn.commit()
  } catch (e) {
    await conn.rollback()
    throw e
  }
}

export { Conflict }
