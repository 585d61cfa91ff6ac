// The reduced search (src/explore/reduce.ts) with no database: a small model world stands in for the server. Sessions
// read and write shared cells into their own registers, take and release a lock (a step that waits, or that wakes a
// waiter, is 'all', as the engine says for a real server); each step's footprint is what it read and wrote. The
// check: every final state (cells and every session's registers) the full search reaches, the reduced one reaches
// too; and the same check fails with a relation that forgets read-write conflicts (the check can fail).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Dfs, Preemptive, random, type Strategy } from '../../src/explore/enumerate.js'
import { Pct } from '../../src/explore/pct.js'
import { conflicts, Reduced, type Footprint } from '../../src/explore/reduce.js'
import { fewestSwitches } from '../../src/explore/switches.js'
import { switches } from '../../src/explore/enumerate.js'
import { runWorld, type Op } from '../support/model-world.js'

interface Outcome {
  runs: number
  finals: Set<string>
}

function drive(strategy: Strategy, sessions: Op[][]): Outcome {
  const finals = new Set<string>()
  let runs = 0
  const reduced = strategy instanceof Reduced ? strategy : undefined
  for (let pick = strategy.next(); pick; pick = strategy.next()) {
    const { launched, fps, final } = runWorld(pick, sessions, (fp) => reduced?.step(fp))
    finals.add(final)
    reduced ? reduced.done(launched, fps) : strategy.done(launched)
    runs++
  }
  return { runs, finals }
}

const WORLDS: Record<string, Op[][]> = {
  'lost update, 2 sessions': [
    ['nop', 'r:a', 'w:a', 'nop'],
    ['nop', 'r:a', 'w:a', 'nop'],
  ],
  'lost update, 3 sessions': [
    ['nop', 'r:a', 'w:a', 'nop'],
    ['nop', 'r:a', 'w:a', 'nop'],
    ['nop', 'r:a', 'w:a', 'nop'],
  ],
  'write skew': [
    ['r:a', 'r:b', 'w:a'],
    ['r:a', 'r:b', 'w:b'],
  ],
  'disjoint cells commute': [
    ['r:a', 'w:a', 'r:a'],
    ['r:b', 'w:b', 'r:b'],
    ['r:c', 'w:c'],
  ],
  'a lock serializes the read and write': [
    ['lock', 'r:a', 'w:a', 'unlock'],
    ['lock', 'r:a', 'w:a', 'unlock'],
    ['r:a', 'w:b'],
  ],
  'a reader among writers': [
    ['w:a', 'w:b'],
    ['r:b', 'r:a'],
    ['w:b', 'nop', 'w:a'],
  ],
}

for (const [name, world] of Object.entries(WORLDS)) {
  test(`reduced finds every final state the full search finds: ${name}`, () => {
    const all = drive(new Dfs(), world)
    const red = drive(new Reduced(), world)
    assert.deepEqual([...all.finals].sort(), [...red.finals].sort())
    assert.ok(red.runs <= all.runs, `${red.runs} reduced runs, ${all.runs} full`)
  })
}

test('200 random worlds (2-3 sessions of 1-4 steps over 2 cells and a lock): the reduced search misses no final state', () => {
  const rnd = random(29)
  const ops = ['r:a', 'w:a', 'r:b', 'w:b', 'nop']
  let fewer = 0
  for (let k = 0; k < 200; k++) {
    const world = Array.from({ length: 2 + Math.floor(rnd() * 2) }, () => {
      const steps = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => ops[Math.floor(rnd() * ops.length)])
      // Some sessions take the lock around their steps.
      return rnd() < 0.3 ? ['lock', ...steps, 'unlock'] : steps
    })
    const all = drive(new Dfs(), world)
    const red = drive(new Reduced(), world)
    assert.deepEqual([...red.finals].sort(), [...all.finals].sort(), JSON.stringify(world))
    if (red.runs < all.runs) fewer++
  }
  assert.ok(fewer > 100, `fewer runs in ${fewer} of 200 worlds`)
})

test('steps that touch nothing in common are not both ordered: three sessions on their own cells take one run', () => {
  const world = WORLDS['disjoint cells commute']
  assert.ok(drive(new Dfs(), world).runs > 100)
  assert.equal(drive(new Reduced(), world).runs, 1)
})

test('with every step conflicting, the reduced search runs exactly the orders the full one does', () => {
  const world = WORLDS['write skew']
  const everything = () => true
  assert.equal(drive(new Reduced(everything), world).runs, drive(new Dfs(), world).runs)
})

test('the check can fail: a relation that forgets that a read conflicts with a write misses final states', () => {
  const blind = (a: Footprint, b: Footprint) => (a === 'all' || b === 'all' ? true : a.writes.some((w) => b.writes.includes(w)))
  const missed = Object.values(WORLDS).filter((world) => {
    const all = drive(new Dfs(), world)
    const red = drive(new Reduced(blind), world)
    return [...all.finals].some((f) => !red.finals.has(f))
  })
  assert.ok(missed.length > 0, 'an unsound relation must miss a final state in some world')
})

