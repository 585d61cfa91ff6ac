// The search's strategies: how race explore walks the interleavings, each one class carrying what follows from it
// (strategy.ts), and chooseStrategy, the one pure function that picks one from the checked request and the counts.
// The enumerators themselves are in enumerate.ts and reduce.ts; a strategy hands their runs to the search
// (search.ts) as Handles. A new strategy is a class here and a line of the chooser.
import { UsageError } from '../errors.js'
import type { Touched } from '../engine/footprint.js'
import { Dfs, Preemptive, shrinkCandidates, switches } from './enumerate.js'
import { Pct } from './pct.js'
import { SplitDfs } from './split.js'
import { conflicts, Reduced } from './reduce.js'
import { ReducedJobs, type AheadRun } from './reduce-jobs.js'
import { fewestSwitches } from './switches.js'
import { DEFAULT_SAMPLE } from './request.js'
import type { ExploreResult, Interleaving } from './result.js'
import { SearchStrategy, type Handle, type StrategyAsk, type StrategyFacts, type Word } from './strategy.js'

/** Every order, depth first (enumerate.ts Dfs); with several jobs or --shard, its tree split into branches (SplitDfs). */
export class Exhaustive extends SearchStrategy {
  readonly search = 'exhaustive' as const
  protected readonly dfs = new Dfs()
  private split: SplitDfs | undefined
  private order = 0
  constructor(facts: StrategyFacts, private readonly shard?: { index: number; count: number }) {
    super(facts)
  }

  override planned(): number | null {
    return this.facts.app || this.shard ? null : Number(this.facts.orders)
  }

  override spread(jobs: number): void {
    if (!this.oneJob() && (jobs > 1 || this.shard)) this.split = new SplitDfs(this.shard)
  }

  override get deferred(): boolean {
    return this.split !== undefined
  }

  next(): Handle | undefined {
    if (this.split) {
      const r = this.split.next()
      return r && { pick: r.pick, key: [], split: r }
    }
    const pick = this.dfs.next()
    return pick && { pick, key: [this.order++] }
  }

  done(h: Handle, free: readonly number[]): void {
    if (h.split) this.split!.done(h.split, free)
    else this.dfs.done(free)
  }

  get runs(): number {
    return this.dfs.runs
  }

  get diverged(): number {
    return this.split ? this.split.diverged : this.dfs.diverged
  }

  override fields(): Partial<ExploreResult> {
    return this.split && this.shard ? { shard: { ...this.shard, passed: this.split.passed } } : {}
  }
}

/**
 * An application race's every interleaving (no --exhaustive): the tree is known only as its functions run, so the
 * search stops at --max runs and says when interleavings were left.
 */
export class AppInterleavings extends Exhaustive {
  override readonly capped = true

  override left(): boolean {
    return this.dfs.next() !== undefined
  }
}

/**
 * One order of each class of orders that differ only by swapping steps that touch nothing in common (reduce.ts). As
 * the default search (not asked for by --reduce) it stops at --max runs with orders left, and a PCT sample takes over
 * (`ask`: the sample's): it is the runs the reduced search needs, not the count of orders, that decides. On several
 * jobs (spread), the other jobs run ahead of it and it takes their runs in its own order (ReducedJobs): the runs,
 * groups and shortest are one job's, and `ahead` says the runs made and those not needed.
 */
export class ReducedSearch extends SearchStrategy {
  readonly search = 'reduced' as const
  override readonly learns = true
  override readonly capped: boolean
  /** A choice beyond the sessions is a session's query with an injected fault (--inject): a step of session choice % n. */
  private readonly sessionOf = (x: number) => x % this.facts.sessions
  private readonly reduced = new Reduced(conflicts, this.sessionOf)
  private order = 0
  /** The steps whose footprints were read, and how many of them race could not classify. */
  private steps = 0
  private unclassified = 0
  /** The simplest order of each violating run's class. */
  private readonly simplest = new Map<string, number[]>()
  constructor(
    facts: StrategyFacts,
    private readonly ask?: StrategyAsk,
  ) {
    super(facts)
    this.capped = facts.app || ask !== undefined
  }

  /** On several jobs: runs made ahead of the one-job search, taken in its order (reduce.ts ReducedJobs). */
  private jobs: ReducedJobs | undefined
  private readonly handles = new Map<AheadRun, Handle>()

