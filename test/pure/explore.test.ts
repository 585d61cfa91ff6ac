// race explore's enumerators with no database: a small model of sessions (steps, and a lock that makes a step
// wait) stands in for the engine, so the counts below are the search's own, checked against counts worked out
// by hand (and, for the orders, against the formula).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { compareKeys, Dfs, follow, ordersOf, random, Sampler, shrinkCandidates, switches, type Strategy } from '../../src/explore/enumerate.js'
import { SplitDfs } from '../../src/explore/split.js'

/**
 * Runs a strategy to the end over a model: `steps[i]` session i's steps; a step named 'lock' takes one shared
 * lock (waiting while another session holds it), 'commit' releases it. Returns every run's launch order.
 */
function drive(strategy: Strategy, steps: string[][]): number[][] {
  const runs: number[][] = []
  for (let pick = strategy.next(); pick; pick = strategy.next()) {
    const next = steps.map(() => 0)
    let holder = -1
    const waiting = new Set<number>()
    const launched: number[] = []
    for (;;) {
      const ready = steps.map((_, i) => i).filter((i) => !waiting.has(i) && next[i] < steps[i].length)
      if (!ready.length) break
      const i = pick(ready, ready.map((x) => steps[x].length - next[x]))
      assert.ok(ready.includes(i), `chose ${i}, which is not ready`)
      launched.push(i)
      const step = steps[i][next[i]++]
      if (step === 'lock') {
        if (holder < 0) holder = i
        else waiting.add(i)
      } else if (step === 'commit' && holder === i) {
        holder = -1
        // The first waiter gets the lock and its lock step completes.
        const w = [...waiting][0]
        if (w !== undefined) {
          waiting.delete(w)
          holder = w
        }
      }
    }
    strategy.done(launched)
    runs.push(launched)
  }
  return runs
}

const key = (r: number[]) => r.join('')

test('every interleaving of two sessions of three steps: 20, each once, each keeping its session order', () => {
  const runs = drive(new Dfs(), [['b', 'i', 'c'], ['b', 'i', 'c']])
  assert.equal(runs.length, 20)
  assert.equal(new Set(runs.map(key)).size, 20)
  for (const r of runs) assert.deepEqual([r.filter((x) => x === 0).length, r.filter((x) => x === 1).length], [3, 3])
  assert.equal(ordersOf([3, 3]), 20n)
})

test('three sessions of two steps: 90 = 6!/(2!2!2!); the formula stays exact where floats would not', () => {
  const runs = drive(new Dfs(), [['a', 'b'], ['a', 'b'], ['a', 'b']])
  assert.equal(runs.length, 90)
  assert.equal(new Set(runs.map(key)).size, 90)
  assert.equal(ordersOf([2, 2, 2]), 90n)
  assert.equal(ordersOf([3, 3, 3]), 1680n)
  assert.equal(ordersOf([10, 10, 10, 10]), 4705360871073570227520n)
})

test('a step that waits for a lock: its session takes no step until it has the lock, 24 of the 70 orders can happen', () => {
  // begin, lock, insert, commit twice: worked out by hand, 12 with s1 locking first (5 where s2 locks after s1's
  // commit, 7 where it waits) and 12 with s2 first.
  const runs = drive(new Dfs(), [['b', 'lock', 'i', 'commit'], ['b', 'lock', 'i', 'commit']])
  assert.equal(runs.length, 24)
  assert.equal(new Set(runs.map(key)).size, 24)
  assert.equal(ordersOf([4, 4]), 70n)
  // Never a step of a session between its waiting lock and the other's commit.
  for (const cannot of ['00111', '01011']) assert.ok(!runs.some((r) => key(r).startsWith(cannot)), `${cannot}: s2 waits in lock2, its insert cannot come next`)
  assert.ok(runs.some((r) => key(r).startsWith('00110')), 'while s2 waits, s1 goes on')
})

test('a run that goes otherwise than the same choices went before is counted as diverged, not taken as the tree', () => {
  // Code whose steps are not the same each time (it reads the clock, a random number): session 0 sends two steps on
  // the first run and one on every later one. The second run replays "s1 first" and then finds s1 ended where it
  // had a step before: the tree counted is not the one explored, and the search says so. (A change only in a part
  // of the tree not yet replayed cannot be seen: a stateless search trusts the code to do the same again.)
  let run = 0
  const dfs = new Dfs()
  for (let pick = dfs.next(); pick && run < 50; pick = dfs.next(), run++) {
    const steps = [run === 0 ? 2 : 1, 2]
    const next = [0, 0]
    const launched: number[] = []
    for (;;) {
      const ready = [0, 1].filter((i) => next[i] < steps[i])
      if (!ready.length) break
      const i = pick(ready)
      next[i]++
      launched.push(i)
    }
    dfs.done(launched)
  }
  assert.ok(dfs.diverged > 0)
  // The same model without the change: no divergence, and the 3 orders of 2 and 1 steps.
  const steady = new Dfs()
  const runs = drive(steady, [['a', 'b'], ['a']])
  assert.equal(runs.length, 3)
  assert.equal(steady.diverged, 0)
})

