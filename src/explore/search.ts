// race explore's search: every interleaving of a scenario's sessions (or a seeded sample of them), each run from a
// fresh state through the engine's own trials and judged by the scenario's invariant, then the shortest violation
// shrunk. One Search owns all its state: the strategy (strategies.ts) that says which run comes next, the jobs the
// runs are handed to (jobs.ts), and what the runs came to; outcome.ts makes its result.
//
// The engine runs the trials (engine/run.ts: the schema made again and the setup run before each, the sessions'
// connections kept and reset); each trial's order is chosen while it runs (engine/schedule.ts runChosen) by the
// trial's chooser (trial.ts).
import { performance } from 'node:perf_hooks'
import type { Driver } from '../db/driver.js'
import { FootprintObserver } from '../engine/footprint-observer.js'
import type { Touched } from '../engine/footprint.js'
import type { Chooser, TrialFacts } from '../engine/types.js'
import type { RunContext } from '../lifecycle.js'
import type { Entry } from '../permutation.js'
import type { Plan } from '../plan.js'
import type { Scenario } from '../scenario.js'
import type { ExpectOverride } from '../judge/index.js'
import { declaredCodes, judgeTrial } from '../run/judge.js'
import type { Bounds } from '../run/params.js'
import { compareKeys, follow, ordersOf, switches } from './enumerate.js'
import { Handout, jobFootprint, runJobs, type Job, type JobHost } from './jobs.js'
import { countFaults, noteFacts, resultOf, type Ended, type Record_, type Tally } from './outcome.js'
import { DEFAULT_DEPTH, type ExploreOptions } from './request.js'
import { better, interleavingOf, type ExploreResult, type Interleaving } from './result.js'
import { documentedAll, expectationOf, searchFacts, sharesState } from './steps.js'
import { chooseStrategy } from './choose.js'
import type { Handle, SearchStrategy, StrategyAsk, StrategyFacts, Word } from './strategy.js'
import { trialChooser, type TrialShape } from './trial.js'
import type { Words } from '../engine/refusals.js'

/** What the search is given: explore()'s options, checked (explore/request.ts), and how the caller words them. */
export type SearchOptions = ExploreOptions & { max: number; shrink: number; word?: Words; keepOnStop?: boolean }

const SHARED_ONE_JOB = "a step touches what the whole database shares (advisory keys, pg_locks, pg_stat_activity, settings), where other jobs' trials would meet it: the search runs on one job"

export class Search implements JobHost {
  readonly shape: TrialShape
  readonly ask: StrategyAsk
  readonly facts: StrategyFacts
  strategy: SearchStrategy
  readonly tally: Tally = { seen: new Map(), runs: 0, allRuns: 0, violating: 0, complete: true, faults: new Map(), split: new Set(), indivisible: new Set(), whole: new Set(), unordered: new Set() }
  jobs = 1
  jobsNote: string | undefined
  private planned: number | null = null
  /** The application race's first run: its queries give `orders` (what the report compares the runs with). */
  private probing: boolean
  /** Runs made but not part of the search (an application race's first run, when a sample replaces the search). */
  private discarded = 0
  private phase: 'explore' | 'shrink' = 'explore'
  /** Explore runs of several jobs, taken in the search's order once all are in; the violating lines seen meanwhile. */
  private readonly records: Record_[] = []
  /** Runs over and not yet taken into the search (the reduced search on several jobs takes them in its order). */
  private readonly ended = new Map<Handle, Ended>()
  private readonly pending = new Set<string>()
  /** Shrinking: the current violating interleaving (free choices), and the candidates left to try. */
  current: { free: number[]; it: Interleaving } | undefined
  private candidates: number[][] = []
  shrinkRuns = 0
  shrinkFrom: string | undefined
  /** The reduced search of declared steps passed --max runs with orders left, and a sample took over: the runs it had made. */
  fellBack: { runs: number; reduction: ExploreResult['reduction'] } | undefined
  private readonly handout: Handout<Handle>
  private readonly word: Word
  /** What the search judges by: the expectation, the outcomes the scenario documents, the SQLSTATEs they and its retry loops declare. */
  readonly expect: ExpectOverride
  private readonly declared: ReturnType<typeof documentedAll>
  private readonly expectedCodes: ReadonlySet<string>

  constructor(
    readonly ctx: RunContext,
    readonly lab: Driver,
    readonly scenario: Scenario,
    readonly p: Plan,
    readonly o: SearchOptions,
    readonly bounds: Bounds,
  ) {
    this.word = (x) => (o.word ? `--${x}` : x)
    this.expect = expectationOf(scenario, p, o.expect)
    // The SQLSTATEs the scenario documents (a unique index's 23505) prevent, as in race run: judged by them, never compared.
    this.declared = documentedAll(scenario, p)
    // The same codes, and those a session's retry loop catches: what the code failing is told apart from (judge/failure.ts).
    this.expectedCodes = declaredCodes(this.declared, p)
    this.facts = searchFacts(scenario, p)
    const { app, counts } = this.facts
    this.shape = { scenario, p, app, counts }
    this.probing = app
    this.ask = { ...o, max: o.max, seed: o.seed ?? Math.floor(Math.random() * 2 ** 31), seeded: o.seed !== undefined, depth: o.depth ?? DEFAULT_DEPTH }
    this.strategy = chooseStrategy(this.ask, this.facts, this.word)
    // The search's runs, handed out to the jobs (one job: each run chosen after the one before it ran).
    this.handout = new Handout<Handle>(() => this.strategy.next(this.jobs))
  }

