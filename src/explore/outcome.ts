// A finished search as its result: what its runs came to, judged as a whole (the exit code from what it found,
// explore/findings.ts), with its strategy's own fields and the lines that replay the shortest violation and failure.
import type { ServerInfo } from '../db/driver.js'
import type { Touched } from '../engine/footprint.js'
import type { TrialFacts } from '../engine/types.js'
import { racelabVersion } from '../home.js'
import { isFileScenario } from '../specfile/common.js'
import { exitCode, summarize, type ExpectOverride } from '../judge/index.js'
import type { Plan } from '../plan.js'
import { raceDigest } from '../registry.js'
import type { Scenario } from '../scenario.js'
import { exitFromFindings, type Stopped } from './findings.js'
import { replayCommand, replayTarget } from './replay.js'
import { better, groupsOf, ISOLATED_ASSUMES, notFiredLine, sampleFallsShort, SHARED_ASSUMES, type ExploreResult, type Interleaving } from './result.js'
import type { SearchStrategy, StrategyFacts } from './strategy.js'

/** What the search's runs came to, as they were taken in. */
export interface Tally {
  /** Each different interleaving, by its line. */
  seen: Map<string, Interleaving>
  /** Runs of the search (this shard's), all runs made (shrinking's too), and the different violating interleavings. */
  runs: number
  allRuns: number
  violating: number
  /** Every interleaving was run: false when a search of an application race's tree reached --max runs with more left, or it was stopped. */
  complete: boolean
  /** --inject: in how many of the search's runs each fault was offered, and injected (ExploreResult.injections). */
  faults: Map<number, { fault: string; runs: number; offered: number }>
  /** Statements run, then committed, as two points; those PostgreSQL kept whole; strings run as one point; unordered locks. */
  split: Set<string>
  indivisible: Set<string>
  whole: Set<string>
  unordered: Set<string>
}

/** A search that has ended (explore/search.ts Search). */
export interface Explored {
  scenario: Scenario
  p: Plan
  o: { name?: string; databaseUrl?: string; max: number }
  expect: ExpectOverride
  facts: StrategyFacts
  strategy: SearchStrategy
  tally: Tally
  current: { it: Interleaving } | undefined
  shrinkFrom: string | undefined
  shrinkRuns: number
  /** The reduced search of declared steps passed --max runs with orders left, and a sample took over. */
  fellBack: { runs: number; reduction: ExploreResult['reduction'] } | undefined
  jobs: number
  jobsNote: string | undefined
}

export function resultOf(x: Explored, end: { targetLabel: string; server: ServerInfo; stopped: Stopped | undefined; ms: number }): ExploreResult {
  const { scenario, p, strategy: st, tally: t, current } = x
  const every = [...t.seen.values()]
  const f = st.fields()
  const diverged = st.diverged
  const code = exitOf(x, every, f.sample, end.stopped)
  const failures = every.filter((i) => i.failure)
  const injections = x.facts.faulted ? [...t.faults.values()] : undefined
  const notFired = (injections ?? []).filter((i) => i.runs === 0).map((i) => notFiredLine(i, t.runs))
  const shortest = current ? { ...current.it, ...(x.shrinkFrom && x.shrinkFrom !== current.it.line ? { shrunk: { from: x.shrinkFrom, runs: x.shrinkRuns } } : {}) } : null
  const shortestFailure = failures.reduce<Interleaving | null>((a, i) => (!a || better(i, a) ? i : a), null)
  const chosen = chosenOf(x)
  const where = replayTarget(x.o.databaseUrl)
  const replayOf = (line: string) => replayCommand(x.o.name ?? (isFileScenario(scenario) ? scenario.source.section : scenario.id), scenario, p, line, where.args)
  return {
    scenario: scenario.id,
    digest: raceDigest(scenario),
    racelab: racelabVersion(),
    n: p.variant.n,
    params: p.variant.params,
    server: end.server,
    target: end.targetLabel,
    invariant: typeof scenario.invariant.description === 'function' ? scenario.invariant.description(p.variant.params) : scenario.invariant.description,
    mode: st.mode,
    search: st.search,
    ...(f.preemptions ? { preemptions: f.preemptions } : {}),
    ...(f.reduction ? { reduction: f.reduction } : x.fellBack?.reduction ? { reduction: x.fellBack.reduction } : {}),
    ...(f.ahead ? { ahead: f.ahead } : {}),
    ...(chosen ? { chosen } : {}),
    orders: x.facts.orders.toString(),
    steps: x.facts.app ? 'discovered' : 'declared',
    ...(x.facts.app ? { sessionsRan: x.facts.isolated ? { mode: 'isolated' as const, assumes: ISOLATED_ASSUMES } : { mode: 'shared' as const, assumes: SHARED_ASSUMES } } : {}),
    complete: t.complete,
    ...(f.shard ? { shard: f.shard } : {}),
    ...(f.sample ? { sample: f.sample } : {}),
    runs: t.runs,
    interleavings: every.length,
    violating: t.violating,
    unknown: every.filter((i) => i.verdict === 'unknown' && !i.failure).length,
    failed: failures.length,
    ...(scenario.mustComplete ? { incomplete: every.filter((i) => i.incomplete).length } : {}),
    groups: groupsOf(every),
    shortest,
    replay: current ? replayOf(current.it.line) : null,
    ...((current || shortestFailure) && where.note ? { replayNote: where.note } : {}),
    shortestFailure,
    failureReplay: shortestFailure ? replayOf(shortestFailure.line) : null,
    ...(end.stopped ? { stopped: end.stopped } : {}),
    diverged,
    ...(injections ? { injections } : {}),
    ...(notFired.length ? { notFired } : {}),
    every,
    expected: x.expect ?? 'reported (no expectation: use --expect held|violated)',
    matched: code === 0,
    exitCode: code,
    ms: Math.round(end.ms),
    perSecond: t.allRuns / (end.ms / 1000),
    jobs: x.jobs,
    ...(x.jobsNote ? { jobsNote: x.jobsNote } : {}),
    autocommit: { split: [...t.split].sort(), indivisible: [...t.indivisible].sort() },
    ...(t.whole.size ? { whole: [...t.whole].sort() } : {}),
    ...(t.unordered.size ? { unordered: [...t.unordered].sort() } : {}),
  }
}

