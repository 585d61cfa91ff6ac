// The bench's wire client against a real server (DATABASE_URL, else embedded PostgreSQL 18): a pipelined batch
// answers each statement in its own slot, an error skips the rest of the batch and leaves the connection usable
// after ROLLBACK, and results larger than one socket read (the client's read buffer is reused) arrive whole.
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { resolveTarget, type Target } from '../../src/db/target.js'
import { WireClient, type Bound } from '../../src/bench/wire.js'
import { useServer, type TestServer } from '../support/server.js'

let server: TestServer
let target: Target
before(async () => {
  server = await useServer()
  target = resolveTarget(server.url)
})
after(async () => {
  await server?.stop()
})

const STATEMENTS = {
  begin: 'begin',
  commit: 'commit',
  rollback: 'rollback',
  plus: 'select $1::int + 1',
  none: 'select 1 where false',
  text: 'select $1::text',
  big: "select repeat('x', $1::int)",
  fail: 'select 1 / $1::int',
}
const b = (stmt: keyof typeof STATEMENTS, ...params: (string | number)[]): Bound => ({ stmt, params })

for (const unnamed of [false, true]) {
  test(`wire client${unnamed ? ', unnamed statements' : ''}: a batch's values, an error mid-batch, big results`, { timeout: 30_000 }, async () => {
    const c = await WireClient.connect(target, { connectTimeoutMs: 5000, params: { application_name: 'race bench wire test' }, unnamed })
    try {
      await c.prepare(STATEMENTS)
      assert.ok(c.pid > 0)
      // One slot per statement, in order; no row (or a command) is null.
      let r = await c.run([b('begin'), b('plus', 41), b('none'), b('text', 'grüße'), b('plus', -3), b('commit')])
      assert.deepEqual(r, { code: null, message: null, values: [null, '42', null, 'grüße', '-2', null] })
      // An error: its SQLSTATE; the server skips the rest of the batch (no value after it).
      r = await c.run([b('begin'), b('plus', 1), b('fail', 0), b('plus', 2), b('commit')])
      assert.equal(r.code, '22012')
      assert.deepEqual(r.values, [null, '2', null, null, null])
      // Still inside the failed transaction: ROLLBACK ends it and the connection goes on.
      r = await c.run([b('rollback')])
      assert.equal(r.code, null)
      r = await c.run([b('plus', 5)])
      assert.deepEqual(r.values, ['6'])
      // Results spanning several reads, back to back in one batch, then a small one.
      r = await c.run([b('big', 300_000), b('big', 70_001), b('plus', 0)])
      assert.equal(r.code, null)
      assert.equal(r.values[0]?.length, 300_000)
      assert.ok(/^x+$/.test(r.values[0]!))
      assert.equal(r.values[1]?.length, 70_001)
      assert.equal(r.values[2], '1')
      // Many small batches in flight on one connection keep their own answers.
      const rs = await Promise.all(Array.from({ length: 50 }, (_, i) => c.run([b('plus', i), b('text', `v${i}`)])))
      rs.forEach((x, i) => assert.deepEqual(x.values, [String(i + 1), `v${i}`]))
    } finally {
      await c.close()
    }
  })
}
