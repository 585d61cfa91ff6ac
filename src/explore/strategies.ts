// The search's strategies: how race explore walks the interleavings, each one class carrying what follows from it
// (strategy.ts); the reduced search's is in reduced-search.ts, and choose.ts picks one from the checked request and
// the counts. The enumerators themselves are in enumerate.ts and reduce.ts; a strategy hands their runs to the search
// (search.ts) as Handles. A new strategy is a class and a line of the chooser.
import { Dfs, Preemptive, shrinkCandidates } from './enumerate.js'
import { Pct } from './pct.js'
import { SplitDfs } from './split.js'
import { DEFAULT_SAMPLE } from './request.js'
import type { ExploreResult, Interleaving } from './result.js'
import { SearchStrategy, type Handle, type StrategyAsk, type StrategyFacts } from './strategy.js'

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
