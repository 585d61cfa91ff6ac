// --oracle serial's comparison (engine/serial.ts), without a database: a trial's tables and sessions against the
// outcomes of the serial orders and of their prefixes; a session that failed with class 40 (or a declared
// prevention) may stand for one that did not run; what differs from every serial order is named.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { canonicalJson, canonicalRows, distinct, endingOf, judgeSerial, mayBeAbsent, permutations, prefixOutcomes, type SerialOutcome } from '../../src/engine/serial.js'

test('permutations: n! distinct orders, each of every name once', () => {
  const p = permutations(['s1', 's2', 's3'])
  assert.equal(p.length, 6)
  assert.equal(new Set(p.map((x) => x.join(' '))).size, 6)
  for (const x of p) assert.deepEqual([...x].sort(), ['s1', 's2', 's3'])
  assert.deepEqual(permutations(['a']), [['a']])
})

test('canonical rows: key order does not matter, server-filled columns are left out, the user is :user, rows sorted', () => {
  const user = '0b7f6c1e-1111-2222-3333-444455556666'
  const a = canonicalRows([{ id: 2, user_id: user, amount: 42n }, { amount: 7, id: 1, user_id: user }], new Set(['id']), user)
  const b = canonicalRows([{ user_id: user, amount: 7, id: 9 }, { amount: 42n, user_id: user, id: 5 }], new Set(['id']), user)
  assert.deepEqual(a, b)
  assert.deepEqual(a, ['{"amount":"42","user_id":":user"}', '{"amount":7,"user_id":":user"}'])
  assert.equal(canonicalJson({ b: new Date(0), a: Buffer.from('hi') }), '{"a":"\\\\x6869","b":"1970-01-01T00:00:00.000Z"}')
  // A value that contains itself, or an ORM entity's deep graph, is written, not walked for ever.
  const loop: Record<string, unknown> = { id: 1 }
  loop.self = loop
  assert.equal(canonicalJson(loop), '{"id":1,"self":"[circular]"}')
  let deep: Record<string, unknown> = {}
  for (let i = 0; i < 100; i++) deep = { d: deep }
  assert.match(canonicalJson(deep), /"\[deeper\]"/)
  // Kept columns still tell rows apart.
  assert.notDeepEqual(canonicalRows([{ k: 1 }], new Set()), canonicalRows([{ k: 2 }], new Set()))
})

test("a session may stand for one that did not run only when it failed by the server's concurrency control or with a declared SQLSTATE", () => {
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '40001' }), true)
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '40P01' }), true)
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '55P03' }), true)
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '23505' }, new Set(['23505'])), true)
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '40001/1213' }), true)
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '23505' }), false)
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '23505' }, ['23505']), true)
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '23000/1062' }, ['23000']), true)
  assert.equal(mayBeAbsent({ outcome: 'failed', sqlstate: '40001', thrown: 'TypeError: x' }), false)
  assert.equal(mayBeAbsent({ outcome: 'committed', sqlstate: null }), false)
  assert.equal(mayBeAbsent({ outcome: 'rejected', sqlstate: null }), false)
  assert.equal(endingOf({ outcome: 'failed', sqlstate: '40001' }), 'failed 40001')
  assert.equal(endingOf({ outcome: 'rejected', sqlstate: null }), 'rejected')
})

// Two withdrawals of 30 from 100 with a ledger: serially, either order leaves 40 and two ledger rows.
const acct = (balance: number) => [`{"balance":${balance},"id":1}`]
const ledger = (k: number) => Array.from({ length: k }, () => '{"account_id":1,"amount":30}')
const committed = (name: string) => ({ name, ending: 'committed' })
function withdrawals(): SerialOutcome[] {
  const out: SerialOutcome[] = []
  for (const order of permutations(['s1', 's2'])) {
    const tables = [0, 1, 2].map((k) => ({ accounts: acct(100 - 30 * k), ledger: ledger(k) }))
    out.push(...prefixOutcomes(order, tables, order.map(committed)))
  }
  return distinct(out)
}

