// The rest of the advisory-locks article (§3-§11) on a real server: the numbers each scenario shows, race key
// against fixed vectors, race locks round trips, and --hold seen from another connection.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'
import postgres from 'postgres'
import type { SessionReport, TrialFacts } from '../../src/engine/types.js'
import { keyView } from '../../src/commands/key.js'
import { advisoryLocks } from '../../src/commands/locks.js'
import { timeline } from '../../src/report/timeline.js'
import { plain } from '../../src/report/color.js'
import { UsageError } from '../../src/errors.js'
import { count, race, runScenario, useLab } from '../support/server.js'

const ctx = useLab()

const by = (t: TrialFacts, name: string): SessionReport => t.sessions.find((s) => s.name === name)!

// Computed outside the project, with Python's hashlib:
// int.from_bytes(hashlib.sha256(s.encode()).digest()[:8], 'big', signed=True)
const VECTORS: [string, string, string][] = [
  ['setup_request', '42', '7844923485908670055'],
  ['setup_request', '1', '-2233356130382298698'],
  ['withdrawal', '42', '7822151929371457729'],
  ['setup_request', '3fa85f64-5717-4562-b3fc-2c963f66afa6', '3515894729850035797'],
  ['account', 'a', '-2308340465233775907'],
  ['account', 'b', '-5776647672404169317'],
  ['a', 'b', '7458984759985081548'],
  ['ns', 'ユーザー', '-9187206618072984211'],
]

test('race key: the §8.1 derivation agrees with Python hashlib, negative keys included', () => {
  for (const [ns, id, want] of VECTORS) assert.equal(keyView(ns, id).key, want, `${ns}:${id}`)
  assert.equal(keyView('setup_request', '1').sql, 'SELECT pg_advisory_xact_lock(-2233356130382298698); -- setup_request:1')
  assert.throws(() => keyView('', '1'), UsageError)
  assert.throws(() => keyView('ns', ''), UsageError)
})

test('race key CLI: decimal, --sql, --json; an empty id is bad input (exit 2)', async () => {
  const plain = await race(['key', 'setup_request', '42'])
  assert.equal(plain.code, 0)
  assert.equal(plain.stdout.trim(), '7844923485908670055')
  const sql = await race(['key', 'setup_request', '1', '--sql'])
  assert.match(sql.stdout, /^SELECT pg_advisory_xact_lock\(-2233356130382298698\);/)
  const json = JSON.parse((await race(['key', 'account', 'a', '--json'])).stdout)
  assert.equal(json.key, '-2308340465233775907')
  const bad = await race(['key', 'ns', ''])
  assert.equal(bad.code, 2)
  assert.equal(bad.stderr.trim().split('\n').length, 1)
})

test('race locks: negative, positive and two-int keys round trip through pg_locks; waiting rows first', async () => {
  const neg = keyView('setup_request', '1').key
  const pos = keyView('setup_request', '42').key
  const a = postgres(ctx.server.url, { max: 1, onnotice: () => {} })
  const b = postgres(ctx.server.url, { max: 1, onnotice: () => {} })
  try {
    await a`select pg_advisory_lock(${neg}::bigint), pg_advisory_lock(${pos}::bigint), pg_advisory_lock(-5, 7)`
    const [{ pid: bpid }] = await b`select pg_backend_pid() as pid`
    const waiting = b`select pg_advisory_lock(${pos}::bigint)`.execute()
    let rows = await advisoryLocks(ctx.lab.control)
    for (let i = 0; i < 200 && !rows.some((r) => !r.granted && r.pid === bpid); i++) {
      await sleep(10)
      rows = await advisoryLocks(ctx.lab.control)
    }
    const [{ pid: apid }] = await a`select pg_backend_pid() as pid`
    const mine = rows.filter((r) => r.pid === apid || r.pid === bpid)
    assert.ok(mine.some((r) => r.key === neg && r.granted), `negative key ${neg} round trips`)
    assert.ok(mine.some((r) => r.key === pos && r.granted), `positive key ${pos} round trips`)
    assert.ok(mine.some((r) => r.pair?.[0] === -5 && r.pair?.[1] === 7), 'two-int key shown as a pair')
    const w = rows.findIndex((r) => !r.granted)
    assert.equal(w, 0, 'the waiting row comes first')
    assert.equal(rows[0].key, pos)
    assert.deepEqual(rows[0].waitingFor, [apid])
    // The CLI shows the same, as JSON.
    const cli = await race(['locks', '--json'], { url: ctx.server.url })
    assert.equal(cli.code, 0, cli.stderr)
    const doc = JSON.parse(cli.stdout)
    assert.ok(doc.locks.some((r: { key: string }) => r.key === neg))
    assert.equal(doc.locks[0].granted, false)
    await a`select pg_advisory_unlock_all()`
    await waiting
  } finally {
    await a.end({ timeout: 1 })
    await b.end({ timeout: 1 })
  }
})

