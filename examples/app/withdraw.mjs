// An application's withdrawal, as it would be written without race in mind: read the balance, decide in
// JavaScript, write the new balance back (read-modify-write), and count what was withdrawn in the same statement.
// Two withdrawals at once may both read 100 and both write 40: the lost update. The retry loops around it are the
// ones teams write for SERIALIZABLE: one correct, and three that are not.

export class InsufficientFunds extends Error {
  constructor(message) {
    super(message)
    this.name = 'InsufficientFunds'
    this.status = 409
  }
}

/** One attempt: the balance read, checked and written back; `stale` replaces the read (the bug of withdrawStaleRetry). */
async function attempt(db, account, amount, stale) {
  await db.query('begin')
  const { rows } = await db.query('select balance from accounts where id = $1', [account])
  const balance = stale ?? rows[0].balance
  if (balance < amount) throw new InsufficientFunds(`409: balance ${balance} is less than ${amount}`)
  await db.query('update accounts set balance = $1, withdrawn = withdrawn + $2 where id = $3', [balance - amount, amount, account])
  await db.query('commit')
  return balance
}

const retryable = (e) => e?.code === '40001' || e?.code === '40P01'

/** The race: no retry, no lock. */
export async function withdraw(db, account, amount) {
  try {
    await attempt(db, account, amount)
  } catch (e) {
    await db.query('rollback')
    throw e
  }
}

/** Correct: retry the whole transaction on 40001 and 40P01, at most 5 times, reading the balance again each time. */
export async function withdrawWithRetry(db, account, amount) {
  for (let tries = 1; ; tries++) {
    try {
      return await attempt(db, account, amount)
    } catch (e) {
      await db.query('rollback')
      if (!retryable(e) || tries >= 5) throw e
    }
  }
}

/** Wrong: retries, but with the balance its first attempt read: a retry after another withdrawal writes a stale balance. */
export async function withdrawStaleRetry(db, account, amount) {
  let seen
  for (let tries = 1; ; tries++) {
    try {
      await db.query('begin')
      const { rows } = await db.query('select balance from accounts where id = $1', [account])
      seen ??= rows[0].balance
      if (seen < amount) throw new InsufficientFunds(`409: balance ${seen} is less than ${amount}`)
      await db.query('update accounts set balance = $1, withdrawn = withdrawn + $2 where id = $3', [seen - amount, amount, account])
      await db.query('commit')
      return
    } catch (e) {
      await db.query('rollback')
      if (!retryable(e) || tries >= 5) throw e
    }
  }
}

/** Wrong: retries every error, its own "insufficient funds" included, with no limit: once the money is gone it never ends. */
export async function withdrawRetryForever(db, account, amount) {
  for (;;) {
    try {
      return await attempt(db, account, amount)
    } catch (e) {
      await db.query('rollback')
    }
  }
}
