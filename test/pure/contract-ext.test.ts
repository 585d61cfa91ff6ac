// The contract's smaller parts, without a server: documented waits and SQLSTATEs, binds that read another
// session's step in the invariant, application waits, the FATAL a server sends as it ends a connection.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { parseBinds } from '../../src/binds.js'
import { parseFatal, readFatals, type ServerFatal } from '../../src/db/fatal.js'
import { EventEmitter } from 'node:events'
import type { SessionReport } from '../../src/engine/types.js'
import { describeDoc, differences, documentedCodes, judge } from '../../src/judge/index.js'
import { checkScenario } from '../../src/plan.js'
import { appWait, clean, defineScenario, prevented, type Scenario } from '../../src/scenario.js'

const s = (o: Partial<SessionReport>): SessionReport =>
  ({ name: 't1', pid: 1, outcome: 'committed', reason: null, sqlstate: null, condition: null, step: null, waitedMs: 0, ms: 1, retries: 0, errors: [], isolation: null, commitTag: null, ...o }) as SessionReport

test('a SQLSTATE the documentation names is expected: with the invariant held it is the prevention; unnamed, the run is unknown', () => {
  const timedOut = s({ name: 'long', outcome: 'failed', sqlstate: '25P03', errors: ['25P03'] })
  const docs = [prevented('the server ends it', { long: '25P03', vac: 'committed' })]
  assert.deepEqual([...documentedCodes(docs)], ['25P03'])
  assert.deepEqual([...documentedCodes([clean('x', { committed: 2, '55P03': [0, 2] })])], ['55P03'])
  assert.equal(judge([timedOut, s({ name: 'vac' })], { held: true }, documentedCodes(docs)).verdict, 'prevented')
  assert.equal(judge([timedOut, s({ name: 'vac' })], { held: true }).verdict, 'unknown')
  assert.equal(judge([timedOut], { held: false }, documentedCodes(docs)).verdict, 'anomaly')
})

test('a documented wait is a minimum: less is a deviation that says both numbers', () => {
  const doc = { ...prevented('deadlock_timeout first', { t1: '40P01', t2: 'committed' }), waited: { t1: 1000 } }
  const victim = (waitedMs: number) => [s({ outcome: 'failed', sqlstate: '40P01', waitedMs }), s({ name: 't2' })]
  assert.deepEqual(differences('prevented', victim(1003.5), doc), [])
  assert.deepEqual(differences('prevented', victim(210), doc), ['t1: documented to wait at least 1 s, waited 210 ms'])
  assert.equal(describeDoc(doc), 'prevented: t1 40P01 after waiting at least 1 s, t2 committed')
})

test(':session.step.column is one bind (the invariant reads what a session saw); casts and step binds are unchanged', () => {
  assert.deepEqual(parseBinds('select :filler.fill.taken::int, :check.pending, :user'), { text: 'select $1::int, $2, $3', names: ['filler.fill.taken', 'check.pending', 'user'] })
})

function scenario(o: Partial<Scenario>): Scenario {
  return defineScenario({
    id: 'x',
    title: 'x',
    source: { article: 'advisory-locks', section: '7' },
    story: [],
    params: { apiMs: { flag: '--api-ms <duration>', description: 'x', kind: 'duration', default: 10 } },
    sessionCount: { default: 1 },
    isolation: 'read committed',
    setup: [],
    sessions: () => ({ s1: { steps: { begin: 'begin', read: 'select 1 as one', api: appWait('apiMs', 'call'), commit: 'commit' } } }),
    invariant: { description: 'x', sql: 'select :s1.read.one = 1 as held' },
    documented: { postgres: { lockstep: clean('x', { s1: 'committed' }), serial: clean('x', { s1: 'committed' }) } },
    ...o,
  })
}

test("checkScenario: an invariant may read a session's step; a step may not, and an application wait needs its param", () => {
  assert.deepEqual(checkScenario(scenario({}), { apiMs: 10 }, 1), [])
  const bad = scenario({
    sessions: () => ({ s1: { steps: { begin: 'begin', read: 'select :s1.begin.x', api: appWait('nope', 'call'), commit: 'commit' } } }),
    invariant: { description: 'x', sql: 'select :s2.read.one = 1 and :s1.write.n = 1 as held' },
    documented: { postgres: { lockstep: { ...clean('x', { s1: 'committed' }), waited: { s9: 5 } }, serial: clean('x', { s1: 'committed' }) } },
  })
  const problems = checkScenario(bad, { apiMs: 10 }, 1)
  for (const p of [
    /step read: :s1\.begin\.x names another session's step, which only the invariant may read/,
    /step api: waits for param 'nope', which the scenario does not declare/,
    /invariant: :s2\.read\.one names no session s2/,
    /invariant: :s1\.write\.n names no step write of session s1/,
    /lockstep: documents a wait for session 's9'/,
  ]) {
    assert.ok(problems.some((x) => p.test(x)), `${p}\n${problems.join('\n')}`)
  }
})

/** An ErrorResponse as the server sends it: 'E', int32 length, then fields (type byte, text, NUL), NUL. */
function errorResponse(fields: Record<string, string>): Buffer {
  const body = Buffer.concat([...Object.entries(fields).map(([k, v]) => Buffer.from(`${k}${v}\0`)), Buffer.from([0])])
  const head = Buffer.alloc(5)
  head[0] = 0x45
  head.writeUInt32BE(body.length + 4, 1)
  return Buffer.concat([head, body])
}

test('the FATAL a server sends as it ends a connection is read by its SQLSTATE, however the bytes arrive', () => {
  const fatal = errorResponse({ S: 'FATAL', V: 'FATAL', C: '25P03', M: 'terminating connection due to idle-in-transaction timeout' })
  assert.deepEqual(parseFatal(fatal.subarray(5)), { code: '25P03', message: 'terminating connection due to idle-in-transaction timeout' })
  assert.equal(parseFatal(errorResponse({ S: 'ERROR', V: 'ERROR', C: '40001', M: 'x' }).subarray(5)), undefined)
  // A ReadyForQuery, a DataRow, an ERROR and the FATAL, in one stream cut at every byte.
  const rfq = Buffer.from([0x5a, 0, 0, 0, 5, 0x49])
  const row = Buffer.concat([Buffer.from([0x44, 0, 0, 0, 10, 0, 1, 0, 0, 0, 0])])
  const stream = Buffer.concat([rfq, row, errorResponse({ V: 'ERROR', C: '40001' }), rfq, fatal])
  for (const size of [1, 2, 3, 7, stream.length]) {
    const socket = new EventEmitter()
    const seen: ServerFatal[] = []
    readFatals(socket, (e) => seen.push(e))
    for (let i = 0; i < stream.length; i += size) socket.emit('data', stream.subarray(i, i + size))
    assert.deepEqual(seen.map((x) => x.code), ['25P03'], `chunks of ${size}`)
  }
})