test('conflicts: write-write and read-write on one resource, never read-read; all with anything', () => {
  const r = (x: string): Footprint => ({ reads: [x], writes: [] })
  const w = (x: string): Footprint => ({ reads: [], writes: [x] })
  assert.equal(conflicts(r('t'), r('t')), false)
  assert.equal(conflicts(r('t'), w('t')), true)
  assert.equal(conflicts(w('t'), w('t')), true)
  assert.equal(conflicts(w('t'), w('u')), false)
  assert.equal(conflicts('all', { reads: [], writes: [] }), true)
})

test('fewestSwitches: the simplest order of a run\'s class keeps every conflicting pair the same way round', () => {
  const r = (x: string): Footprint => ({ reads: [x], writes: [] })
  const w = (x: string): Footprint => ({ reads: [], writes: [x] })
  const none: Footprint = { reads: [], writes: [] }
  // s0 begins, s1 begins, s0 reads a, s1 writes a, s0 commits, s1 commits: s0's read must stay before s1's write.
  const launched = [0, 1, 0, 1, 0, 1]
  const fps = [none, none, r('a'), w('a'), none, none]
  const best = fewestSwitches(launched, fps)!
  assert.equal(switches(best), 1)
  assert.deepEqual(best, [0, 0, 0, 1, 1, 1])
  // With s1's write first, s1 goes first (its commit touches nothing here): one switch, the other way round.
  assert.deepEqual(fewestSwitches([0, 1, 1, 0, 0, 1], [none, none, w('a'), r('a'), none, none]), [1, 1, 1, 0, 0, 0])
  // Every step conflicting: the order is the run itself.
  assert.deepEqual(fewestSwitches(launched, launched.map(() => 'all' as const)), launched)
})

/** Every run a strategy makes over `world` (steps per session, none of which waits): the order each run launched. */
function runWaitless(world: readonly (readonly unknown[])[], s: Strategy): number[][] {
  const out: number[][] = []
  for (let pick = s.next(); pick; pick = s.next()) {
    const next = world.map(() => 0)
    const launched: number[] = []
    for (;;) {
      const ready = world.map((_, i) => i).filter((i) => next[i] < world[i].length)
      if (!ready.length) break
      const i = pick(ready)
      next[i]++
      launched.push(i)
    }
    s.done(launched)
    out.push(launched)
  }
  return out
}

test('PCT: the same seed draws the same runs; a violation of depth 2 turns up at least as often as its bound 1/(n k)', () => {
  // Three sessions of four steps, none waits. The "violation": s1's second step before s2's first, which comes
  // before s1's third: s2 must preempt s1 there (depth 2: two ordering constraints).
  const world = [['nop', 'nop', 'nop', 'nop'], ['nop', 'nop', 'nop', 'nop'], ['nop', 'nop', 'nop', 'nop']]
  const orders = (s: Strategy) => runWaitless(world, s)
  const a = orders(new Pct(40, 9, 2, 3, 12))
  assert.deepEqual(orders(new Pct(40, 9, 2, 3, 12)), a)
  assert.notDeepEqual(orders(new Pct(40, 10, 2, 3, 12)), a)
  const runs = 3000
  const pct = new Pct(runs, 1, 2, 3, 12)
  const hit = orders(pct).filter((o) => {
    const at = (s: number, k: number) => o.map((x, i) => [x, i]).filter(([x]) => x === s)[k][1]
    return at(0, 1) < at(1, 0) && at(1, 0) < at(0, 2)
  }).length
  assert.ok(hit / runs >= 1 / (3 * 12), `${hit} of ${runs}`)
  const c = pct.coverage()
  assert.equal(c.k, 12)
  assert.equal(c.runs, runs)
  assert.ok(Math.abs(c.probability - (1 - (1 - 1 / 36) ** runs)) < 1e-12)
})

test('preemption bounding: every order with at most K preemptions, fewest first; with K large, every order', () => {
  const world = [['nop', 'nop', 'nop'], ['nop', 'nop', 'nop'], ['nop', 'nop']]
  /** Preemptions of an order: leaving a session that still had steps (none waits here). */
  const preemptions = (o: number[]) => {
    const left = world.map((s) => s.length)
    let p = 0
    for (let i = 0; i < o.length; i++) {
      if (i > 0 && o[i] !== o[i - 1] && left[o[i - 1]] > 0) p++
      left[o[i]]--
    }
    return p
  }
  const runAll = (s: Strategy) => runWaitless(world, s)
  const every = runAll(new Dfs())
  const all = runAll(new Preemptive(100))
  assert.equal(new Set(all.map((o) => o.join())).size, all.length, 'no order twice')
  assert.deepEqual(all.map((o) => o.join()).sort(), every.map((o) => o.join()).sort())
  const costs = all.map(preemptions)
  assert.deepEqual(costs, [...costs].sort((a, b) => a - b), 'fewest preemptions first')
  for (const k of [0, 1, 2]) {
    const s = new Preemptive(k)
    const got = runAll(s)
    assert.deepEqual(got.map((o) => o.join()).sort(), every.filter((o) => preemptions(o) <= k).map((o) => o.join()).sort())
    assert.equal(s.reached, k)
    assert.equal(s.left, 0)
  }
})

