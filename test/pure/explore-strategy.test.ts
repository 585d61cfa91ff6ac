// race explore's one choice of strategy (src/explore/strategies.ts chooseStrategy), with no server: which search a
// request gets from the checked flags and the counts, and what follows from it (jobs, --max, footprints, progress),
// as the search made these choices before they were one function (the conditions spread over exploreOn).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { UsageError } from '../../src/errors.js'
import { chooseStrategy } from '../../src/explore/choose.js'
import { ReducedSearch } from '../../src/explore/reduced-search.js'
import { AppInterleavings, Exhaustive, PreemptionBounded, Sample } from '../../src/explore/strategies.js'
import type { StrategyAsk, StrategyFacts, Word } from '../../src/explore/strategy.js'

const cli: Word = (x) => `--${x}`
const api: Word = (x) => x
const ask = (a: Partial<StrategyAsk> = {}): StrategyAsk => ({ max: 1000, seed: 7, seeded: false, depth: 3, ...a })
/** Two sessions of declared steps, 3 points each: 20 orders. */
const declared = (a: Partial<StrategyFacts> = {}): StrategyFacts => ({ app: false, faulted: false, sessions: 2, counts: [3, 3], orders: 20n, ...a })
/** An application race before its first run (orders not known: 0). */
const app = (a: Partial<StrategyFacts> = {}): StrategyFacts => ({ app: true, faulted: false, sessions: 2, counts: [], orders: 0n, ...a })

test('declared steps: the reduced search by default, above --max too, --exhaustive, --preemptions, --sample', () => {
  const cases: [string, StrategyAsk, StrategyFacts, Function, string][] = [
    ['default', ask(), declared(), ReducedSearch, 'reduced'],
    ['orders above --max', ask({ max: 19 }), declared(), ReducedSearch, 'reduced'],
    ['orders at --max', ask({ max: 20 }), declared(), ReducedSearch, 'reduced'],
    ['--exhaustive above --max', ask({ exhaustive: true, max: 5 }), declared(), Exhaustive, 'exhaustive'],
    ['--preemptions above --max', ask({ preemptions: 1, max: 5 }), declared(), PreemptionBounded, 'preemptions'],
    ['--preemptions with --exhaustive', ask({ preemptions: 1, exhaustive: true }), declared(), PreemptionBounded, 'preemptions'],
    ['--sample', ask({ sample: 10 }), declared(), Sample, 'sample'],
  ]
  for (const [what, a, f, cls, search] of cases) {
    const s = chooseStrategy(a, f, cli)
    assert.equal(s.constructor, cls, what)
    assert.equal(s.search, search, what)
    assert.equal(s.mode, search === 'sample' ? 'sample' : 'all', what)
  }
})

test('the reduced search of declared steps stops at --max runs and a sample takes over; an application race\'s stops there', () => {
  // Declared steps whose orders are above --max: reduced first, sampled only past --max runs (issue 41, item 3).
  const big = chooseStrategy(ask({ max: 19 }), declared(), cli)
  assert.ok(big instanceof ReducedSearch)
  assert.equal(big.capped, true)
  const then = big.afterMax()
  assert.ok(then instanceof Sample)
  assert.deepEqual([then.fields().sample!.size, then.fields().sample!.seed], [200, 7])
  assert.ok(chooseStrategy(ask(), declared(), cli).afterMax() instanceof Sample)
  // An application race's reduced search (--reduce, or isolated sessions) stops at --max and says so: no sample.
  for (const reduced of [chooseStrategy(ask({ reduce: true, max: 5 }), app({ orders: 6n }), cli), chooseStrategy(ask({ max: 5 }), app({ orders: 6n, isolated: true }), cli)]) {
    assert.ok(reduced instanceof ReducedSearch)
    assert.equal(reduced.capped, true)
    assert.equal(reduced.afterMax(), undefined)
  }
  // Nothing else takes over: a sample, an exhaustive search, an application race's every interleaving.
  for (const s of [chooseStrategy(ask({ sample: 3 }), declared(), cli), chooseStrategy(ask({ exhaustive: true, max: 5 }), declared(), cli), chooseStrategy(ask(), app(), cli)]) assert.equal(s.afterMax(), undefined)
})