  /** --jobs: several runs at once, each job its own schema and connections, where the strategy's result is the same with any number. */
  private async sizeJobs(): Promise<void> {
    const one = this.strategy.oneJob()
    const shared = !one && sharesState(this.scenario, this.p) ? SHARED_ONE_JOB : undefined
    const asked = this.o.jobs ?? 1
    this.jobs = one || shared ? 1 : Math.max(1, Math.min(asked, this.strategy.atOnce()))
    // Said when more jobs were asked for than such a search runs on (with --jobs 1 the result is as it always was).
    this.jobsNote = asked > 1 ? (one ?? shared) : undefined
    if (this.jobs > 1) {
      // Each job takes a control connection and the sessions' own: no more than the server has room for.
      const room = await this.lab.room()
      this.jobs = Math.max(1, Math.min(this.jobs, Math.floor(room.free / (this.p.sessions.length + 1))))
    }
    this.strategy.spread(this.jobs, this.o.max)
    this.shape.jobs = this.jobs
    this.planned = this.strategy.planned()
  }

  async run(targetLabel: string): Promise<ExploreResult> {
    await this.sizeJobs()
    const started = performance.now()
    const { out, stopped } = await runJobs(this)
    const ms = performance.now() - started
    if (stopped) {
      // The runs of several jobs that ended before the stop, taken in the search's order; the search is not complete.
      this.takeRecords()
      this.tally.complete = false
    }
    return resultOf(this, { targetLabel, server: out?.server ?? this.lab.server, stopped, ms })
  }

  /** The chooser of a job's next trial: an explore run, a shrinking run, or none (the job is done). */
  async choose(job: Job): Promise<Chooser | undefined> {
    // A run the engine reported no order for (none of its steps launched) is over all the same.
    if (job.run) {
      if (job.run.from === this.strategy) this.strategy.dropped(job.run)
      job.run = undefined
      this.handout.finish()
    }
    if (this.phase === 'explore') {
      // An application race's tree may be larger than its first run's orders said: stop at --max runs, and say
      // when interleavings were left (a search of declared steps ends by itself within the orders it counted).
      // The reduced search of declared steps past --max runs with orders left: a sample takes over (the runs made stay found).
      for (;;) {
        if (this.strategy.capped && this.strategy.runs >= this.o.max && this.strategy.left()) this.fallBack()
        const capped = this.strategy.capped
        const got = capped && this.strategy.runs >= this.o.max ? undefined : await this.handout.take()
        if (got) {
          job.run = got
          return this.chooserOf(got.pick, this.strategy.learns, job)
        }
        // Runs of other jobs that ended while this one waited brought the reduced search to --max: a sample takes over.
        if (!(this.strategy.capped && this.strategy.runs >= this.o.max && this.strategy.left() && this.strategy.afterMax())) break
      }
      const capped = this.strategy.capped
      // The search is over: the first job shrinks (alone), once every other job's last run is in.
      if (job.index > 0 || this.handout.stopped) return undefined
      await this.handout.idle()
      if (this.handout.stopped) return undefined
      if (capped && this.strategy.left()) this.tally.complete = false
      this.takeRecords()
      this.pending.clear()
      this.phase = 'shrink'
      const from = this.current && this.o.shrink ? this.strategy.shrinkFrom(this.current) : undefined
      if (!from) return undefined
      this.shrinkFrom = this.current!.it.line
      this.candidates = from
    }
    return this.nextShrink(job)
  }

  /** A trial of a job ended with its launch order `ran` (job.last: its facts and judgement). */
  onOrder(job: Job, ran: Entry[]): void {
    const { facts, trial } = job.last!
    noteFacts(this.tally, facts)
    const free = job.free
    this.tally.allRuns++
    if (this.probing && this.probe(ran)) return
    const it = interleavingOf(this.p, ran, facts, trial, switches(free), this.expectedCodes)
    for (const tok of it.line.split(' ')) if (tok.endsWith(':commit')) this.tally.split.add(tok.slice(0, -':commit'.length))
    if (this.phase === 'explore') this.explored(job, facts, it)
    else if (it.held === false && this.current && better(it, this.current.it)) {
      // A shorter violation: shrink from it.
      this.current = { free: [...free], it }
      this.candidates = this.strategy.shrinkAgain(free)
    }
    const sample = this.strategy.mode === 'sample'
    this.o.onProgress?.({ runs: this.tally.allRuns - this.discarded, violating: this.tally.violating + this.pending.size, planned: this.phase === 'explore' ? this.planned : null, exact: sample, phase: this.phase })
  }

