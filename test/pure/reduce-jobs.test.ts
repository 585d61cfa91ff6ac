// The reduced search on several jobs (src/explore/reduce.ts ReducedJobs), with no database: the model world of
// reduce.test.ts (cells read into registers and written, a lock) stands in for the server. Runs are handed out to J
// jobs and end in a seeded random order; the runs taken must be the one-job search's, run for run (the same choices,
// so the same final states and the same first violation), and the work made ahead that was not needed is counted.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { random } from '../../src/explore/enumerate.js'
import { Reduced } from '../../src/explore/reduce.js'
import { ReducedJobs, type AheadRun } from '../../src/explore/reduce-jobs.js'
import { runWorld, type Op } from '../support/model-world.js'

/** The one-job search's runs, in order. */
function oneJob(sessions: Op[][]): string[] {
  const r = new Reduced()
  const out: string[] = []
  for (let pick = r.next(); pick; pick = r.next()) {
    const x = runWorld(pick, sessions, (fp) => r.step(fp))
    r.done(x.launched, x.fps)
    out.push(`${x.launched.join('')} ${x.final}`)
  }
  return out
}

/**
 * The same search on `jobs` jobs, runs ending in an order drawn from `seed`: the runs taken, in the order taken, and
 * the runs made. `counts`: each session's steps, given to the search (as for declared steps) or not.
 */
function onJobs(sessions: Op[][], jobs: number, seed: number, counts?: number[]): { taken: string[]; made: number; wasted: number } {
  const rnd = random(seed)
  const j = new ReducedJobs(new Reduced(), (x) => x, Infinity, counts)
  const flying: AheadRun[] = []
  const finals = new Map<AheadRun, string>()
  const taken: string[] = []
  for (let guard = 0; guard < 100_000; guard++) {
    for (let r = flying.length < jobs ? j.next() : undefined; r; r = flying.length < jobs ? j.next() : undefined) flying.push(r)
    if (!flying.length) break
    const r = flying.splice(Math.floor(rnd() * flying.length), 1)[0]
    const x = runWorld(r.pick, sessions, (fp) => r.step(fp))
    finals.set(r, x.final)
    j.done(r, x.launched, x.fps)
    for (const t of j.takenSince()) taken.push(`${t.launched!.join('')} ${finals.get(t)}`)
  }
  assert.equal(j.left, false)
  return { taken, made: j.made, wasted: j.wasted }
}

const WORLDS: Record<string, Op[][]> = {
  'lost update, 3 sessions': [
    ['nop', 'r:a', 'w:a', 'nop'],
    ['nop', 'r:a', 'w:a', 'nop'],
    ['nop', 'r:a', 'w:a', 'nop'],
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
  test(`on 2 and 4 jobs, whatever order the runs end in, the runs taken are the one-job search's: ${name}`, () => {
    const one = oneJob(world)
    for (const jobs of [2, 4]) {
      for (const seed of [1, 2, 3]) {
        for (const counts of [undefined, world.map((s) => s.length)]) {
          const x = onJobs(world, jobs, seed, counts)
          assert.deepEqual(x.taken, one, `${jobs} jobs, seed ${seed}${counts ? ', counts given' : ''}`)
          assert.equal(x.made, one.length + x.wasted)
        }
      }
    }
  })
}

test('100 random worlds on 3 jobs: the one-job runs, and most runs made ahead are taken', () => {
  const rnd = random(41)
  const ops = ['r:a', 'w:a', 'r:b', 'w:b', 'nop']
  let made = 0
  let needed = 0
  for (let k = 0; k < 100; k++) {
    const world = Array.from({ length: 2 + Math.floor(rnd() * 2) }, () => {
      const steps = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => ops[Math.floor(rnd() * ops.length)])
      return rnd() < 0.3 ? ['lock', ...steps, 'unlock'] : steps
    })
    const one = oneJob(world)
    const x = onJobs(world, 3, k)
    assert.deepEqual(x.taken, one, JSON.stringify(world))
    made += x.made
    needed += one.length
  }
  console.log(`# 100 worlds on 3 jobs: ${made} runs made for ${needed} needed (${made - needed} wasted)`)
  assert.ok(made < 2 * needed, `${made} runs made for ${needed}`)
})

/**
 * The search on 2 jobs whose runs all take as long (each ends in the order it started): the runs taken, the runs
 * made, and how many times a job had nothing to run while the search had runs left.
 */
