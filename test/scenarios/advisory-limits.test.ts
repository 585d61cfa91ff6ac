// The limits of advisory locks (advisory-locks article §3.4, §7, §8.2, §8.3) on a real server: the shared lock
// table filled on race's own server, a slow API call inside the lock section, colliding keys, the two-int key.
import assert from 'node:assert/strict'
import { createHash } from 'node:crypto'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import { advisoryLocks } from '../../src/commands/locks.js'
import type { SessionReport, TrialFacts } from '../../src/engine/types.js'
import { findScenario } from '../../src/registry.js'
import { openOwnLab, race, runScenario, useLab } from '../support/server.js'

const ctx = useLab()

const by = (t: TrialFacts, name: string): SessionReport => t.sessions.find((s) => s.name === name)!

test('lock-limit: more keys than the manual\'s capacity fit, then 53200; the probe cannot take one; after the rollback one is granted', async () => {
  const s = await findScenario('lock-limit')
  const own = await openOwnLab(s)
  try {
    const [t] = (await runScenario(own.lab, s)).trials
    assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
    assert.equal(t.verdict, 'anomaly')
    const [set] = await own.lab.control`select current_setting('max_locks_per_transaction')::int * (current_setting('max_connections')::int + current_setting('max_prepared_transactions')::int) as capacity`
    const m = /^capacity (\d+) by the manual .*; the filler took (\d+) keys, then 53200; after its rollback a key was granted$/.exec(t.invariant.observed)
    assert.ok(m, t.invariant.observed)
    assert.equal(Number(m![1]), Number(set.capacity), 'the capacity is computed from the server settings')
    assert.ok(Number(m![2]) > Number(m![1]), `the formula is a floor: ${m![2]} keys fit in a table the manual sizes for ${m![1]}`)
    assert.equal(by(t, 'probe').sqlstate, '53200')
    assert.equal(by(t, 'probe').step, 'try')
    assert.equal(by(t, 'filler').reason, 'the lock table is full (53200)')
    assert.equal(by(t, 'after').outcome, 'committed')
  } finally {
    await own.stop()
  }
})

test('lock-limit runs only on its own server: a server given by URL is refused with one line (exit 2), also by race check', async () => {
  for (const args of [['run', 'lock-limit'], ['check', 'lock-limit', 'broken']]) {
    const r = await race(args, { url: ctx.server.url })
    assert.equal(r.code, 2, r.stdout + r.stderr)
    assert.equal(r.stdout, '')
    assert.equal(r.stderr.trim().split('\n').length, 1, r.stderr)
    assert.match(r.stderr, /lock-limit fills the server's shared lock table.*runs only on race's own embedded server: leave out --database-url/)
  }
  // race check with every scenario leaves it out and says so: test/cli/cli.test.ts checks that.
})

test('race run lock-limit with no database given starts a server of its own with the small lock table', async () => {
  const r = await race(['run', 'lock-limit'], { env: { COLUMNS: '200' } })
  assert.equal(r.code, 0, r.stdout + r.stderr)
  assert.match(r.stdout, /a server of its own, started with max_locks_per_transaction=10 max_connections=20/)
  assert.match(r.stdout, /probe .*failed in try .*53200 out_of_memory/)
  assert.match(r.stdout, /MATCH/)
})

test('slow-holder: the key is held through the API call; the others wait lock_timeout and fail with 55P03', async () => {
  const [t] = (await runScenario(ctx.lab, 'slow-holder')).trials
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  assert.equal(t.verdict, 'anomaly')
  const m = /^s1 held the key (\d+) ms \(lock_timeout 200 ms\); 1 pending$/.exec(t.invariant.observed)
  assert.ok(m, t.invariant.observed)
  assert.ok(Number(m![1]) >= 500, `held ${m![1]} ms, through the 500 ms call`)
  for (const w of ['s2', 's3']) {
    assert.equal(by(t, w).sqlstate, '55P03')
    // At least lock_timeout (no upper bound: on a busy machine the answer comes late; 55P03 says it was the timeout).
    assert.ok(by(t, w).waitedMs >= 200, `${w} waited ${by(t, w).waitedMs} ms`)
  }
  assert.ok(t.events.some((e) => e.session === 's1' && e.step === 'api' && e.detail === 'waited 500 ms'))
})

test('slow-holder --outside: the API is called after COMMIT; the others find the key free, and pg_locks shows none held at the call', async () => {
  const [t] = (await runScenario(ctx.lab, 'slow-holder', { params: { outside: true } })).trials
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  assert.equal(t.verdict, 'clean')
  const m = /^s1 held the key (\d+) ms \(lock_timeout 200 ms\); 1 pending; outbox: 1 recorded, 1 sent after COMMIT; advisory locks held at the API call: 0$/.exec(t.invariant.observed)
  assert.ok(m, t.invariant.observed)
  for (const w of ['s2', 's3']) {
    assert.equal(by(t, w).reason, 'pending request exists')
    assert.equal(by(t, w).waitedMs, 0, `${w} waited ${by(t, w).waitedMs} ms`)
  }
  const order = t.events.filter((e) => e.session === 's1' && e.kind === 'ok').map((e) => e.step)
  assert.ok(order.indexOf('commit') < order.indexOf('calling') && order.indexOf('calling') < order.indexOf('api'), order.join(' '))
})