/**
 * The model world with injected faults (--inject): a step marked `?` is a fault's site, offered beside itself as the
 * choice n * 2 + i (as app/trial.ts numbers it for the second of two faults, say); taking it aborts the session (its
 * register back to 0, its steps from the first again: a retry), with the footprint 'all' (an error, as the engine
 * says), at most `budget` faults a run. The final state names where each fault went.
 */
function driveFaulted(strategy: Strategy, sessions: Op[][], budget = 1): Outcome {
  const finals = new Set<string>()
  let runs = 0
  const n = sessions.length
  const reduced = strategy instanceof Reduced ? strategy : undefined
  for (let pick = strategy.next(); pick; pick = strategy.next()) {
    const cells = new Map<string, number>()
    const reg = sessions.map(() => 0)
    const next = sessions.map(() => 0)
    const faults: string[] = []
    const launched: number[] = []
    const fps: Footprint[] = []
    for (;;) {
      const base = sessions.map((_, i) => i).filter((i) => next[i] < sessions[i].length)
      if (!base.length) break
      const ready = [...base, ...(faults.length < budget ? base.filter((i) => sessions[i][next[i]].endsWith('?')).map((i) => n * 2 + i) : [])]
      const x = pick(ready)
      assert.ok(ready.includes(x))
      launched.push(x)
      const i = x % n
      let fp: Footprint = { reads: [], writes: [] }
      if (x >= n) {
        faults.push(`s${i}@${next[i]}`)
        reg[i] = 0
        next[i] = 0
        fp = 'all'
      } else {
        const [kind, c] = sessions[i][next[i]++].replace(/\?$/, '').split(':')
        if (kind === 'r') {
          reg[i] = reg[i] * 10 + (cells.get(c) ?? 0)
          fp = { reads: [c], writes: [] }
        } else if (kind === 'w') {
          cells.set(c, reg[i] + 1)
          fp = { reads: [], writes: [c] }
        }
      }
      fps.push(fp)
      reduced?.step(fp)
    }
    finals.add(`${[...cells].sort().join(',')} | ${reg.join(',')} | ${faults.join(',')}`)
    reduced ? reduced.done(launched, fps) : strategy.done(launched)
    runs++
  }
  return { runs, finals }
}

test('an injected fault is a choice of its session: the reduced search reaches every final state, and where each fault went, that every order reaches', () => {
  const worlds: [Op[][], number][] = [
    // Two sessions on their own cells, each with a fault's site at its last step: nothing to reorder, every fault placed.
    [[['r:a', 'w:a?'], ['r:b', 'w:b?']], 1],
    // The lost update with its commit a fault's site (a retry loop under --inject 40001@commit), one fault and two.
    [[['nop', 'r:a', 'w:a?'], ['nop', 'r:a', 'w:a?']], 1],
    [[['nop', 'r:a', 'w:a?'], ['nop', 'r:a', 'w:a?']], 2],
    [[['r:a?', 'w:b'], ['r:b?', 'w:a'], ['nop?']], 1],
  ]
  const rnd = random(41)
  const ops = ['r:a', 'w:a', 'r:b', 'w:b', 'nop']
  for (let k = 0; k < 60; k++) {
    const world = Array.from({ length: 2 + Math.floor(rnd() * 2) }, () => Array.from({ length: 1 + Math.floor(rnd() * 3) }, () => ops[Math.floor(rnd() * ops.length)] + (rnd() < 0.3 ? '?' : '')))
    worlds.push([world, 1 + Math.floor(rnd() * 2)])
  }
  let fewer = 0
  for (const [world, budget] of worlds) {
    const n = world.length
    const all = driveFaulted(new Dfs(), world, budget)
    const red = driveFaulted(new Reduced(conflicts, (x) => x % n), world, budget)
    assert.deepEqual([...red.finals].sort(), [...all.finals].sort(), `${JSON.stringify(world)}, ${budget} fault(s)`)
    if (red.runs < all.runs) fewer++
  }
  assert.ok(fewer > worlds.length / 2, `fewer runs in ${fewer} of ${worlds.length} worlds`)
  // Disjoint sessions: the faults are searched, not every order of them enumerated.
  const disjoint = [['r:a', 'w:a?'], ['r:b', 'w:b?']]
  assert.ok(driveFaulted(new Reduced(conflicts, (x) => x % 2), disjoint).runs < driveFaulted(new Dfs(), disjoint).runs / 2)
})
