// The repository function written with mysql2's promise API (MySQL/MariaDB, InnoDB), as mysql2's docs write it:
// `const [rows] = await conn.execute(sql, values)`. The fix is a row lock on the user's own row, as with the mariadb
// connector (orders-mariadb.mjs). createOrderCallback is the same function in mysql2's callback API.
import { Conflict } from './orders.mjs'

export async function createOrder(conn, userId, amount, { locked = false } = {}) {
  await conn.beginTransaction()
  try {
    if (locked) await conn.execute('select id from users where id = ? for update', [userId])
    const [[{ pending }]] = await conn.execute("select count(*) as pending from orders where user_id = ? and status = 'pending'", [userId])
    if (Number(pending) > 0) throw new Conflict('409: an order is already pending')
    await conn.execute("insert into orders (user_id, amount, status) values (?, ?, 'pending')", [userId, amount])
    await conn.commit()
  } catch (e) {
    await conn.rollback()
    throw e
  }
}

/** The same, in mysql2's callback API (a callback Connection: `mysql.createConnection(...)` from 'mysql2'). */
export function createOrderCallback(conn, userId, amount, { locked = false } = {}, done) {
  const fail = (e) => conn.rollback(() => done(e))
  conn.beginTransaction((err) => {
    if (err) return done(err)
    const count = () =>
      conn.query("select count(*) as pending from orders where user_id = ? and status = 'pending'", [userId], (err, rows) => {
        if (err) return fail(err)
        if (Number(rows[0].pending) > 0) return fail(new Conflict('409: an order is already pending'))
        conn.query("insert into orders (user_id, amount, status) values (?, ?, 'pending')", [userId, amount], (err) => {
          if (err) return fail(err)
          conn.commit((err) => (err ? fail(err) : done(null)))
        })
      })
    if (!locked) return count()
    conn.query('select id from users where id = ? for update', [userId], (err) => (err ? fail(err) : count()))
  })
}

export { Conflict }
