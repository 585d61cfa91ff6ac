// An application's withdrawal, as it would be written without race in mind: read the balance, work out the new one
// in JavaScript, write it back, and record the withdrawal in a ledger, in one READ COMMITTED transaction. Two
// withdrawals at once can both read the same balance: one write is lost, and the ledger no longer adds up.
// withdrawLocked is the fix: SELECT ... FOR UPDATE makes the second read wait for the first transaction's end.

export class InsufficientFunds extends Error {
  constructor(message) {
    super(message)
    this.name = 'InsufficientFunds'
  }
}

async function withdrawWith(db, accountId, amount, read) {
  await db.query('begin')
  try {
    const { rows } = await db.query(read, [accountId])
    const balance = rows[0].balance
    if (balance < amount) throw new InsufficientFunds(`balance ${balance} is below ${amount}`)
    await db.query('update accounts set balance = $2 where id = $1', [accountId, balance - amount])
    await db.query('insert into ledger (account_id, amount) values ($1, $2)', [accountId, amount])
    await db.query('commit')
  } catch (e) {
    await db.query('rollback')
    throw e
  }
}

/** The race: the balance is read, then written back computed in JavaScript. */
export function withdraw(db, accountId, amount) {
  return withdrawWith(db, accountId, amount, 'select balance from accounts where id = $1')
}

/** The fix: the read locks the account's row until commit. */
export function withdrawLocked(db, accountId, amount) {
  return withdrawWith(db, accountId, amount, 'select balance from accounts where id = $1 for update')
}
