// The reduced search on several jobs (race explore --jobs N), with the one-job search's result: see ReducedJobs.
// Pure and tested by itself (test/pure/reduce-jobs.test.ts).
import type { Pick } from './enumerate.js'
import { Reduced, type Footprint } from './reduce.js'

/** A run of the reduced search handed to one of several jobs (ReducedJobs): what it replays, and what it saw. */
export interface AheadRun {
  pick: Pick
  /** The choices it replays before choosing afresh. */
  prefix: readonly number[]
  /** Its search's state where it starts choosing (Reduced.startState). */
  start: string
  /** The search's own next run (made from its state), not a guess ahead of it. */
  own: boolean
  /** Feeds its copy of the search each footprint, as the run goes. */
  step(fp: Footprint | undefined): void
  /** As it ran: the ready choices at each choice, and how many footprints were known then; the footprints so far. */
  readies: number[][]
  known: number[]
  seen: (Footprint | undefined)[]
  /** Once over: what it launched, and the footprints. */
  launched?: readonly number[]
  fps?: readonly (Footprint | undefined)[]
}

/** How many of the search's next runs (in flight or over) a job with nothing else to run looks past (ReducedJobs.speculate). */
const SPECULATE = 4

/**
 * The reduced search on several jobs, with the one-job search's result (issue 41, item 5). The one-job search
 * (`main`, a Reduced) is the only judge of what runs: its runs are taken in its own order, each as if it had run
 * there. While its next run goes on one job, the other jobs run ahead: the runs waiting further on (its frontier),
 * each from a copy of the search as it would stand then, with the footprints of the steps tried before it guessed
 * from the runs seen. A run over is taken (folded into `main`) when it is `main`'s next: its recorded ready choices
 * and footprints, replayed through `main`'s own choosing, make the choices it made. A run ahead that does not (a run
 * in between added a choice before it, or a guess was wrong) was wasted work, never a different answer: `main`'s next
 * run is then handed out as itself. Which runs are taken depends only on what the runs did, not on when they ended.
 *
 * `limit`: runs taken at most (a capped search's --max).
 */
export class ReducedJobs {
  /** Runs handed out and not over; runs over and not taken yet. */
  private readonly flying: AheadRun[] = []
  private readonly over: AheadRun[] = []
  /** Runs taken, in the one-job order, since takenSince() last gave them. */
  private fresh: AheadRun[] = []
  /** Runs made in all (taken or not). */
  made = 0
  /** Footprints seen: of the step that a prefix of choices ends with, and of a session's k-th step (a guess). */
  private readonly seenAt = new Map<string, Footprint>()
  private readonly seenStep = new Map<string, Footprint>()
  /** The ready choices seen after a prefix of choices (and after the same choices in any order), and where runs ended. */
  private readonly readySeen = new Map<string, readonly number[]>()
  private readonly readyBag = new Map<string, readonly number[]>()
  private readonly endAt = new Set<string>()
  private readonly endBag = new Set<string>()
  private longest = 0
  private readonly steps: number
  constructor(
    readonly main: Reduced,
    private readonly sessionOf: (choice: number) => number = (x) => x,
    private readonly limit = Infinity,
    private readonly counts?: readonly number[],
  ) {
    this.steps = counts?.reduce((a, b) => a + b, 0) ?? 0
  }

  /** Runs taken (the one-job search's runs). */
  get runs(): number {
    return this.main.runs
  }

  /** Runs made that the one-job search did not need (so far: with runs in flight or over, some may still be taken; none once it is finished). */
  get wasted(): number {
    return this.made - this.main.runs - this.flying.length - (this.left ? this.over.length : 0)
  }

  /** Whether the search has runs left (past `limit`: stopped there). */
  get left(): boolean {
    return !this.main.finished
  }

  /**
   * The next run to hand out: `main`'s next if no job runs it already, else the first waiting run after it; with
   * none waiting, a run further on (speculate). Undefined: none now.
   */
  next(): AheadRun | undefined {
    if (this.main.finished || this.main.runs >= this.limit) return undefined
    return this.handFrom(this.main, true) ?? this.speculate()
  }

