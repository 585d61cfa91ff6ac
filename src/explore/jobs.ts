// race explore --jobs: the search's runs handed out to several jobs at once. A job asks for its next run; when none
// is waiting but runs are in flight (an exhaustive search's branches are found by the runs before them), it waits
// until one of them ends. Every wait ends when a run ends or the exploration stops (an error, Ctrl-C): nothing here
// waits on time.

import { spaceLabel, type Driver } from '../db/driver.js'
import type { Touched } from '../engine/footprint.js'
import type { Words } from '../engine/refusals.js'
import type { Chooser, TrialFacts } from '../engine/types.js'
import { RunError, UsageError } from '../errors.js'
import { specFailure } from '../specfile/common.js'
import type { RunContext } from '../lifecycle.js'
import type { Entry } from '../permutation.js'
import type { Plan } from '../plan.js'
import { runConfig } from '../run/config.js'
import type { Trial } from '../run/judge.js'
import { openDriver } from '../run/lab.js'
import type { Bounds } from '../run/params.js'
import type { Scenario } from '../scenario.js'
import { stopOf, type Stopped } from './findings.js'
import type { Handle } from './strategy.js'

export class Handout<H> {
  private inFlight = 0
  private waiters: (() => void)[] = []
  stopped = false
  constructor(private readonly source: () => H | undefined) {}

  /** The next run, waiting while none is left but some are in flight; undefined when the search is over or stopped. */
  async take(): Promise<H | undefined> {
    for (;;) {
      if (this.stopped) return undefined
      const h = this.source()
      if (h !== undefined) {
        this.inFlight++
        return h
      }
      if (this.inFlight === 0) return undefined
      await this.change()
    }
  }

  /** A run handed out has ended (and its result is in): jobs waiting look again. */
  finish(): void {
    this.inFlight = Math.max(0, this.inFlight - 1)
    this.wake()
  }

  /** A run in flight has shown more of itself (a step's footprint): jobs waiting look again (the reduced search may now guess past it). */
  nudge(): void {
    if (this.waiters.length) this.wake()
  }

  /** Ends the handing out: every job waiting gets undefined, and none gets a run again. */
  stop(): void {
    this.stopped = true
    this.wake()
  }

  /** Resolves when no run is in flight (or the handout stopped). */
  async idle(): Promise<void> {
    while (this.inFlight > 0 && !this.stopped) await this.change()
  }

  private change(): Promise<void> {
    return new Promise((resolve) => this.waiters.push(resolve))
  }

  private wake(): void {
    const w = this.waiters
    this.waiters = []
    for (const f of w) f()
  }
}

/** What a job runs for: the search (explore/search.ts) that chooses each of its trials and takes what they came to. */
export interface JobHost {
  ctx: RunContext
  lab: Driver
  scenario: Scenario
  p: Plan
  bounds: Bounds
  jobs: number
  o: { word?: Words; keepOnStop?: boolean }
  choose(job: Job): Promise<Chooser | undefined>
  onTrial(job: Job, facts: TrialFacts): void
  onOrder(job: Job, ran: Entry[]): void
  stop(): void
}

/** A job: its own control connection, schema and sessions, and the trial it runs. */
export interface Job {
  index: number
  lab: Driver
  /** The trial in flight: its free choices (sessions chosen by the strategy, not pinned), and their footprints. */
  free: number[]
  fps: Touched[]
  last?: { facts: TrialFacts; trial: Trial }
  /** The explore run in flight: its place in the search's order, and what the search handed out. */
  run?: Handle
}

type EngineRun = Awaited<ReturnType<typeof import('../engine/run.js').run>>

/**
 * The search's trials on its jobs (one lab a job: the first is the command's), until every job has none left.
 * `out`: the first job's run, undefined when stopped; `stopped`: the command's --run-timeout or a signal, when the
 * command asked to keep what was found (keepOnStop). An error of a job ends the others, and is the search's.
 */
export async function runJobs(h: JobHost): Promise<{ out: EngineRun | undefined; stopped: Stopped | undefined }> {
  const { ctx, bounds } = h
  const stop = () => h.stop()
  ctx.signal.addEventListener('abort', stop, { once: true })
  const { run } = await import('../engine/run.js')
  const labs: Driver[] = [h.lab]
  if (h.jobs > 1) {
    const opened = await Promise.allSettled(Array.from({ length: h.jobs - 1 }, () => openDriver(ctx, h.lab.target, bounds.connectTimeoutMs)))
    for (const x of opened) if (x.status === 'fulfilled') labs.push(x.value)
    const failed = opened.find((x) => x.status === 'rejected')
    if (failed) {
      await Promise.all(labs.slice(1).map((l) => l.close().catch(() => {})))
      ctx.signal.removeEventListener('abort', stop)
      throw (failed as PromiseRejectedResult).reason
    }
  }
  const runJob = (job: Job) =>
    run(
      job.lab,
      runConfig(h.ctx, h.p, bounds, {
        trials: Number.MAX_SAFE_INTEGER,
        word: h.o.word,
        choose: () => h.choose(job),
        onTrial: (_k, facts) => h.onTrial(job, facts),
        onOrder: (_k, ran) => h.onOrder(job, ran),
      }),
    ).catch((e) => {
      // One job failing ends the others (each ends its run at its next choice, and drops its schema).
      stop()
      throw e
    })
  try {
    const settled = await Promise.allSettled(labs.map((l, index) => runJob({ index, lab: l, free: [], fps: [] })))
    const failed = settled.find((x) => x.status === 'rejected')
    // A stop may also end every job at its next choice with no error (the handout stopped): not a finished search.
    const stopped = h.o.keepOnStop ? stopOf(ctx) : undefined
    if (failed && !stopped) throw specFailure(h.scenario, exploreFailure((failed as PromiseRejectedResult).reason))
    return { out: failed ? undefined : (settled[0] as PromiseFulfilledResult<EngineRun>).value, stopped }
  } finally {
    ctx.signal.removeEventListener('abort', stop)
    await Promise.all(labs.slice(1).map((l) => l.close().catch(() => {})))
  }
}

/** An interleaving that cannot finish (every session left waits for one that has run all its steps) ends the exploration: say so in explore's words. */
function exploreFailure(e: unknown): unknown {
  if (e instanceof UsageError && /^the permutation cannot finish/.test(e.message)) {
    return new RunError(`an interleaving cannot finish: ${e.message.replace(/^the permutation cannot finish: /, '').replace(/: put the waiting step.*$/, '')}; race explore needs every interleaving to end (release such locks in the sessions' last steps)`)
  }
  return e
}

/**
 * A footprint named as in every job: each job's trials run in a schema of its own (race_<race>_<8 hex>, driver.ts
 * spaceName), and the reduced search compares the footprints of runs on different jobs.
 */
export function jobFootprint(raceId: string, fp: Touched): Touched {
  if (fp === 'all') return fp
  const own = new RegExp(`\\b(race_${spaceLabel(raceId)}_)[0-9a-f]{8}\\b`, 'g')
  const name = (r: string) => r.replace(own, '$1job')
  return { reads: fp.reads.map(name), writes: fp.writes.map(name) }
}