/**
 * Why the default search is what it is where the count of orders would once have decided (more orders than --max):
 * the reduced search, complete within --max runs, or past them, and a sample took over. Undefined elsewhere.
 */
function chosenOf(x: Explored): ExploreResult['chosen'] {
  const max = x.o.max
  const orders = x.facts.orders
  const shown = orders.toString()
  if (x.fellBack) {
    const size = x.strategy.fields().sample?.size
    return { search: 'sample', max, reducedRuns: x.fellBack.runs, why: `the reduced search passed --max ${max} runs with orders left (${shown} orders of the steps), so a PCT sample of ${size} runs followed; what its ${x.fellBack.runs} runs found is kept (--max N lets the reduced search run further; --exhaustive runs every order)` }
  }
  if (x.strategy.search !== 'reduced' || !x.strategy.afterMax() || orders <= BigInt(max) || !x.tally.complete) return undefined
  return { search: 'reduced', max, reducedRuns: x.tally.runs, why: `${shown} orders of the steps are more than --max ${max}, but the reduced search needed only ${x.tally.runs} runs to cover them: nothing was sampled` }
}

/** The search's exit code: what it found (a violation, a failure), else what it could not decide. */
function exitOf(x: Explored, every: readonly Interleaving[], sampled: ExploreResult['sample'], stopped: Stopped | undefined): 0 | 1 | 3 {
  const { tally: t, expect } = x
  const judged = every.map((i) => ({ verdict: i.verdict, comparison: { matched: i.verdict !== 'unknown', deviations: [], ...(i.verdict === 'unknown' ? { undecided: true } : {}) }, ...(i.failure ? { failure: i.failure } : {}) }))
  const summary = summarize(judged, [], expect)
  const incompleteRuns = every.filter((i) => i.incomplete).length
  // Every interleaving held, but some were not run as chosen, or not run at all (an application race's tree larger
  // than --max): "held in all" is not known (unknown is never a pass). A sample is no certificate
  // (sampleFallsShort): held is not known unless the user asked for a sample's evidence.
  const incomplete = ((x.strategy.diverged > 0 || !t.complete) && t.violating === 0 && expect === 'held') || sampleFallsShort(sampled, t.violating, expect)
  const failed = every.filter((i) => i.failure).length
  // A violation or a failure is a fact whatever was left undecided (explore/findings.ts); a session that did not
  // complete where every one must is a deviation even beside the violation --expect violated asked for.
  const found = incompleteRuns ? 1 : exitFromFindings(incomplete ? 3 : exitCode(summary), { expect, violating: t.violating, failed, stopped: stopped !== undefined })
  // --inject: a fault injected in no run was not explored: the search is no pass (unknown), and says which and why.
  const notFired = x.facts.faulted && [...t.faults.values()].some((i) => i.runs === 0)
  // A string of several statements run as one point: the orders between its statements were not tried (unknown).
  // A statement locking rows without waiting at SERIALIZABLE: what SSI does inside it was not ordered (unknown).
  return (notFired || t.whole.size || t.unordered.size) && found === 0 ? 3 : found
}

/** The trial's facts the result reports whatever its order: statements kept whole, or not ordered. */
export function noteFacts(t: Tally, facts: TrialFacts): void {
  for (const s of facts.sessions) for (const x of s.indivisible ?? []) t.indivisible.add(`${s.name}.${x}`)
  for (const s of facts.sessions) for (const x of s.whole ?? []) t.whole.add(`${s.name}.${x}`)
  for (const s of facts.sessions) for (const x of s.unordered ?? []) t.unordered.add(`${s.name}.${x}`)
}

/** A run taken into the search: the faults it was offered, and those injected. */
export function countFaults(t: Tally, facts: TrialFacts): void {
  for (const [i, x] of (facts.injections ?? []).entries()) {
    const f = t.faults.get(i) ?? { fault: x.fault, runs: 0, offered: 0 }
    if (x.offered) f.offered++
    if (x.at) f.runs++
    t.faults.set(i, f)
  }
}

/** What an explore run came to, kept to be taken in the search's order once every run is in (several jobs). */
export interface Record_ {
  key: number[]
  free: number[]
  fps: Touched[]
  it: Interleaving
}

/** What a run over came to, until the search takes it. */
export interface Ended {
  facts: TrialFacts
  free: number[]
  fps: Touched[]
  it: Interleaving
}