  /** From a state of the search (`main`, or one ahead of it): its next run if no job has it, else the first run of its frontier no job has. */
  private handFrom(s: Reduced, own: boolean): AheadRun | undefined {
    const prefix = s.replays
    const start = s.startState()
    const same = (r: AheadRun) => sameList(r.prefix, prefix) && r.start === start
    // A run over with the same choices but another start (made from a guess that was wrong) is not this one.
    if (!this.flying.some(same) && !this.over.some(same)) return this.hand(s.copy(), own)
    const taken = (p: readonly number[]) => this.flying.some((r) => sameList(r.prefix, p)) || this.over.some((r) => sameList(r.prefix, p))
    const frontier = s.frontier()
    // The next run's own choice at its node is tried before the others waiting there.
    const next = { depth: prefix.length - 1, choice: prefix[prefix.length - 1], prefix: [...prefix] }
    for (const f of frontier) {
      if (taken(f.prefix)) continue
      // The sessions a node tries before this one (in its ready order), as if tried, with their steps' footprints guessed.
      const ready = s.readyAt(f.depth)
      const before = [next, ...frontier]
        .filter((g) => g.depth === f.depth && ready.indexOf(g.choice) < ready.indexOf(f.choice))
        .map((g) => [g.choice, this.guess(g.prefix)] as const)
      return this.hand(s.aheadAt(f.depth, f.choice, before), false)
    }
    return undefined
  }

  /**
   * Every run `main` can see is handed out already (its next is in flight, its frontier taken): the search as it
   * would stand after its next runs, each taken as it ran (a run over) or as guessed (a run in flight: what it has
   * shown so far, then the ready choices and footprints seen at the same choices before; predictInto), and a run from
   * there no job has. Up to SPECULATE runs
   * on. A guess only decides what is made ahead: what is taken is still checked run by run (fold), so a wrong guess
   * is wasted work, never a different answer.
   */
  private speculate(): AheadRun | undefined {
    let s = this.main
    for (let k = 0; k < SPECULATE; k++) {
      const prefix = s.replays
      const start = s.startState()
      const r = this.over.find((x) => sameList(x.prefix, prefix) && x.start === start) ?? this.flying.find((x) => sameList(x.prefix, prefix) && x.start === start)
      if (!r) return undefined
      const t = s.copy()
      if (!(r.launched ? replayInto(t, r) : this.predictInto(t, r))) return undefined
      s = t
      if (s.finished || s.runs >= this.limit) return undefined
      const got = this.handFrom(s, false)
      if (got) return got
    }
    return undefined
  }

  /**
   * `s` takes its next run, `r` (in flight), as guessed: what `r` saw so far, then what the runs seen say; false where
   * they do not say what it would do.
   */
  private predictInto(s: Reduced, r: AheadRun): boolean {
    const pick = s.next()
    if (!pick) return false
    const launched: number[] = []
    const fps: Footprint[] = []
    for (;;) {
      const ready = launched.length < r.readies.length ? r.readies[launched.length] : this.readyGuess(launched)
      // No run is longer than the longest seen, or than the sessions' steps (a guard: the guesses need not agree).
      if (ready === undefined || launched.length > Math.max(this.longest, this.steps)) return false
      if (!ready.length) break
      // Each step's footprint known before the next choice (as when no step waits).
      while (s.known < fps.length) s.step(fps[s.known])
      const x = pick(ready)
      launched.push(x)
      // A step no run has shown (the first run's, say): nothing to guess from, no run made from a guess.
      const fp = r.seen[launched.length - 1] ?? this.seen(launched)
      if (!fp) return false
      fps.push(fp)
    }
    s.done(launched, fps)
    return true
  }

  /**
   * The ready choices after `launched`: as seen after the same choices, else after the same choices in another order
   * ([] where such a run ended), else (declared steps: `counts`, each session's) every session with steps left.
   */
  private readyGuess(launched: readonly number[]): readonly number[] | undefined {
    const at = launched.join(',')
    const bag = bagOf(launched)
    const seen = this.readySeen.get(at) ?? (this.endAt.has(at) ? [] : (this.readyBag.get(bag) ?? (this.endBag.has(bag) ? [] : undefined)))
    if (seen || !this.counts) return seen
    return this.counts.map((c, s) => (launched.filter((x) => x === s).length < c ? s : -1)).filter((s) => s >= 0)
  }

