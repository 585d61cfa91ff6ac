// Reading a session's isolation level from INNODB_TRX while another reader (another race on the same server) keeps
// InnoDB's transaction cache busy. InnoDB refreshes that cache only for a read that comes 0.1 s after the last one,
// so the other reader makes nearly every fresh copy and race's own reads see copies it did not make. The level must
// still be read (from the other reader's fresh copy, which shows race's marker transaction), not "could not be read".
// Skipped, saying so, when no server answers at MYSQL_URL.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { MysqlLab } from '../../src/db/mysql.js'
import { UNREAD_LEVEL } from '../../src/db/sqlstate.js'
import { resolveTarget } from '../../src/db/target.js'
import { MYSQL_URL, busyTrxReader, useMysql } from './support.js'

const my = useMysql()

test("a session's level is read while another reader makes INNODB_TRX's fresh copies and keeps race's reads from refreshing it", async (t) => {
  if (my.why) return t.skip(my.why)
  const lab = await MysqlLab.open(resolveTarget(MYSQL_URL), 5000)
  const space = await lab.createSpace('level-read', false)
  // The other reader (support.ts busyTrxReader) makes nearly every fresh copy of INNODB_TRX.
  const { started, stop } = busyTrxReader(my.conn!)
  try {
    await lab.query(`create table \`${space.name}\`.t (id int primary key) engine=innodb`)
    const s = await lab.openSession({ applicationName: 'race level-read test', space: space.name, params: {}, connectTimeoutMs: 5000, stepTimeoutMs: 10_000 })
    try {
      for (const sql of ['set transaction isolation level read committed', 'start transaction', 'insert into t values (1)']) await s.step(sql, [], true).result
      await started
      const run = s.step('commit', [], true)
      const level = await run.level
      await run.result
      assert.notEqual(level, UNREAD_LEVEL, 'the level could not be read while another reader kept the cache fresh')
      assert.equal(level, 'read committed')
    } finally {
      await s.close()
    }
  } finally {
    assert.ok((await stop()) > 0)
    await space.drop()
    await lab.close()
  }
})
