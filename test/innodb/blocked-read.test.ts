// Seeing a session wait for a row lock on InnoDB while another reader (another race on the same server) keeps
// InnoDB's transaction cache busy. A row-lock wait is known only from a copy of INNODB_TRX / INNODB_LOCK_WAITS, which
// InnoDB refreshes only for a read that comes 0.1 s after the last one: the other reader makes nearly every fresh
// copy, so race's own reads almost never do. A lockstep race must still see its waiting session waiting (from the
// other reader's copy, once it provably postdates the waiting statement), not run into --step-timeout.
// Skipped, saying so, when no server answers at MYSQL_URL.
import assert from 'node:assert/strict'
import { performance } from 'node:perf_hooks'
import { test } from 'node:test'
import { race } from '../support/server.js'
import { MYSQL_URL, databasesOf, busyTrxReader, useMysql } from './support.js'

const my = useMysql()

interface Run {
  exitCode: number
  matched: boolean
  deviations: string[]
  sessions: { name: string; outcome: string; waitedMs: number; ms: number; reason: string | null }[]
}

test('a lockstep race sees its session wait for a row lock while another reader keeps INNODB_TRX busy', async (t) => {
  if (my.why) return t.skip(my.why)
  // The other reader (support.ts busyTrxReader) makes nearly every fresh copy of INNODB_TRX.
  const { started, stop } = busyTrxReader(my.conn!)
  try {
    await started
    for (let i = 0; i < 3; i++) {
      const t0 = performance.now()
      // t2's SELECT ... FOR UPDATE waits for t1's row lock: in lockstep t1 commits only once t2 is seen waiting.
      const r = await race(['run', 'lost-update-for-update', '--database-url', MYSQL_URL, '--no-color', '--json', '--step-timeout', '5s'], { timeoutMs: 60_000 })
      const ms = performance.now() - t0
      const doc = JSON.parse(r.stdout) as Run
      const at = `run ${i + 1}: ${r.stdout}\n${r.stderr}`
      assert.equal(r.code, 0, at)
      assert.equal(doc.matched, true, at)
      assert.deepEqual(
        doc.sessions.map((s) => [s.name, s.outcome]),
        [
          ['t1', 'committed'],
          ['t2', 'committed'],
        ],
        at,
      )
      assert.ok(doc.sessions[1].waitedMs > 0, `t2 was never seen waiting: ${at}`)
      assert.equal(doc.sessions[0].waitedMs, 0, at)
      // Seen waiting while it waited, not when --step-timeout (5 s) would have ended the wait.
      assert.ok(doc.sessions[1].waitedMs < 5000, at)
      t.diagnostic(`run ${i + 1}: ${Math.round(ms)} ms, t2 waited ${Math.round(doc.sessions[1].waitedMs)} ms, sessions ${doc.sessions.map((s) => Math.round(s.ms)).join(' / ')} ms`)
      assert.deepEqual(await databasesOf(my.conn!, r.pid), [])
    }
  } finally {
    assert.ok((await stop()) > 0)
  }
})
