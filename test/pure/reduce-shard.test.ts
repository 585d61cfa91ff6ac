// The reduced search split over n parts (src/explore/reduce-shard.ts ShardReduced, --shard i/n), with no database:
// the model world of reduce.test.ts stands in for the server. Each part runs alone (no part sees another's runs); the
// parts' runs together must reach every final state the exhaustive search reaches and the one-part reduced search
// reaches, with the same fewest switches of a violating run's class; the work the parts repeat is counted.
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { Dfs, random, switches } from '../../src/explore/enumerate.js'
import { Reduced, conflicts } from '../../src/explore/reduce.js'
import { ShardReduced } from '../../src/explore/reduce-shard.js'
import { fewestSwitches } from '../../src/explore/switches.js'
import { runWorld, type Op } from '../support/model-world.js'

interface Outcome {
  runs: number
  /** Final states reached, the orders run, and the fewest switches of a run that ends otherwise than every serial order. */
  finals: Set<string>
  orders: string[]
  shortest: number
}

/** The final states of the serial orders (each session whole, one after another): the states that "hold". */
function serialFinals(world: Op[][]): Set<string> {
  const out = new Set<string>()
  const perms = (xs: number[]): number[][] => (xs.length <= 1 ? [xs] : xs.flatMap((x) => perms(xs.filter((y) => y !== x)).map((p) => [x, ...p])))
  for (const p of perms(world.map((_, i) => i))) {
    let k = 0
    out.add(runWorld((ready) => (ready.includes(p[k]) ? p[k] : (k++, ready.includes(p[k]) ? p[k] : ready[0])), world, () => {}).final)
  }
  return out
}

function drive(s: Dfs | Reduced, world: Op[][], held: Set<string>, simplest: boolean): Outcome {
  const o: Outcome = { runs: 0, finals: new Set(), orders: [], shortest: Infinity }
  const reduced = s instanceof Reduced ? s : undefined
  for (let pick = s.next(); pick; pick = s.next()) {
    const x = runWorld(pick, world, (fp) => reduced?.step(fp))
    if (reduced) reduced.done(x.launched, x.fps)
    else (s as Dfs).done(x.launched)
    o.runs++
    o.finals.add(x.final)
    o.orders.push(x.launched.join(''))
    if (held.has(x.final)) continue
    // The reduced search shows a violation as the simplest order of its class; the exhaustive one ran every order.
    const shown = simplest ? (fewestSwitches(x.launched, x.fps, conflicts) ?? x.launched) : x.launched
    o.shortest = Math.min(o.shortest, switches(shown))
  }
  return o
}

function randomWorld(rnd: () => number): Op[][] {
  const ops = ['r:a', 'w:a', 'r:b', 'w:b', 'nop']
  return Array.from({ length: 2 + Math.floor(rnd() * 2) }, () => {
    const steps = Array.from({ length: 2 + Math.floor(rnd() * 3) }, () => ops[Math.floor(rnd() * ops.length)])
    return rnd() < 0.25 ? ['lock', ...steps, 'unlock'] : steps
  })
}

test('150 random worlds split in 2, 3 and 4 parts: the parts together reach the exhaustive and the one-part reduced final states, shortest the same', () => {
  const rnd = random(53)
  const tally = { split: 0, worlds: 0, one: 0, parts: 0, unique: 0 }
  for (let k = 0; k < 150; k++) {
    const world = randomWorld(rnd)
    const held = serialFinals(world)
    const all = drive(new Dfs(), world, held, false)
    const one = drive(new Reduced(), world, held, true)
    assert.deepEqual([...one.finals].sort(), [...all.finals].sort(), JSON.stringify(world))
    for (const n of [2, 3, 4]) {
      const parts = Array.from({ length: n }, (_, i) => {
        const s = new ShardReduced({ index: i + 1, count: n })
        return { o: drive(s, world, held, true), work: s.work }
      })
      const finals = new Set(parts.flatMap((p) => [...p.o.finals]))
      const what = `${JSON.stringify(world)} in ${n}`
      assert.deepEqual([...finals].sort(), [...all.finals].sort(), what)
      assert.equal(Math.min(...parts.map((p) => p.o.shortest)), one.shortest, what)
      // Every part accounts for each of its runs, and splits at the same branches.
      for (const p of parts) assert.equal(p.work.before + p.work.owned + p.work.found, p.o.runs, what)
      assert.equal(new Set(parts.map((p) => p.work.split)).size, 1, what)
      tally.worlds++
      if (parts[0].work.branches > 0) tally.split++
      tally.one += one.runs
      tally.parts += parts.reduce((a, p) => a + p.o.runs, 0)
      tally.unique += new Set(parts.flatMap((p) => p.o.orders)).size
    }
  }
  const repeated = tally.parts - tally.unique
  console.log(`split ${tally.split} of ${tally.worlds}; runs: one part ${tally.one}, all parts ${tally.parts}, ${tally.unique} different, ${repeated} repeated`)
  // The check is not vacuous: most searches were split, and the split did not run every part's share everywhere.
  assert.ok(tally.split > tally.worlds / 2, `split ${tally.split} of ${tally.worlds}`)
  assert.ok(tally.parts < tally.one * 4, `${tally.parts} runs in all against ${tally.one} on one part`)
})

test('a part skips the branches of the others: a split search of 3 sessions runs fewer runs in each part than in one', () => {
  const world: Op[][] = [
    ['nop', 'r:a', 'w:a', 'nop'],
    ['nop', 'r:a', 'w:a', 'nop'],
    ['nop', 'r:a', 'w:a', 'nop'],
  ]
  const held = serialFinals(world)
  const one = drive(new Reduced(), world, held, true)
  for (const n of [2, 3]) {
    const works = Array.from({ length: n }, (_, i) => {
      const s = new ShardReduced({ index: i + 1, count: n })
      return { runs: drive(s, world, held, true).runs, work: s.work }
    })
    console.log(`lost update, 3 sessions, in ${n}: one part ${one.runs} runs; parts ${works.map((w) => `${w.runs} (${w.work.before} before the split, ${w.work.owned} own, ${w.work.found} found)`).join(', ')}`)
    for (const w of works) assert.ok(w.work.branches > 0 && w.runs < one.runs, `${w.runs} runs in a part of ${n}, ${one.runs} in one`)
  }
})