test('an application race: every interleaving (capped at --max) unless --reduce, with --inject too; a sample once its first run counts more orders than --max', () => {
  const every = chooseStrategy(ask(), app(), cli)
  assert.ok(every instanceof AppInterleavings)
  assert.equal(every.search, 'exhaustive')
  assert.equal(every.capped, true)
  const reduced = chooseStrategy(ask({ reduce: true }), app(), cli)
  assert.ok(reduced instanceof ReducedSearch)
  assert.equal(reduced.capped, true)
  // An injected fault is a choice of its session inside the reduced search (issue 41, item 4).
  assert.ok(chooseStrategy(ask({ reduce: true }), app({ faulted: true }), cli) instanceof ReducedSearch)
  assert.ok(chooseStrategy(ask(), app({ faulted: true }), cli) instanceof AppInterleavings)
  // After the first run: its queries' orders against --max.
  assert.ok(chooseStrategy(ask({ max: 5 }), app({ orders: 6n }), cli) instanceof Sample)
  assert.ok(chooseStrategy(ask({ max: 6 }), app({ orders: 6n }), cli) instanceof AppInterleavings)
  assert.ok(chooseStrategy(ask({ max: 5, reduce: true }), app({ orders: 6n }), cli) instanceof ReducedSearch)
  assert.ok(chooseStrategy(ask({ max: 5, reduce: true }), app({ orders: 6n, faulted: true }), cli) instanceof ReducedSearch)
  // --exhaustive is not capped; nor is a sample.
  const exhaustive = chooseStrategy(ask({ exhaustive: true, max: 5 }), app({ orders: 6n }), cli)
  assert.ok(exhaustive instanceof Exhaustive && !(exhaustive instanceof AppInterleavings))
  assert.equal(exhaustive.capped, false)
  assert.equal(chooseStrategy(ask({ sample: 3 }), app(), cli).capped, false)
})

test('jobs: a sample, an exhaustive search and the reduced search of declared steps or isolated sessions spread; --preemptions and the other application races run on one', () => {
  assert.equal(chooseStrategy(ask({ exhaustive: true }), declared(), cli).oneJob(), undefined)
  assert.equal(chooseStrategy(ask({ sample: 10 }), declared(), cli).oneJob(), undefined)
  assert.equal(chooseStrategy(ask(), declared(), cli).oneJob(), undefined)
  assert.equal(chooseStrategy(ask({ preemptions: 2 }), declared(), cli).oneJob(), 'a preemption-bounded search runs on one job')
  // Sessions in one process: one job, whatever the search.
  for (const a of [ask(), ask({ reduce: true }), ask({ exhaustive: true }), ask({ sample: 4 }), ask({ preemptions: 1 })]) {
    assert.match(chooseStrategy(a, app(), cli).oneJob() ?? '', /^an application race whose sessions share one process/)
  }
  // Isolated (a worker each): the reduced search spreads (its runs taken in the one-job order); the others run on one.
  assert.equal(chooseStrategy(ask(), app({ isolated: true }), cli).oneJob(), undefined)
  assert.equal(chooseStrategy(ask({ max: 5 }), app({ isolated: true, orders: 6n }), cli).oneJob(), undefined)
  for (const a of [ask({ exhaustive: true }), ask({ sample: 4 }), ask({ preemptions: 1 })]) {
    assert.equal(chooseStrategy(a, app({ isolated: true }), cli).oneJob(), 'an application race runs on one job')
  }
  // At most as many jobs as runs: a sample's draws (this shard's), or the orders.
  assert.equal(chooseStrategy(ask({ sample: 10 }), declared(), cli).atOnce(), 10)
  assert.equal(chooseStrategy(ask({ sample: 10, shard: { index: 2, count: 3 }, seeded: true }), declared(), cli).atOnce(), 3)
  assert.equal(chooseStrategy(ask({ exhaustive: true }), declared(), cli).atOnce(), 20)
})