test('prefixes: every prefix of every order is a serial outcome, each once', () => {
  const s = withdrawals()
  // None ran; s1 alone; s2 alone; both (s2 then s1 ends as s1 then s2 does: the same outcome, kept once).
  assert.deepEqual(s.map((x) => x.order.join(' ')).sort(), ['', 's1', 's1 s2', 's2'])
  assert.deepEqual(s.find((x) => x.order.join(' ') === 's2')?.tables, { accounts: acct(70), ledger: ledger(1) })
})

test('a lost update is no serial outcome: the table that differs from every serial order is named, with the closest order', () => {
  const trial = { tables: { accounts: acct(70), ledger: ledger(2) }, sessions: [committed('s1'), committed('s2')] }
  const v = judgeSerial(trial, withdrawals(), () => false)
  assert.equal(v.held, false)
  assert.match(v.note, /^table accounts differs from every serial order \(closest, s1 then s2: accounts has \{"balance":70,"id":1\} where it had \{"balance":40,"id":1\}\)$/)
  assert.deepEqual(v.closest, ['s1', 's2'])
})

test('the serial outcome itself holds, whichever order it is', () => {
  const trial = { tables: { accounts: acct(40), ledger: ledger(2) }, sessions: [committed('s1'), committed('s2')] }
  const v = judgeSerial(trial, withdrawals(), () => false)
  assert.equal(v.held, true)
  assert.match(v.note, /^as s(1 then s2|2 then s1), serially$/)
})

test('a session that failed with 40001 stands for one that did not run; an undeclared failure does not', () => {
  const tables = { accounts: acct(70), ledger: ledger(1) }
  const serialization = { tables, sessions: [committed('s1'), { name: 's2', ending: 'failed 40001' }] }
  assert.equal(judgeSerial(serialization, withdrawals(), (n) => n === 's2').held, true)
  const integrity = { tables, sessions: [committed('s1'), { name: 's2', ending: 'failed 23505' }] }
  const v = judgeSerial(integrity, withdrawals(), () => false)
  assert.equal(v.held, false)
  assert.match(v.note, /s2 \(failed 23505\) differs from every serial order/)
})

test('an ending or a return value no serial order gives is named by session', () => {
  // Serially the second of two withdrawals of 60 from 100 is rejected; both committing is no serial outcome, even
  // where the tables happen to match one.
  const serial = distinct(
    permutations(['s1', 's2']).flatMap((order) =>
      prefixOutcomes(order, [{ a: acct(100) }, { a: acct(40) }, { a: acct(40) }], [{ name: order[0], ending: 'committed', returned: '100' }, { name: order[1], ending: 'rejected' }]),
    ),
  )
  const both = { tables: { a: acct(40) }, sessions: [{ name: 's1', ending: 'committed', returned: '100' }, { name: 's2', ending: 'committed', returned: '100' }] }
  const v = judgeSerial(both, serial, () => false)
  assert.equal(v.held, false)
  assert.match(v.note, /no serial order gives this together \(closest, s1 then s2: s2 committed, returned 100 where it was rejected\)|s2 committed, returned 100 where it was rejected/)
  const returned = { tables: { a: acct(40) }, sessions: [{ name: 's1', ending: 'committed', returned: '99' }, { name: 's2', ending: 'rejected' }] }
  const r = judgeSerial(returned, serial, () => false)
  assert.equal(r.held, false)
  assert.match(r.note, /s1 committed, returned 99 where it was committed, returned 100/)
  assert.equal(judgeSerial({ tables: { a: acct(40) }, sessions: [{ name: 's1', ending: 'committed', returned: '100' }, { name: 's2', ending: 'rejected' }] }, serial, () => false).held, true)
})

test('no serial outcome at all: not decided', () => {
  assert.equal(judgeSerial({ tables: {}, sessions: [] }, [], () => false).held, null)
})
