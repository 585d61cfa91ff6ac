// What a strategy of race explore's search is (strategies.ts has them): the runs it hands out (Handle), what it is
// chosen from (the checked request and what is known of the race), and what each strategy carries with it: whether
// its runs may go over several jobs, what it plans to run, what "diverged" means for it, whether it stops at --max,
// how it shrinks a violation, and the fields it adds to the result.
import type { Touched } from '../engine/footprint.js'
import { shrinkCandidates, type Pick } from './enumerate.js'
import type { AheadRun } from './reduce-jobs.js'
import type { SplitRun } from './split.js'
import type { ExploreResult, Interleaving } from './result.js'

/** A run of the search, handed to a job: its choices, its key (runs sorted by key are the one-job search's order). */
export interface Handle {
  pick: Pick
  key: number[]
  split?: SplitRun
  /** A sample's draw: the step count its change points were drawn over. */
  k?: number
  /** A run of the reduced search on several jobs (reduce.ts ReducedJobs), and the strategy that handed it out. */
  ahead?: AheadRun
  from?: SearchStrategy
}

/** What the search was asked that decides its strategy (explore/request.ts ExploreChecked, the seed drawn). */
export interface StrategyAsk {
  exhaustive?: boolean
  reduce?: boolean
  sample?: number
  preemptions?: number
  max: number
  /** The sample's seed: given, or the one drawn for this search. */
  seed: number
  /** Whether the seed was given (a shard of a sample needs one). */
  seeded: boolean
  depth: number
  shard?: { index: number; count: number }
  acceptSample?: number
}

/** What the search knows of the race: its kind, and the count of orders of its steps (an application race's, once its first run said). */
export interface StrategyFacts {
  /** An application race: its steps are discovered as its functions run. */
  app: boolean
  /** --inject: faults offered as more choices of their session (the reduced search takes each as a step of it). */
  faulted: boolean
  /**
   * An application race whose sessions each run in a worker thread of their own (app/isolated.ts), sharing nothing
   * but the database: reduced by default, as a spec's steps are.
   */
  isolated?: boolean
  sessions: number
  /** Each session's points that are choices (declared steps); none for an application race. */
  counts: readonly number[]
  /** The orders of the steps; an application race's are 0 until its first run counted them. */
  orders: bigint
}

/** How an option is named in errors: --shard from the CLI, shard from explore(). */
export type Word = (x: 'shard' | 'sample' | 'exhaustive' | 'seed') => string

const APP_ONE_JOB = 'an application race runs on one job'
/** An application race whose sessions share one process: its every interleaving, or its reduced search by --reduce. */
const SHARED_APP_ONE_JOB = "an application race whose sessions share one process (sharedState, or a race object) runs on one job: only the reduced search of one loaded from its file, each session in a worker of its own, runs on several"

/** One way of searching; see the module comment. */
export abstract class SearchStrategy {
  abstract readonly search: ExploreResult['search']
  /** The footprint of each step is read from the server (the reduced search learns from them). */
  readonly learns: boolean = false
  /** An application race's search of its tree stops at --max runs (its first run promised fewer than it may hold). */
  readonly capped: boolean = false
  constructor(protected readonly facts: StrategyFacts) {}

  get mode(): ExploreResult['mode'] {
    return 'all'
  }

  /** Why it runs on one job whatever --jobs asks (undefined: any number of jobs gives the same result). */
  oneJob(): string | undefined {
    if (!this.facts.app) return undefined
    // The reduced search of isolated sessions (each in a worker of its own, in every job its own workers and schema):
    // its runs are taken in the one-job order (reduce-jobs.ts), so the jobs give one job's result.
    if (this.facts.isolated && this.learns) return undefined
    return this.facts.isolated ? APP_ONE_JOB : SHARED_APP_ONE_JOB
  }

  /** The most runs that can go at once (jobs are no more than these). */
  atOnce(): number {
    return Number(this.facts.orders)
  }

  /** Runs planned (progress): exactly for a sample, at most for a search of declared steps; null when not known before. */
  planned(): number | null {
    return null
  }

  /**
   * The jobs are known: a strategy that spreads its runs over them gets ready (exhaustive: its tree split; the
   * reduced search: runs made ahead, taken at most `max` when it is capped).
   */
  spread(_jobs: number, _max: number): void {}

  /** The runs' results must be taken in the search's order once all are in (several jobs, or a split tree). */
  get deferred(): boolean {
    return false
  }

  /**
   * Runs over on several jobs taken into the search in its own order (reduced: runs made ahead), so none is kept to
   * be sorted at the end.
   */
  get inOrder(): boolean {
    return false
  }

  /**
   * The runs that `h`, just over (done), lets the search take, in the search's order: `h` itself for every strategy
   * but the reduced search on several jobs, whose runs are taken when the one-job search reaches them (and a run made
   * ahead that it never reaches is wasted).
   */
  taken(h: Handle): Handle[] {
    return [h]
  }

  /** A run handed out ended with no order (none of its steps launched): it is not waited for. */
  dropped(_h: Handle): void {}

  /** The next run to hand out, or undefined when none is waiting. */
  abstract next(jobs: number): Handle | undefined
  /** The run handed out as `h` is over: the free choices it made and their footprints. */
  abstract done(h: Handle, free: readonly number[], fps: readonly Touched[]): void
  /** Runs made (a capped search compares it with --max). */
  abstract get runs(): number
  /** Runs whose replayed choices went otherwise than before (the database did something else that time). */
  abstract get diverged(): number

  /** A capped search that stopped: whether runs were left. */
  left(): boolean {
    return false
  }

  /**
   * A capped search that reached --max runs with runs left: the strategy that takes over (the default reduced
   * search: a sample), or undefined (the search stops there and says so).
   */
  afterMax(): SearchStrategy | undefined {
    return undefined
  }

  /** A step's footprint, as the run `h` goes (only when it learns). */
  step(_fp: Touched, _h?: Handle): void {}

  /** A violating run of the search (its free choices and their footprints). */
  violated(_free: readonly number[], _fps: readonly Touched[]): void {}

  /** The search is over with a violation: the orders to try, simplest first, to shrink it; undefined: no shrinking. */
  shrinkFrom(_current: { free: number[]; it: Interleaving }): number[][] | undefined {
    return undefined
  }

  /** While shrinking, a run violated with fewer switches: the candidates from it. */
  shrinkAgain(free: readonly number[]): number[][] {
    return shrinkCandidates(free)
  }

  /** This strategy's fields of the result. */
  fields(): Partial<ExploreResult> {
    return {}
  }
}