function lockstep(world: Op[][], counts?: number[]): { taken: string[]; made: number; idle: number } {
  const j = new ReducedJobs(new Reduced(), (x) => x, Infinity, counts)
  const flying: AheadRun[] = []
  const finals = new Map<AheadRun, string>()
  const taken: string[] = []
  let idle = 0
  for (let guard = 0; guard < 100_000; guard++) {
    for (let r = flying.length < 2 ? j.next() : undefined; r; r = flying.length < 2 ? j.next() : undefined) flying.push(r)
    if (!flying.length) break
    if (j.left) idle += 2 - flying.length
    const r = flying.shift()!
    const x = runWorld(r.pick, world, (fp) => r.step(fp))
    finals.set(r, x.final)
    j.done(r, x.launched, x.fps)
    for (const t of j.takenSince()) taken.push(`${t.launched!.join('')} ${finals.get(t)}`)
  }
  return { taken, made: j.made, idle }
}

test("a job with none of the search's waiting runs left runs one past the run in flight, as guessed: few waits, few runs wasted, the one-job runs", () => {
  // Each run adds the next one: with only the runs the search has found so far, one job of two waits for most runs.
  const rnd = random(41)
  const ops = ['r:a', 'w:a', 'r:b', 'w:b', 'nop']
  let made = 0
  let needed = 0
  let idle = 0
  for (let k = 0; k < 100; k++) {
    const world = Array.from({ length: 2 + Math.floor(rnd() * 2) }, () => {
      const steps = Array.from({ length: 1 + Math.floor(rnd() * 4) }, () => ops[Math.floor(rnd() * ops.length)])
      return rnd() < 0.3 ? ['lock', ...steps, 'unlock'] : steps
    })
    const one = oneJob(world)
    const x = lockstep(world, world.map((s) => s.length))
    assert.deepEqual(x.taken, one, JSON.stringify(world))
    made += x.made
    needed += one.length
    idle += x.idle
  }
  console.log(`# 100 worlds on 2 jobs, runs ending as they started: ${idle} waits, ${made - needed} of ${made} runs wasted`)
  // Before a job ran ahead of the run in flight: 1,605 waits for 3,365 runs (4 wasted); guessing, 190 (113 wasted).
  assert.ok(idle < needed / 10, `${idle} waits for ${needed} runs`)
  assert.ok(made - needed < needed / 10, `${made - needed} runs wasted of ${made}`)
})

test('before the first run shows a footprint, nothing is guessed: the second job waits rather than run an order chosen from nothing', () => {
  const world = WORLDS['lost update, 3 sessions']
  const j = new ReducedJobs(new Reduced(), (x) => x, Infinity, world.map((s) => s.length))
  const first = j.next()!
  assert.equal(j.next(), undefined)
  // Its first steps seen, the rest still not: nothing yet.
  first.pick([0, 1, 2])
  first.step({ reads: [], writes: [] })
  assert.equal(j.next(), undefined)
  assert.equal(j.made, 1)
})

test("a run in flight that has made all its choices says what the search does after it: the next job runs that, and it is taken", () => {
  const world = WORLDS['a reader among writers']
  const one = oneJob(world)
  // Each session's steps known: the run in flight has no step left. Its footprints, seen, are not guessed.
  const j = new ReducedJobs(new Reduced(), (x) => x, Infinity, world.map((s) => s.length))
  const first = j.next()!
  // The first run's steps all launched and seen, the run not over yet (its invariant is being read, say).
  const x = runWorld(first.pick, world, (fp) => first.step(fp))
  const second = j.next()
  assert.ok(second, 'a run for the second job while the first is in flight')
  j.done(first, x.launched, x.fps)
  const y = runWorld(second.pick, world, (fp) => second.step(fp))
  j.done(second, y.launched, y.fps)
  const taken = j.takenSince().map((t) => t.launched!.join(''))
  assert.deepEqual(taken, one.slice(0, 2).map((t) => t.split(' ')[0]))
  assert.equal(j.wasted, 0)
})

test('a capped search takes no more than its limit, and says runs were left', () => {
  const world = WORLDS['lost update, 3 sessions']
  const one = oneJob(world)
  const j = new ReducedJobs(new Reduced(), (x) => x, 5)
  const flying: AheadRun[] = []
  const taken: string[] = []
  for (;;) {
    for (let r = flying.length < 2 ? j.next() : undefined; r; r = flying.length < 2 ? j.next() : undefined) flying.push(r)
    const r = flying.pop()
    if (!r) break
    const x = runWorld(r.pick, world, (fp) => r.step(fp))
    j.done(r, x.launched, x.fps)
    for (const t of j.takenSince()) taken.push(`${t.launched!.join('')} ${x.final}`)
  }
  assert.equal(j.runs, 5)
  assert.equal(j.left, true)
  assert.deepEqual(taken.map((t) => t.split(' ')[0]), one.slice(0, 5).map((t) => t.split(' ')[0]))
})
