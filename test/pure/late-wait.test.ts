// An isolated application session's worker is told by the main thread that its query waits on a lock (the main thread
// asks the server from the control connection). That word can reach the worker after the query's own result: the
// main thread saw the wait, let the blocking session commit, and the worker's thread ran only once both messages had
// come. Under load this happened (the soundness case 38-0010, one run in about 150): the run that waited was judged
// "clean", and the reduced search's groups differed from --exhaustive's. Pure: the session's bookkeeping, no server
// (the isolated runs themselves are app-isolated.test.ts's and the soundness harness's).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { AppSession } from '../../src/app/session.js'
import { TrialClock } from '../../src/engine/runner.js'

/** A session whose clock the test moves (`at`), and its first query released and running. */
async function running(label: string) {
  const clock = new TrialClock()
  let at = 0
  const s = new AppSession('s2', 1, {
    record: clock.record,
    recordLateWait: clock.recordLateWait,
    now: () => at,
    notify: () => {},
    released: () => {},
    timeQuery: () => () => {},
  })
  const entered = s.enter(label, 'insert into t values (1)')
  await new Promise((r) => setImmediate(r))
  assert.equal(s.state, 'ready')
  s.release()
  await entered
  assert.equal(s.state, 'running')
  return { s, clock, move: (ms: number) => (at = ms) }
}

/** The timeline's events, as step and kind. */
const kinds = (clock: TrialClock) => clock.events.map((e) => `${e.step} ${e.kind}`)

test('a wait the worker learns after the query ended is counted: waitedMs, and wait/woke between run and ok', async () => {
  const { s, clock, move } = await running('q1')
  move(7)
  s.ok('INSERT', 1, [])
  s.markBlocked('q1')
  assert.equal(s.report().waitedMs, 7)
  assert.deepEqual(kinds(clock), ['q1 run', 'q1 wait', 'q1 woke', 'q1 ok'])
  // Told twice (a probe again before the worker read the first): counted once.
  s.markBlocked('q1')
  assert.equal(s.report().waitedMs, 7)
})

test('a wait seen while the query runs is counted as before; a word about another step changes nothing', async () => {
  const { s, clock, move } = await running('q1')
  s.markBlocked('q2')
  move(3)
  s.markBlocked('q1')
  move(5)
  s.ok('INSERT', 1, [])
  s.markBlocked('q1')
  assert.equal(s.report().waitedMs, 5)
  assert.deepEqual(kinds(clock), ['q1 run', 'q1 wait', 'q1 woke', 'q1 ok'])
})

test('an unblocked naming another step leaves the query in flight blocked; naming it, unblocks it', async () => {
  const { s } = await running('q1')
  s.markBlocked('q1')
  s.unblocked('q0')
  assert.equal(s.current?.blocked, true)
  s.unblocked('q1')
  assert.equal(s.current?.blocked, false)
})