  override atOnce(): number {
    // An application race's count of orders is known only after its first run.
    return this.facts.app ? Number.MAX_SAFE_INTEGER : super.atOnce()
  }

  override spread(jobs: number, max: number): void {
    if (jobs > 1 && !this.oneJob()) this.jobs = new ReducedJobs(this.reduced, this.sessionOf, this.capped ? max : Infinity)
  }

  override get inOrder(): boolean {
    return this.jobs !== undefined
  }

  override afterMax(): SearchStrategy | undefined {
    return this.ask && new Sample(this.facts, this.ask)
  }

  next(): Handle | undefined {
    if (this.jobs) {
      const r = this.jobs.next()
      if (!r) return undefined
      const h: Handle = { pick: r.pick, key: [], ahead: r, from: this }
      this.handles.set(r, h)
      return h
    }
    const pick = this.reduced.next()
    return pick && { pick, key: [this.order++] }
  }

  done(h: Handle, free: readonly number[], fps: readonly Touched[]): void {
    if (h.ahead && this.jobs) {
      this.jobs.done(h.ahead, free, fps)
      return
    }
    this.count(fps)
    this.reduced.done(free, fps)
  }

  override taken(h: Handle): Handle[] {
    if (!h.ahead || !this.jobs) return [h]
    return this.jobs.takenSince().map((r) => {
      const t = this.handles.get(r)!
      this.handles.delete(r)
      this.count((r.fps ?? []).filter((x): x is Touched => x !== undefined))
      t.key = [this.order++]
      return t
    })
  }

  override dropped(h: Handle): void {
    if (h.ahead && this.jobs) {
      this.jobs.drop(h.ahead)
      this.handles.delete(h.ahead)
    }
  }

  /** The steps of a run taken into the search whose footprints were read, and those race could not classify. */
  private count(fps: readonly Touched[]): void {
    for (const fp of fps) {
      this.steps++
      if (fp === 'all') this.unclassified++
    }
  }

  get runs(): number {
    return this.reduced.runs
  }

  get diverged(): number {
    return this.reduced.diverged
  }

  override left(): boolean {
    return this.jobs ? this.jobs.left : this.reduced.next() !== undefined
  }

  override step(fp: Touched, h?: Handle): void {
    if (h?.ahead) h.ahead.step(fp)
    else this.reduced.step(fp)
  }

  override violated(free: readonly number[], fps: readonly Touched[]): void {
    const c = fewestSwitches(free, fps, conflicts, undefined, this.sessionOf)
    if (c) this.simplest.set(c.join(','), c)
  }

  /**
   * The reduced search ran one order of each class: the simplest order of each violating class (fewest switches)
   * ends as its class's run did; the fewest among them is run once, to confirm it, as shown.
   */
  override shrinkFrom(current: { free: number[]; it: Interleaving }): number[][] {
    return [...this.simplest.values()].filter((c) => switches(c) < current.it.switches).sort((a, b) => switches(a) - switches(b))
  }

  /** Its candidates come fewest switches first: the first that violates is the shortest. */
  override shrinkAgain(): number[][] {
    return []
  }

  override fields(): Partial<ExploreResult> {
    const j = this.jobs
    return {
      reduction: { steps: this.steps, unclassified: this.unclassified, redundant: this.reduced.redundant, retried: this.reduced.retried },
      ...(j ? { ahead: { made: j.made, wasted: j.made - j.runs } } : {}),
    }
  }
}

/** --preemptions K: every order with at most K preemptions, fewest first (enumerate.ts Preemptive). */
export class PreemptionBounded extends SearchStrategy {
  readonly search = 'preemptions' as const
  private readonly bounded: Preemptive
  private order = 0
  constructor(facts: StrategyFacts, bound: number) {
    super(facts)
    this.bounded = new Preemptive(bound)
  }

  override oneJob(): string {
    return super.oneJob() ?? 'a preemption-bounded search runs on one job'
  }

  next(): Handle | undefined {
    const pick = this.bounded.next()
    return pick && { pick, key: [this.order++] }
  }

  done(_h: Handle, free: readonly number[]): void {
    this.bounded.done(free)
  }

  get runs(): number {
    return this.bounded.runs
  }

  get diverged(): number {
    return this.bounded.diverged
  }

  override fields(): Partial<ExploreResult> {
    const b = this.bounded
    return { preemptions: { bound: b.bound, reached: b.reached, complete: b.left === 0 } }
  }
}