test('race locks refuses to look at a throwaway embedded server it would start itself (exit 2)', async () => {
  const r = await race(['locks'])
  assert.equal(r.code, 2)
  assert.match(r.stderr, /--database-url/)
})

test('race run --hold keeps the locks held, visible from another connection, then finishes', async () => {
  const child = race(['run', 'try-advisory', '--hold', '4s', '--schedule', 'lockstep'], { url: ctx.server.url })
  let seen = false
  for (let i = 0; i < 300 && !seen; i++) {
    const rows = await advisoryLocks(ctx.lab.control)
    seen = rows.some((r) => r.granted && /pg_try_advisory_xact_lock|insert/.test(r.query))
    if (!seen) await sleep(20)
  }
  const r = await child
  assert.ok(seen, 'race locks saw the held key')
  assert.equal(r.code, 0, r.stderr)
  assert.match(r.stderr, /holding for 4s/)
})

test('try-advisory: one committed, the rest busy at once (waited 0); busy does not mean the holder succeeds', async () => {
  const [t] = (await runScenario(ctx.lab, 'try-advisory', { n: 5 })).trials
  assert.equal(t.verdict, 'clean')
  assert.equal(count(t.sessions, (s) => s.outcome === 'committed'), 1)
  const busy = t.sessions.filter((s) => s.reason?.startsWith('busy'))
  assert.equal(busy.length, 4)
  assert.ok(t.sessions.every((s) => s.waitedMs === 0))
  const [f] = (await runScenario(ctx.lab, 'try-advisory', { params: { holderFails: true } })).trials
  assert.equal(count(f.sessions, (s) => s.outcome === 'committed'), 0)
  assert.equal(f.invariant.observed, '0 pending')
})

test('lock-timeout: waiters fail with 55P03 after about lock_timeout, the retry after the rollback commits', async () => {
  const [t] = (await runScenario(ctx.lab, 'lock-timeout')).trials
  assert.equal(t.verdict, 'prevented')
  for (const s of ['s1', 's2']) {
    assert.equal(by(t, s).sqlstate, '55P03')
    assert.ok(by(t, s).waitedMs >= 150, `${s} waited ${by(t, s).waitedMs}`)
  }
  assert.equal(by(t, 'holder').outcome, 'rejected')
  assert.equal(by(t, 'retry').outcome, 'committed')
  assert.equal(by(t, 'retry').waitedMs, 0)
  assert.equal(t.invariant.observed, '1 pending')
})

test('session-lock: survives rollback, needs two unlocks, leaks to the next borrower; --xact does not', async () => {
  const [t] = (await runScenario(ctx.lab, 'session-lock')).trials
  assert.equal(t.verdict, 'anomaly')
  assert.equal(t.invariant.observed, 'after rollback still taken, after one unlock still taken, next borrower holds 1')
  assert.equal(by(t, 'req2').pid, by(t, 'req1').pid, 'req2 borrowed the same backend')
  assert.notEqual(by(t, 'req3').pid, by(t, 'req1').pid)
  assert.ok(by(t, 'req3').waitedMs > 0, 'the third request was blocked by the leaked lock')
  const [x] = (await runScenario(ctx.lab, 'session-lock', { params: { xact: true } })).trials
  assert.equal(x.verdict, 'clean')
  assert.equal(x.invariant.observed, 'after rollback free, after one unlock free, next borrower holds 0')
  const r = await race(['run', 'session-lock', '--schedule', 'barrier'], { url: ctx.server.url })
  assert.equal(r.code, 2)
})

