// Defect 11: Ctrl-C during race explore on MariaDB exits 130 with race's one line, every time. The connector's own
// destroy() KILLs a thread from a connection of its own and lets that KILL's failure escape (1094, Unknown thread
// id, when race's cleanup ended the thread first): an unhandled rejection that read as an internal error, exit 3.
// Against the machine's MariaDB (or MYSQL_URL); skipped, saying why, when none answers.
import assert from 'node:assert/strict'
import { randomBytes } from 'node:crypto'
import fs from 'node:fs'
import os from 'node:os'
import path from 'node:path'
import { setTimeout as sleep } from 'node:timers/promises'
import { after, before, test } from 'node:test'
import type { Connection } from 'mariadb'
import { ROOT } from '../support/server.js'
import { spawnRace, until } from '../support/procs.js'
import { MYSQL_URL, reachMysql } from '../innodb/support.js'

let conn: Connection | undefined
let why: string | undefined

before(async () => {
  ;({ conn, why } = await reachMysql())
})
after(async () => {
  await conn?.end().catch(() => {})
  if (dir) fs.rmSync(dir, { recursive: true, force: true })
})

// The example race under a name of this test's own: its run's database (race_sigint_<tag>_...) tells this test's
// threads from those of any other race on the same server.
const tag = randomBytes(4).toString('hex')
let dir = ''

/** This test's race's threads on the server now. */
async function sessions(): Promise<number> {
  const rows = (await conn!.query(`select count(*) as n from information_schema.processlist where db like 'race\\_sigint\\_${tag}\\_%'`)) as { n: bigint }[]
  return Number(rows[0].n)
}

test('Ctrl-C during race explore of an application race on MariaDB: exit 130 and one line, every time', async (t) => {
  if (!conn) return t.skip(why)
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'race-sigint-'))
  for (const f of ['orders-mariadb.mjs', 'orders.mjs']) fs.copyFileSync(path.join(ROOT, 'examples', 'app', f), path.join(dir, f))
  const race = path.join(dir, `sigint_${tag}.race.mjs`)
  fs.copyFileSync(path.join(ROOT, 'examples', 'app', 'orders-mariadb.race.mjs'), race)
  for (let i = 0; i < 8; i++) {
    const r = spawnRace(['explore', race, '--n', '3', '--database-url', MYSQL_URL], undefined, 60_000)
    // Exploring: the sessions' threads are on the server (their interleavings take seconds in all).
    await until('race exploring on MariaDB', async () => (await sessions()) >= 3, 30_000)
    // Into a different moment of a trial each time: a statement in flight, a reset, a trial's sessions connecting.
    await sleep(i * 170)
    r.child.kill('SIGINT')
    const { code, stderr } = await r.done
    assert.doesNotMatch(stderr, /internal error/, `try ${i + 1}: ${stderr}`)
    assert.equal(code, 130, `try ${i + 1}: ${stderr}`)
    assert.match(stderr.trim(), /^race: interrupted by SIGINT: stopped, cleaned up$/, `try ${i + 1}: ${stderr}`)
    // Nothing of race's left on the server for the next try.
    await until('race gone from the server', async () => (await sessions()) === 0, 10_000)
  }
})