/** A seeded PCT sample (enumerate.ts Pct): its runs state a least probability of finding a violation of depth --depth. */
export class Sample extends SearchStrategy {
  readonly search = 'sample' as const
  private readonly pct: Pct
  /** This search's draws: all of the sample's, or this shard's part. */
  private readonly drawn: number
  constructor(
    facts: StrategyFacts,
    private readonly ask: StrategyAsk,
  ) {
    super(facts)
    const size = ask.sample ?? DEFAULT_SAMPLE
    this.pct = new Pct(size, ask.seed, ask.depth, facts.sessions, facts.app ? undefined : facts.counts.reduce((a, b) => a + b, 0), ask.shard)
    this.drawn = ask.shard ? Math.ceil((size - (ask.shard.index - 1)) / ask.shard.count) : size
  }

  override get mode(): ExploreResult['mode'] {
    return 'sample'
  }

  override atOnce(): number {
    return this.drawn
  }

  override planned(): number {
    return this.drawn
  }

  /** Each draw's choices depend only on the seed and the draw's number: several may run at once. */
  next(jobs: number): Handle | undefined {
    if (jobs > 1) {
      const d = this.pct.nextDraw()
      return d && { pick: d.pick, key: [d.draw], k: d.k }
    }
    const pick = this.pct.next()
    return pick && { pick, key: [] }
  }

  done(h: Handle, free: readonly number[]): void {
    if (h.k !== undefined) this.pct.done(free, h.k)
    else this.pct.done(free)
  }

  get runs(): number {
    return this.pct.runs
  }

  get diverged(): number {
    return 0
  }

  override shrinkFrom(current: { free: number[]; it: Interleaving }): number[][] {
    return shrinkCandidates(current.free)
  }

  override fields(): Partial<ExploreResult> {
    const c = this.pct.coverage()
    const a = this.ask
    return {
      sample: {
        size: this.pct.size,
        seed: this.pct.seed,
        depth: c.depth,
        steps: c.k,
        counted: c.runs,
        probability: c.probability,
        ...(a.shard ? { shard: a.shard } : {}),
        ...(this.facts.faulted ? { faults: 'drawn' as const } : {}),
        ...(a.acceptSample !== undefined ? { accept: a.acceptSample } : {}),
      },
    }
  }
}

/**
 * The strategy for a request and what is known of the race: a sample when asked for (--sample); --preemptions;
 * --exhaustive; a sample of declared steps with more orders than --max split by --shard (the reduced search is not
 * split); else the reduced search, whatever the count of orders (an application race's only when its sessions run
 * isolated or with --reduce; an injected fault is one more choice of its session, searched like its next query): of
 * declared steps, it is sampled only once its own runs pass --max (ReducedSearch.afterMax); else an application race's every interleaving, or a sample once
 * its first run counted more orders than --max. Bad combinations are a UsageError naming the options as `word` spells
 * them.
 */
export function chooseStrategy(a: StrategyAsk, f: StrategyFacts, word: Word): SearchStrategy {
  const s = pick(a, f)
  if (a.shard && s.mode !== 'sample' && !a.exhaustive) throw new UsageError(`${word('shard')} splits a sample or an exhaustive search over several runs of race explore: give ${word('sample') === 'sample' ? 'sample' : '--sample K'} or ${word('exhaustive')} too (the reduced search is not split: ${word('shard') === 'shard' ? 'jobs' : '--jobs'} runs it on several cores)`)
  if (a.shard && s.mode === 'sample' && !a.seeded) throw new UsageError(`${word('shard')} needs ${word('seed')}: every part of a sample draws from the same seed`)
  return s
}

function pick(a: StrategyAsk, f: StrategyFacts): SearchStrategy {
  if (a.sample !== undefined) return new Sample(f, a)
  if (a.preemptions !== undefined) return new PreemptionBounded(f, a.preemptions)
  if (a.exhaustive) return new Exhaustive(f, a.shard)
  if (a.shard && !f.app && f.orders > BigInt(a.max)) return new Sample(f, a)
  // The reduced search of declared steps falls back to a sample past --max runs; an application race's (whose tree is
  // learned as it runs) stops there and says so. An injected fault (--inject) is a choice of its session like its
  // next query (Reduced's sessionOf).
  if (!f.app || a.reduce || f.isolated) return new ReducedSearch(f, f.app ? undefined : a)
  if (f.orders > BigInt(a.max)) return new Sample(f, a)
  return new AppInterleavings(f, a.shard)
}