test('parent-row: FOR UPDATE on users serializes, and the profile update waits behind it', async () => {
  const [t] = (await runScenario(ctx.lab, 'parent-row')).trials
  assert.equal(t.verdict, 'serialized')
  assert.equal(t.invariant.observed, '1 pending')
  assert.ok(by(t, 'profile').waitedMs > 0, 'collateral wait')
  assert.equal(by(t, 'profile').outcome, 'committed')
  assert.equal(by(t, 's2').outcome, 'rejected')
})

test('other-users: different users never wait, one user is serialized, in one run', async () => {
  const [t] = (await runScenario(ctx.lab, 'other-users', { n: 3 })).trials
  assert.equal(t.verdict, 'serialized')
  const d = t.sessions.filter((s) => s.name.startsWith('d'))
  const u = t.sessions.filter((s) => s.name.startsWith('u'))
  assert.ok(d.every((s) => s.outcome === 'committed' && s.waitedMs === 0))
  assert.equal(count(u, (s) => s.outcome === 'committed'), 1)
  assert.equal(count(u, (s) => s.waitedMs > 0), 2)
  assert.equal(t.invariant.held, true)
})

test('deadlock: opposite order fails s2 with 40P01 (deterministic victim), --ordered serializes', async () => {
  for (let i = 0; i < 3; i++) {
    const [t] = (await runScenario(ctx.lab, 'deadlock')).trials
    assert.equal(t.verdict, 'prevented')
    assert.equal(by(t, 's2').sqlstate, '40P01')
    assert.equal(by(t, 's1').outcome, 'committed')
  }
  const [o] = (await runScenario(ctx.lab, 'deadlock', { params: { ordered: true } })).trials
  assert.equal(o.verdict, 'serialized')
  assert.ok(o.sessions.every((s) => s.outcome === 'committed'))
  assert.equal(o.invariant.observed, 'a=100 b=100')
})

test('limit-lock: the WHERE form locks thousands of keys for 100 rows; the subquery form exactly 100', async () => {
  const [t] = (await runScenario(ctx.lab, 'limit-lock')).trials
  assert.equal(t.verdict, 'anomaly')
  const m = /where: 100 rows, (\d+) locks; subquery: 100 rows, 100 locks/.exec(t.invariant.observed)
  assert.ok(m, t.invariant.observed)
  assert.ok(Number(m![1]) > 1000, `where form held ${m![1]} locks`)
  const [s] = (await runScenario(ctx.lab, 'limit-lock', { params: { form: 'subquery' } })).trials
  assert.equal(s.verdict, 'clean')
})

test('shared-lock: readers together, the writer alone, the late reader after the writer', async () => {
  const [t] = (await runScenario(ctx.lab, 'shared-lock', { n: 3 })).trials
  assert.equal(t.verdict, 'serialized')
  assert.match(t.invariant.observed, /^0 reader events inside the writer; up to 3 readers together; entered: r1 r2 r3 w late$/)
  assert.ok(by(t, 'w').waitedMs > 0 && by(t, 'late').waitedMs > 0)
  assert.ok(['r1', 'r2', 'r3'].every((r) => by(t, r).waitedMs === 0))
})

test('the timeline draws every issue-3 scenario: one column per session, every session appears', async () => {
  const ids = ['try-advisory', 'lock-timeout', 'session-lock', 'parent-row', 'other-users', 'deadlock', 'limit-lock', 'shared-lock']
  for (const id of ids) {
    const [t] = (await runScenario(ctx.lab, id)).trials
    const text = timeline(plain, t)
    const header = text.split('\n')[0]
    for (const x of t.sessions) assert.ok(header.includes(x.name), `${id}: column ${x.name}`)
    assert.ok(text.split('\n').length > t.sessions.length, `${id}: rows`)
  }
})