test('a seeded sample: the size asked, the same runs for the same seed, others for another seed', () => {
  const model = [['b', 'i', 'c'], ['b', 'i', 'c'], ['b', 'i', 'c']]
  const a = drive(new Sampler(25, 7), model).map(key)
  const b = drive(new Sampler(25, 7), model).map(key)
  const c = drive(new Sampler(25, 8), model).map(key)
  assert.equal(a.length, 25)
  assert.deepEqual(a, b)
  assert.notDeepEqual(a, c)
  assert.ok(new Set(a).size > 10, 'not the same order over and over')
})

test('a replay follows its order, and when a session cannot start, the next listed step of one that can goes', () => {
  const pick = follow([0, 1, 1, 0])
  assert.equal(pick([0, 1]), 0)
  assert.equal(pick([0]), 0, 's1 is waiting: its listed steps wait, s0 goes')
  assert.equal(pick([1]), 1)
  assert.equal(pick([1]), 1)
})

test('shrinking: every candidate has fewer switches and keeps each session its own steps, in order', () => {
  const order = [0, 1, 0, 1, 0, 1]
  const cands = shrinkCandidates(order)
  assert.ok(cands.length > 0)
  for (const c of cands) {
    assert.ok(switches(c) < switches(order), `${c} has fewer switches than ${order}`)
    assert.deepEqual([...c].sort(), [...order].sort())
  }
  assert.deepEqual(
    cands.map((c) => switches(c)),
    [...cands.map((c) => switches(c))].sort((x, y) => x - y),
    'fewest first',
  )
  assert.deepEqual(shrinkCandidates([0, 0, 1, 1]), [], 'nothing to shrink: each session runs in one piece')
  assert.equal(switches([0, 0, 1, 1, 0]), 2)
})

/** One run of the model of drive() (steps, the lock), with a given pick: its launch order. */
function runOnce(pick: (ready: readonly number[]) => number, steps: string[][]): number[] {
  let out: number[] = []
  const one: Strategy = {
    next: (() => {
      let given = false
      return () => (given ? undefined : ((given = true), pick))
    })(),
    done: (l) => void (out = [...l]),
  }
  drive(one, steps)
  return out
}

test('SplitDfs: its branches, run in any order, are exactly Dfs runs, and sorted by their choices in Dfs order', () => {
  for (const steps of [
    [['a', 'b', 'c'], ['a', 'b', 'c']],
    [['begin', 'lock', 'insert', 'commit'], ['begin', 'lock', 'insert', 'commit']],
    [['a', 'b'], ['a', 'b'], ['a']],
  ]) {
    const want = drive(new Dfs(), steps)
    // Two jobs' worth of disorder: each time, the last or the first branch waiting (a seeded choice).
    const rnd = random(7)
    const split = new SplitDfs()
    const held: ReturnType<SplitDfs['next']>[] = []
    const got: number[][] = []
    for (;;) {
      for (let r = split.next(); r; r = split.next()) held.push(r)
      if (!held.length) break
      const run = held.splice(Math.floor(rnd() * held.length), 1)[0]!
      const launched = runOnce(run.pick, steps)
      split.done(run, launched)
      assert.equal(run.report, true)
      got.push(launched)
    }
    assert.equal(split.diverged, 0)
    assert.deepEqual([...got].sort(compareKeys), want, 'the same runs, in Dfs order once sorted')
  }
})

test('SplitDfs shards: every interleaving is reported by exactly one of n shards; together they are the whole search', () => {
  const steps = [['a', 'b', 'c'], ['a', 'b', 'c'], ['a', 'b']]
  const want = drive(new Dfs(), steps).map((x) => x.join(','))
  for (const count of [1, 2, 3, 5]) {
    const reported: string[] = []
    let made = 0
    for (let index = 1; index <= count; index++) {
      const split = new SplitDfs({ index, count })
      for (let r = split.next(); r; r = split.next()) {
        const launched = runOnce(r.pick, steps)
        split.done(r, launched)
        made++
        if (r.report) reported.push(launched.join(','))
      }
    }
    assert.deepEqual([...reported].sort(), [...want].sort(), `${count} shards`)
    if (count > 1) assert.ok(made < count * want.length, `${count} shards made ${made} runs, fewer than each running all ${want.length}`)
  }
})