  /**
   * An application race's first run: the orders of its queries. Too many to run them all: a seeded sample instead,
   * as for declared steps, and this first run is not one of its draws (true).
   */
  private probe(ran: Entry[]): boolean {
    this.probing = false
    const orders = ordersOf(this.p.sessions.map((_, i) => ran.filter((e) => e.session === i).length))
    this.facts.orders = orders
    const next = chooseStrategy(this.ask, this.facts, this.word)
    if (next.mode !== 'sample' || this.strategy.mode === 'sample') return false
    this.strategy = next
    this.planned = next.planned()
    this.discarded++
    this.handout.finish()
    return true
  }

  /**
   * The reduced search reached --max runs with orders left, and the strategy it names (a sample) takes over: what
   * it had found stays in the result, said as `chosen`. Runs the reduced search made ahead on other jobs, still
   * going, are wasted (explored drops them).
   */
  private fallBack(): void {
    const from = this.strategy
    const next = from.afterMax()
    if (!next) return
    this.fellBack = { runs: this.tally.runs, reduction: from.fields().reduction }
    this.strategy = next
    const planned = next.planned()
    this.planned = planned === null ? null : this.tally.allRuns - this.discarded + planned
  }

  /** An explore run is over: the strategy told, and the run counted (or kept for the search's order). */
  private explored(job: Job, facts: TrialFacts, it: Interleaving): void {
    const free = job.free
    const h = job.run!
    job.run = undefined
    if (process.env.RACE_DEBUG_FPS) console.error(JSON.stringify(free), JSON.stringify(job.fps))
    // A run the reduced search made ahead, over after a sample took over from it: not the sample's.
    if (h.from && h.from !== this.strategy) {
      this.handout.finish()
      return
    }
    this.strategy.done(h, free, job.fps)
    this.ended.set(h, { facts, free: [...free], fps: [...job.fps], it })
    // The runs the search takes now, in its order (the reduced search on several jobs: those the one-job search has reached).
    for (const t of this.strategy.taken(h)) {
      const e = this.ended.get(t)!
      this.ended.delete(t)
      this.count(t, e)
    }
    this.handout.finish()
  }

  /** A run taken into the search: counted, and absorbed now or kept for the search's order. */
  private count(h: Handle, e: Ended): void {
    // A run made only to reach this shard's part of the tree: another shard reports it.
    if (h.split && !h.split.report) return
    this.tally.runs++
    countFaults(this.tally, e.facts)
    const r = { key: h.split ? [...e.free] : h.key, free: e.free, fps: e.fps, it: e.it }
    if ((this.jobs > 1 && !this.strategy.inOrder) || this.strategy.deferred) {
      this.records.push(r)
      if (e.it.held === false) this.pending.add(e.it.line)
    } else this.absorb(r)
  }

  /** An explore run taken into the result: runs of several jobs in the search's order, once all are in. */
  private absorb(r: Record_): void {
    const it = r.it
    const had = this.tally.seen.get(it.line)
    if (had) had.runs++
    else {
      this.tally.seen.set(it.line, it)
      if (it.held === false) this.tally.violating++
    }
    if (it.held === false && (!this.current || better(it, this.current.it))) this.current = { free: r.free, it }
    if (it.held === false) this.strategy.violated(r.free, r.fps)
  }

  private takeRecords(): void {
    this.records.sort((a, b) => compareKeys(a.key, b.key)).forEach((r) => this.absorb(r))
    this.records.length = 0
  }

  private nextShrink(job: Job): Chooser | undefined {
    if (!this.current || this.shrinkRuns >= this.o.shrink) return undefined
    const c = this.candidates.shift()
    if (!c) return undefined
    this.shrinkRuns++
    return this.chooserOf(follow(c), false, job)
  }

  private chooserOf(pick: Handle['pick'], learn: boolean, job: Job): Chooser {
    const free: number[] = (job.free = [])
    const fps: Touched[] = (job.fps = [])
    const names = this.p.sessions.map((s) => s.name)
    const observer = learn
      ? new FootprintObserver(job.lab, names, (seen) => {
          // Named alike whatever namespace the trial ran in: another job's, or this job's other lane (engine/run.ts).
          const fp = jobFootprint(this.scenario.id, seen)
          fps.push(fp)
          this.strategy.step(fp, job.run)
          this.handout.nudge()
        })
      : undefined
    return trialChooser(this.shape, pick, observer, free, fps)
  }

  /** A trial ended: its facts judged as race run judges them. */
  onTrial(job: Job, facts: TrialFacts): void {
    job.last = { facts, trial: judgeTrial(facts, this.declared, this.p) }
  }

  /** Stops handing out runs (an error in a job, Ctrl-C): every job ends at its next choice. */
  stop(): void {
    this.handout.stop()
  }
}