test('what each strategy plans, learns and adds to the result', () => {
  const reduced = chooseStrategy(ask(), declared(), cli)
  assert.equal(reduced.learns, true)
  assert.equal(reduced.planned(), null)
  assert.deepEqual(reduced.fields(), { reduction: { steps: 0, unclassified: 0, redundant: 0, retried: 0 } })
  const exhaustive = chooseStrategy(ask({ exhaustive: true }), declared(), cli)
  assert.equal(exhaustive.learns, false)
  assert.equal(exhaustive.planned(), 20)
  assert.equal(chooseStrategy(ask({ exhaustive: true, shard: { index: 1, count: 2 } }), declared(), cli).planned(), null)
  assert.equal(chooseStrategy(ask({ sample: 10 }), declared(), cli).planned(), 10)
  assert.equal(chooseStrategy(ask({ preemptions: 1 }), declared(), cli).planned(), null)
  assert.deepEqual(chooseStrategy(ask({ preemptions: 1 }), declared(), cli).fields(), { preemptions: { bound: 1, reached: 0, complete: false } })
  const sample = chooseStrategy(ask({ sample: 10, acceptSample: 0.9 }), declared({ faulted: true }), cli).fields().sample!
  assert.deepEqual([sample.size, sample.seed, sample.depth, sample.faults, sample.accept], [10, 7, 3, 'drawn', 0.9])
})

test('--shard splits a sample (with its seed), an exhaustive search or the reduced search; not an application race in one process', () => {
  const shard = { index: 1, count: 2 }
  // The reduced search, below and above --max: a part stops at --max (no sample follows: parts of a sample and of a
  // search would not join), on one job.
  for (const max of [1000, 5]) {
    const s = chooseStrategy(ask({ shard, max }), declared(), cli)
    assert.ok(s instanceof ReducedSearch && s.capped && s.afterMax() === undefined, `--max ${max}`)
    assert.match(s.oneJob() ?? '', /split by --shard runs on one job/)
    assert.deepEqual(s.fields().shard, { index: 1, count: 2, passed: 0, reduced: { before: 0, owned: 0, found: 0, branches: 0, mine: 0, split: '' } })
  }
  assert.ok(chooseStrategy(ask({ shard }), app({ isolated: true }), cli) instanceof ReducedSearch)
  assert.throws(() => chooseStrategy(ask({ shard }), app({ orders: 6n }), cli), (e: unknown) => e instanceof UsageError && /^--shard splits a sample, an exhaustive search or the reduced search .* give --sample K or --exhaustive too/.test(e.message))
  assert.throws(() => chooseStrategy(ask({ shard }), app({ orders: 6n }), api), (e: unknown) => e instanceof UsageError && /^shard splits .* give sample or exhaustive too/.test(e.message))
  assert.throws(() => chooseStrategy(ask({ shard, sample: 5 }), declared(), cli), (e: unknown) => e instanceof UsageError && /^--shard needs --seed/.test(e.message))
  assert.ok(chooseStrategy(ask({ shard, sample: 5, seeded: true }), declared(), cli) instanceof Sample)
  assert.ok(chooseStrategy(ask({ shard, exhaustive: true }), declared(), cli) instanceof Exhaustive)
  // --preemptions with --exhaustive takes the bound; the shard is not refused (as before).
  assert.ok(chooseStrategy(ask({ shard, exhaustive: true, preemptions: 1 }), declared(), cli) instanceof PreemptionBounded)
})

test('an application race whose sessions run isolated (a worker thread each): the reduced search by default, --inject too; --exhaustive and --sample still decide', () => {
  assert.ok(chooseStrategy(ask(), app({ isolated: true }), cli) instanceof ReducedSearch)
  // In one process (sharedState, a race object): every interleaving unless --reduce.
  assert.ok(chooseStrategy(ask(), app({ isolated: false }), cli) instanceof AppInterleavings)
  // --inject no longer decides against the reduction (issue 41, item 4: a fault is a choice of its session inside it);
  // today a race with faults runs in one process (app/scenario.ts withFaults), so this pair is the chooser's alone.
  assert.ok(chooseStrategy(ask(), app({ isolated: true, faulted: true }), cli) instanceof ReducedSearch)
  assert.ok(chooseStrategy(ask({ exhaustive: true }), app({ isolated: true }), cli) instanceof Exhaustive)
  assert.ok(chooseStrategy(ask({ sample: 5 }), app({ isolated: true }), cli) instanceof Sample)
})
