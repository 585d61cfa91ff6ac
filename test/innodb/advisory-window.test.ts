// race check's advisory case on MySQL/MariaDB (n=5, max-pending=3): race reads each holder's isolation level from
// INNODB_TRX before its COMMIT, inside the window in which the holder keeps the user lock, and that read waits for a
// refresh of InnoDB's transaction cache, which any other reader of INNODB_TRX on the server delays (it refreshes only
// after 0.1 s without a reader). With the case's 2 s lock timeout for four holders in a row, a busy server made the
// fifth GET_LOCK time out: a deviation caused by race's observation, not by the code (race check under load). Here
// another client reads INNODB_TRX without pause for 3 s while the holder of the n=5 case has the lock (four others
// wait in GET_LOCK, seen in PROCESSLIST): every request must still be served in turn, as documented. Skipped,
// saying so, when no server answers at MYSQL_URL.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { performance } from 'node:perf_hooks'
import { spawnRace } from '../support/procs.js'
import { MYSQL_URL, databasesOf, until, useMysql } from './support.js'

const my = useMysql()

test("race check advisory on InnoDB: a reader that keeps INNODB_TRX's cache busy for 3 s inside the n=5 case's lock window does not turn race's own level read into a GET_LOCK timeout", async (t) => {
  if (my.why) return t.skip(my.why)
  const { child, done } = spawnRace(['check', 'advisory', '--database-url', MYSQL_URL, '--no-color'], undefined, 180_000)
  let finished = false
  void done.then(() => (finished = true))
  // This run's n=5 case: four of its requests waiting in GET_LOCK at once, in its own database (the n=2 case has one).
  const waiting = async () => {
    if (finished) return true
    const mine = await databasesOf(my.conn!, child.pid!)
    if (!mine.length) return false
    const [row] = (await my.conn!.query(`select count(*) as n from information_schema.processlist where state = 'User lock' and db in (?)`, [mine])) as { n: number }[]
    return Number(row?.n ?? 0) >= 3
  }
  await until(waiting, 'the n=5 case with four requests waiting in GET_LOCK', 120_000)
  let reads = 0
  if (!finished) {
    for (const end = performance.now() + 3000; performance.now() < end; reads++) await my.conn!.query('select count(*) from information_schema.innodb_trx')
  }
  const { code, stdout, stderr } = await done
  assert.ok(reads > 0, 'the busy reader ran while the n=5 case held its lock')
  assert.equal(code, 0, stdout + stderr)
  assert.match(stdout, /all 2 behaved as documented/)
  assert.deepEqual(await databasesOf(my.conn!, child.pid!), [])
})