test('slow-holder --outside decides from facts, not durations: with lock_timeout 1ms (a holder 200 times slower) still as documented', async () => {
  // Before, the others waited through s1's insert and COMMIT and the verdict compared how long s1 held the key
  // with lock_timeout: on a busy machine both ran over (55P03, "anomaly"). 1ms makes any machine that busy.
  const [t] = (await runScenario(ctx.lab, 'slow-holder', { params: { outside: true, lockTimeout: 1 } })).trials
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  assert.equal(t.invariant.held, true, t.invariant.observed)
  assert.ok(t.sessions.every((x) => x.sqlstate === null), t.sessions.map((x) => x.sqlstate).join())
})

test('race show slow-holder: the API call is labelled application code, not SQL', async () => {
  const r = await race(['show', 'slow-holder', '--api-ms', '2s'], { env: { COLUMNS: '200' } })
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stdout, /step api +application, not SQL: waits --api-ms \(2s\) to call the slow external API/)
})

/** §8.3's squeeze, computed here on its own: sha256('setup_request:<uuid>'), first 4 bytes, signed. */
const squeeze = (uuid: string) => createHash('sha256').update(`setup_request:${uuid}`).digest().readInt32BE(0)

test('key-collision: a pair found at run time shares one 32-bit key; B waits for A, both commit; with 64 bits nobody waits', async () => {
  const [t] = (await runScenario(ctx.lab, 'key-collision')).trials
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  const m = /^users (\S+) and (\S+) \(a 32-bit collision found after ([\d,]+) hashes in ([\d.]+) ms\): one 32-bit key (-?\d+); pending: A 1, B 1$/.exec(t.invariant.observed)
  assert.ok(m, t.invariant.observed)
  const [, a, b, hashes, , key] = m!
  assert.notEqual(a, b)
  assert.equal(squeeze(a), Number(key))
  assert.equal(squeeze(b), Number(key))
  assert.ok(Number(hashes.replace(/,/g, '')) > 1000)
  assert.equal(by(t, 'a').waitedMs, 0)
  assert.ok(by(t, 'b').waitedMs > 0, 'false contention: B waited for A')
  const [w] = (await runScenario(ctx.lab, 'key-collision', { params: { bits: '64' } })).trials
  assert.ok(w.comparison.matched, w.comparison.deviations.join('; '))
  assert.equal(w.verdict, 'clean')
  assert.match(w.invariant.observed, /: 64-bit keys -?\d+ and -?\d+; pending: A 1, B 1$/)
  assert.ok(w.sessions.every((x) => x.waitedMs === 0))
})

test('two-int-key: (1, R) and (2, R) never wait; (1, R) twice serializes; pg_locks shows classid, objid, objsubid 2', async () => {
  const [t] = (await runScenario(ctx.lab, 'two-int-key')).trials
  assert.ok(t.comparison.matched, t.comparison.deviations.join('; '))
  const m = /^pg_locks: a \(1, (\d+)\) objsubid 2; b \(2, (\d+)\) objsubid 2; c \(1, (\d+)\) objsubid 2; inside together: a\+b$/.exec(t.invariant.observed)
  assert.ok(m, t.invariant.observed)
  assert.ok(m![1] === m![2] && m![2] === m![3], 'the same resource id')
  assert.equal(by(t, 'b').waitedMs, 0)
  assert.ok(by(t, 'c').waitedMs > 0)
})

test('two-int-key --hold: race locks shows the keys as pairs (k1, k2), the waiting one first', async () => {
  const child = race(['run', 'two-int-key', '--hold', '6s'], { url: ctx.server.url })
  let rows: Awaited<ReturnType<typeof advisoryLocks>> = []
  for (let i = 0; i < 300; i++) {
    rows = (await advisoryLocks(ctx.lab.control)).filter((r) => r.pair && /race two-int-key|pg_advisory_xact_lock|observations|pairs/.test(r.query))
    if (rows.length >= 3 && rows.some((r) => !r.granted)) break
    await sleep(20)
  }
  // While the race is held, the CLI shows the same locks, as pairs.
  const cli = await race(['locks'], { url: ctx.server.url, env: { COLUMNS: '200' } })
  const r = await child
  assert.equal(r.code, 0, r.stdout + r.stderr)
  const waiting = rows.filter((x) => !x.granted)
  assert.equal(waiting.length, 1, JSON.stringify(rows))
  const resource = waiting[0].pair![1]
  assert.equal(waiting[0].pair![0], 1)
  assert.ok(rows.some((x) => x.granted && x.pair![0] === 1 && x.pair![1] === resource))
  assert.ok(rows.some((x) => x.granted && x.pair![0] === 2 && x.pair![1] === resource))
  assert.equal(cli.code, 0, cli.stderr)
  assert.match(cli.stdout, new RegExp(`\\(1, ${resource}\\)[ │]+Exclusive[ │]+waiting for`))
  assert.match(cli.stdout, new RegExp(`\\(2, ${resource}\\)[ │]+Exclusive[ │]+yes`))
})