  /** The footprint of the step a prefix of choices ends with: as seen at that prefix, else the session's same step elsewhere, else 'all'. */
  private guess(prefix: readonly number[]): Footprint {
    return this.seen(prefix) ?? 'all'
  }

  /** The footprint of the step a prefix of choices ends with, as seen at that prefix or of the session's same step elsewhere. */
  private seen(prefix: readonly number[]): Footprint | undefined {
    const at = this.seenAt.get(prefix.join(','))
    if (at) return at
    const last = prefix[prefix.length - 1]
    const k = prefix.filter((x) => this.sessionOf(x) === this.sessionOf(last)).length
    return this.seenStep.get(`${last}:${k}`)
  }

  private hand(copy: Reduced, own: boolean): AheadRun | undefined {
    const pick = copy.next()
    if (!pick) return undefined
    const run: AheadRun = {
      pick: (ready, left) => {
        run.readies.push([...ready])
        run.known.push(copy.known)
        return pick(ready, left)
      },
      prefix: [...copy.replays],
      start: copy.startState(),
      own,
      step: (fp) => {
        run.seen.push(fp)
        copy.step(fp)
      },
      readies: [],
      known: [],
      seen: [],
    }
    this.flying.push(run)
    this.made++
    return run
  }

  /** A run handed out is over: what it launched and the footprints. Then every run that is `main`'s next is taken. */
  done(run: AheadRun, launched: readonly number[], fps: readonly (Footprint | undefined)[]): void {
    const i = this.flying.indexOf(run)
    if (i < 0) return
    this.flying.splice(i, 1)
    run.launched = [...launched]
    run.fps = [...fps]
    for (let d = 0; d < launched.length; d++) {
      const f = fps[d]
      if (f === undefined) continue
      this.seenAt.set(launched.slice(0, d + 1).join(','), f)
      const k = launched.slice(0, d + 1).filter((x) => this.sessionOf(x) === this.sessionOf(launched[d])).length
      this.seenStep.set(`${launched[d]}:${k}`, f)
    }
    run.readies.forEach((ready, d) => {
      this.readySeen.set(launched.slice(0, d).join(','), ready)
      this.readyBag.set(bagOf(launched.slice(0, d)), ready)
    })
    this.longest = Math.max(this.longest, launched.length)
    this.endAt.add(launched.join(','))
    this.endBag.add(bagOf(launched))
    this.over.push(run)
    this.fold()
  }

  /** A run handed out that ended with no order (stopped): forgotten. */
  drop(run: AheadRun): void {
    const i = this.flying.indexOf(run)
    if (i >= 0) this.flying.splice(i, 1)
  }

  /** The runs taken since last asked, in the one-job search's order. */
  takenSince(): AheadRun[] {
    const t = this.fresh
    this.fresh = []
    return t
  }

  /** Takes every run over that is `main`'s next, as the one-job search would have made it; drops those that cannot be. */
  private fold(): void {
    for (;;) {
      if (this.main.finished || this.main.runs >= this.limit) return
      const prefix = this.main.replays
      const candidates = this.over.filter((r) => sameList(r.prefix, prefix))
      let took = false
      for (const r of candidates) {
        this.over.splice(this.over.indexOf(r), 1)
        const trial = this.main.copy()
        if (!replayInto(trial, r)) continue
        this.main.adopt(trial)
        this.fresh.push(r)
        took = true
        break
      }
      if (!took) return
    }
  }
}

/** Runs `r`'s record through `s`'s own next run: true when it chooses as `r` did at every choice (then `s` took it). */
function replayInto(s: Reduced, r: AheadRun): boolean {
  const pick = s.next()
  if (!pick || !r.launched) return false
  const fps = r.fps ?? []
  let fed = 0
  for (let i = 0; i < r.launched.length; i++) {
    // The footprints the run knew when it chose, fed as they came.
    for (; fed < (r.known[i] ?? fed); fed++) s.step(fps[fed])
    if (!r.readies[i] || pick(r.readies[i]) !== r.launched[i]) return false
  }
  s.done(r.launched, fps)
  return true
}

/** A list of choices as a bag (their order forgotten). */
function bagOf(xs: readonly number[]): string {
  return [...xs].sort((a, b) => a - b).join(',')
}

function sameList(a: readonly number[], b: readonly number[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i])
}
