// The races on one MariaDB take turns to read INNODB_TRX (READ_TURN_LOCK), so that each read finds InnoDB's
// transaction cache idle for 0.1 s and gets a fresh copy, instead of races keeping it stale for each other: a level
// read before COMMIT took 0.3-0.9 s with three `race run advisory --n 5` at once, inside the window in which the
// session held the scenario's GET_LOCK, and the fifth request's GET_LOCK timed out. Seen from the server: while
// another race holds the turn (here, the test's connection holds the same user lock), a level read waits for it in
// PROCESSLIST's 'User lock' state, then reads once it is released. Skipped, saying so, when no server answers at
// MYSQL_URL.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { MysqlLab, READ_TURN_LOCK } from '../../src/db/mysql.js'
import { resolveTarget } from '../../src/db/target.js'
import { MYSQL_URL, until, useMysql } from './support.js'

const my = useMysql()

/** The threads waiting for READ_TURN_LOCK now (PROCESSLIST: a GET_LOCK wait on that name). */
async function waitingForTurn(): Promise<number[]> {
  const rows = (await my.conn!.query(`select id from information_schema.processlist where state = 'User lock' and info like ?`, [`%get_lock('${READ_TURN_LOCK}'%`])) as { id: number }[]
  return rows.map((r) => Number(r.id))
}

test("a level read waits its turn while another race reads INNODB_TRX (READ_TURN_LOCK held), then reads a fresh copy of its own", async (t) => {
  if (my.why) return t.skip(my.why)
  const lab = await MysqlLab.open(resolveTarget(MYSQL_URL), 5000)
  const space = await lab.createSpace('read-turns', false)
  try {
    await lab.query(`create table \`${space.name}\`.t (id int primary key) engine=innodb`)
    const s = await lab.openSession({ applicationName: 'race read-turns test', space: space.name, params: {}, connectTimeoutMs: 5000, stepTimeoutMs: 20_000 })
    try {
      for (const sql of ['set transaction isolation level read committed', 'start transaction', 'insert into t values (1)']) await s.step(sql, [], true).result
      // The test takes the turn, as another race reading INNODB_TRX would.
      const before = new Set(await waitingForTurn())
      const [got] = (await my.conn!.query('select get_lock(?, 10) as got', [READ_TURN_LOCK])) as { got: number }[]
      assert.equal(Number(got.got), 1)
      let released = false
      try {
        const run = s.step('commit', [], true)
        // The lab's reader waits for the turn, as the server shows: a new thread in 'User lock' on a GET_LOCK.
        await until(async () => (await waitingForTurn()).some((id) => !before.has(id)), "race's reader waiting for its turn to read INNODB_TRX")
        await my.conn!.query('do release_lock(?)', [READ_TURN_LOCK])
        released = true
        assert.equal(await run.level, 'read committed')
        await run.result
      } finally {
        if (!released) await my.conn!.query('do release_lock(?)', [READ_TURN_LOCK])
      }
    } finally {
      await s.close()
    }
  } finally {
    await space.drop()
    await lab.close()
  }
})