test('the points of declared steps: a statement outside a transaction is two (it runs, then commits), one inside', async () => {
  const { pointsOf } = await import('../../src/explore/steps.js')
  assert.equal(pointsOf(['begin', 'insert into t values (1)', 'commit']), 3)
  assert.equal(pointsOf(['insert into t values (1)']), 2)
  assert.equal(pointsOf(['insert into t values (1)', 'begin', 'select 1', 'rollback', 'select 2']), 7)
  // Statements that are never split: transaction control, SET/SHOW, LOCK (only inside a transaction).
  assert.equal(pointsOf(['set work_mem = 1000', 'show work_mem', 'lock table t']), 3)
  assert.equal(pointsOf(['vacuum t', 'create index concurrently i on t (k)']), 2)
  // ROLLBACK TO SAVEPOINT does not end the transaction.
  assert.equal(pointsOf(['begin', 'savepoint a', 'rollback to a', 'insert into t values (1)', 'commit']), 5)
})

test('a step whose own text ends its transaction with a lone COMMIT: its run, then its COMMIT, two points', async () => {
  const { pointsOf } = await import('../../src/explore/steps.js')
  const { commitBody } = await import('../../src/engine/session.js')
  assert.equal(commitBody('begin; insert into t values (1); commit', false), 'begin;\ninsert into t values (1)')
  assert.equal(commitBody('update t set v = 1; commit', true), 'update t set v = 1')
  // Outside a transaction with no BEGIN of its own, another transaction control inside, or no COMMIT last: one point.
  assert.equal(commitBody('update t set v = 1; commit', false), undefined)
  assert.equal(commitBody('begin; insert into t values (1); commit; select 1', false), undefined)
  assert.equal(commitBody('begin; rollback; begin; commit', false), undefined)
  assert.equal(commitBody("insert into t values ('commit')", true), undefined)
  assert.equal(pointsOf(['begin; insert into t values (1); commit']), 2)
  assert.equal(pointsOf(['begin', 'update t set v = 1; commit']), 3)
})

test('merged sample shards: held in every draw passes expect held only with an accept level the merged sample reaches', async () => {
  const { mergeShards } = await import('../../src/explore/merge.js')
  type Result = Parameters<typeof mergeShards>[0][number]
  // Two shards of a 4-run sample, 2 sessions of 4 steps, depth 2: one run finds such a violation with probability
  // at least 1/8, so the 4 runs together state 1 - (7/8)^4 = 0.4138...
  const part = (index: number, accept?: number) =>
    ({
      scenario: 'x',
      digest: 'd'.repeat(64),
      racelab: '0.1.0',
      server: { version: '15.0' },
      n: 2,
      expected: 'held',
      sample: { size: 4, seed: 1, depth: 2, steps: 4, counted: 2, probability: 1 - (7 / 8) ** 2, shard: { index, count: 2 }, ...(accept === undefined ? {} : { accept }) },
      every: [{ line: `s1.a${index} s2.b${index}`, verdict: 'clean', held: true, observed: 'true', outcomes: { s1: 'committed', s2: 'committed' }, waited: [], switches: 1, runs: 2 }],
      runs: 2,
      ms: 1,
      perSecond: 1,
    }) as unknown as Result
  const merged = (accept?: number) => mergeShards([part(1, accept), part(2, accept)])
  assert.ok(Math.abs(merged().sample!.probability - (1 - (7 / 8) ** 4)) < 1e-12)
  assert.deepEqual([merged().exitCode, merged().matched], [3, false])
  assert.deepEqual([merged(0.4).exitCode, merged(0.4).matched], [0, true])
  assert.deepEqual([merged(0.5).exitCode, merged(0.5).matched], [3, false])
})

test('a step\'s statements, kept from their first split, come back whole however often they are asked for and whatever a caller did with them', async () => {
  const { statements } = await import('../../src/lex.js')
  const { pointsOfStep } = await import('../../src/engine/points.js')
  const { NOT_SPLIT } = await import('../../src/engine/session.js')
  const sql = 'begin; select count(*) from t; insert into t values (1); commit'
  const got = statements(sql)
  got.pop()
  got[0] = 'changed by a caller'
  assert.deepEqual(statements(sql), ['begin', 'select count(*) from t', 'insert into t values (1)', 'commit'])
  // pointsOfStep takes the lone COMMIT off the statements it is given: asked again (every moment of every order asks), the same points.
  const plan = () => pointsOfStep(sql, false, false, NOT_SPLIT)
  for (let k = 0; k < 3; k++) assert.deepEqual({ points: plan()!.points.map((x) => x.sql), commit: plan()!.commit }, { points: ['begin;\nselect count(*) from t', 'insert into t values (1)'], commit: true })
})

