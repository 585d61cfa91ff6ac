// The reduced search as a strategy of race explore (strategy.ts): a dynamic partial-order reduction (reduce.ts) that
// learns each step's footprint from the server as the runs go, on several jobs through ReducedJobs (reduce-jobs.ts),
// showing a violation as the simplest order of its class (switches.ts).
import type { Touched } from '../engine/footprint.js'
import { switches } from './enumerate.js'
import { conflicts, Reduced } from './reduce.js'
import { ShardReduced } from './reduce-shard.js'
import { ReducedJobs, type AheadRun } from './reduce-jobs.js'
import type { ExploreResult, Interleaving } from './result.js'
import { Sample } from './strategies.js'
import { SearchStrategy, type Handle, type StrategyAsk, type StrategyFacts } from './strategy.js'
import { fewestSwitches } from './switches.js'

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
  private readonly reduced: Reduced
  private order = 0
  /** The steps whose footprints were read, and how many of them race could not classify. */
  private steps = 0
  private unclassified = 0
  /** The simplest order of each violating run's class. */
  private readonly simplest = new Map<string, number[]>()
  /**
   * --shard i/n: this part of the search (reduce-shard.ts). It runs on one job, and stops at --max runs with runs
   * left (no sample follows: the parts would not join).
   */
  constructor(
    facts: StrategyFacts,
    private readonly ask?: StrategyAsk,
    private readonly shard?: { index: number; count: number },
  ) {
    super(facts)
    this.capped = facts.app || ask !== undefined || shard !== undefined
    this.reduced = shard ? new ShardReduced(shard, conflicts, this.sessionOf) : new Reduced(conflicts, this.sessionOf)
  }

  override oneJob(): string | undefined {
    return this.shard ? 'a part of the reduced search split by --shard runs on one job' : super.oneJob()
  }

  /** On several jobs: runs made ahead of the one-job search, taken in its order (reduce.ts ReducedJobs). */
  private jobs: ReducedJobs | undefined
  private readonly handles = new Map<AheadRun, Handle>()

  override atOnce(): number {
    // An application race's count of orders is known only after its first run.
    return this.facts.app ? Number.MAX_SAFE_INTEGER : super.atOnce()
  }

  override spread(jobs: number, max: number): void {
    if (jobs > 1 && !this.oneJob()) this.jobs = new ReducedJobs(this.reduced, this.sessionOf, this.capped ? max : Infinity, this.facts.app ? undefined : this.facts.counts)
  }

  override get inOrder(): boolean {
    return this.jobs !== undefined
  }

  override afterMax(): SearchStrategy | undefined {
    return this.ask && !this.shard ? new Sample(this.facts, this.ask) : undefined
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
      ...(this.shard && this.reduced instanceof ShardReduced ? { shard: { ...this.shard, passed: 0, reduced: this.reduced.work } } : {}),
    }
  }
}