test('a step of several statements: a point each (quiet leading statements merged), a snapshot point before a NOWAIT that takes the snapshot', async () => {
  const { pointsOf } = await import('../../src/explore/steps.js')
  const { pointsOfStep } = await import('../../src/engine/points.js')
  const { NOT_SPLIT } = await import('../../src/engine/session.js')
  const of = (sql: string, inTx = false, taken = false) => {
    const p = pointsOfStep(sql, inTx, taken, NOT_SPLIT)
    return p && { points: p.points.map((x) => `${x.suffix}=${x.sql.replace(/\s+/g, ' ')}`), commit: p.commit, implicit: p.implicit }
  }
  // begin; select ...; insert ...; commit: [begin; select], [insert], then the commit point.
  assert.deepEqual(of('begin; select count(*) from t; insert into t values (1); commit'), { points: ['=begin; select count(*) from t', '/2=insert into t values (1)'], commit: true, implicit: false })
  // Outside a transaction, no BEGIN: race opens one (its commit a point of its own), the body split.
  assert.deepEqual(of('select 1; update t set v = 2'), { points: ['=select 1', '/2=update t set v = 2'], commit: false, implicit: true })
  // Inside one, with SET and SAVEPOINT merged into the statement after them; a trailing one into the one before.
  assert.deepEqual(of('set local lock_timeout = 1; select 1; savepoint a; update t set v = 1; release a', true, true)!.points, ['=set local lock_timeout = 1; select 1', '/2=savepoint a; update t set v = 1; release a'])
  // One statement, or a transaction ended or begun in the middle: whole, as before.
  assert.equal(of('update t set v = 1', true), undefined)
  assert.equal(of('begin; insert into t values (1); commit'), undefined)
  assert.equal(of('insert into t values (1); commit; insert into t values (2)', true), undefined)
  assert.equal(of('set x.y = 1; update t set v = 1'), undefined)
  // NOWAIT / SKIP LOCKED as the transaction's first snapshot: a snapshot point before it (BEGIN goes with it).
  assert.deepEqual(of('begin isolation level repeatable read; select * from q for update nowait')!.points, [':snapshot=begin isolation level repeatable read; select 1', '=select * from q for update nowait'])
  assert.deepEqual(of('select * from q for update skip locked', true, false)!.points, [':snapshot=select 1', '=select * from q for update skip locked'])
  assert.equal(of('select * from q for update nowait', true, true), undefined)
  assert.equal(of("select 'nowait' from q -- skip locked", true, false), undefined)
  assert.deepEqual(of('select 1; select * from q for update nowait', true, false)!.points, ['=select 1', '/2=select * from q for update nowait'])
  // The count the report promises: split steps' points, their commit points, snapshot points.
  assert.equal(pointsOf(['begin', 'select 1; select 2', 'commit']), 4)
  assert.equal(pointsOf(['begin; select 1; select 2; commit']), 3)
  assert.equal(pointsOf(['select 1; select 2']), 3)
  assert.equal(pointsOf(['begin isolation level repeatable read', 'select * from q for update nowait', 'commit']), 4)
  assert.equal(pointsOf(['begin', 'select 1', 'select * from q for update nowait', 'commit']), 4)
})

test('replay lines name the points of a split step: s1.a1/2, s1.a1:snapshot then s1.a1; out of order is refused', async () => {
  const { parsePermutation, formatPermutation } = await import('../../src/permutation.js')
  const ss = [
    { name: 's1', steps: [{ name: 'b1' }, { name: 'a1' }, { name: 'c1' }] },
    { name: 's2', steps: [{ name: 'x2' }] },
  ]
  const line = 's1.b1 s1.a1:snapshot s2.x2 s1.a1 s1.a1/2 s1.a1/2:commit s1.c1'
  assert.throws(() => parsePermutation(line, ss), /has no step|must come after/)
  const ok = 's1.b1 s1.a1:snapshot s2.x2 s2.x2:commit s1.a1 s1.a1/2 s1.c1'
  const e = parsePermutation(ok, ss)
  assert.deepEqual(
    e.map((x) => [x.session, x.step, x.part ?? false, x.suffix ?? null, x.commit ?? false]),
    [
      [0, 0, false, null, false],
      [0, 1, false, ':snapshot', false],
      [1, 0, false, null, false],
      [1, 0, false, null, true],
      [0, 1, true, '', false],
      [0, 1, true, '/2', false],
      [0, 2, false, null, false],
    ],
  )
  assert.equal(formatPermutation(e, ss), ok)
  assert.throws(() => parsePermutation('s1.b1 s1.a1/2 s1.a1 s2.x2 s1.c1', ss), /s1\.a1\/2 must come after s1\.a1/)
  assert.throws(() => parsePermutation('s1.b1 s1.a1 s1.c1 s1.a1/2 s2.x2', ss), /must come after/)
  // A commit point after the step's later points.
  assert.equal(parsePermutation('s1.b1 s1.a1 s1.a1/2 s1.a1:commit s2.x2 s1.c1', ss).length, 6)
})
